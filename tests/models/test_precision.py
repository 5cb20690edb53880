"""bf16-autocast on CPU, the precision `model.precision=auto` picks on CPUs with AVX512-BF16/AMX: a training step's
loss and gradient stay close to fp32's on the same batch, the sampler/learner mismatch signal (§17.6) stays within
a bound that fits bf16's 8-bit mantissa, and a tiny model still learns. These pin their precision, so they test
the bf16 path on every machine whatever `auto` decides there."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import pytest
import torch
from tiny_config import TINY_LEARNING, TINY_LEARNING_STEPS, tiny_overrides

from grpokit.config import build_config
from grpokit.models import resolve_precision
from grpokit.training import Trainer, fit

TINY = tiny_overrides()


def rows(run_dir: Path) -> list[dict]:
    return [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines() if "time/step" in x]


def test_bf16_autocast_step_is_close_to_fp32_on_the_same_batch(tmp_path: Path) -> None:
    """One GRPO update (KL loss to a frozen reference on a perturbed policy, so the loss depends on the numerics)
    on one sampled batch, computed in fp32 and under bf16 autocast from the same weights."""
    cfg = build_config("grpo", overrides=[*TINY, "model.precision=fp32", "algo.kl_coef=0.5", "train.steps=1"])
    trainer = Trainer(cfg, tmp_path)
    with torch.no_grad():
        for p in trainer.model.parameters():
            p.add_(0.02 * torch.randn_like(p))
    torch.manual_seed(0)
    b = trainer.draw()
    trainer.advantages(b)
    weights = copy.deepcopy(trainer.model.state_dict())
    opt = copy.deepcopy(trainer.optimizer.state_dict())
    out = {}
    for name in ("fp32", "bf16-autocast"):
        trainer.model.load_state_dict(weights)
        trainer.optimizer.load_state_dict(opt)
        trainer.precision = resolve_precision(name, "cpu")
        out[name] = trainer.update(copy.deepcopy(b))
    trainer.rewards.close()
    f32, bf = out["fp32"], out["bf16-autocast"]
    for key in ("actor/loss", "actor/kl_loss", "train/grad_norm"):
        assert math.isfinite(bf[key]) and math.isfinite(f32[key])
    assert f32["actor/kl_loss"] > 1e-3  # the perturbation makes the KL term matter
    assert bf["actor/loss"] == pytest.approx(f32["actor/loss"], rel=5e-2, abs=1e-3)
    assert bf["train/grad_norm"] == pytest.approx(f32["train/grad_norm"], rel=5e-2)


def test_bf16_autocast_sampler_learner_mismatch_stays_within_a_bf16_bound(tmp_path: Path) -> None:
    """Sampler (shared-prefix decode) and learner (one forward) compute the same distribution by different kernel
    paths; in bf16 they agree to bf16 rounding (fp32: < 1e-3, test_trainer.py). Bounds: a log-prob error of a few
    bf16 ulps at the largest token, and a KL far below the detector's 1e-3."""
    cfg = build_config("dapo", overrides=[*TINY, "model.precision=bf16-autocast", "train.steps=1"])
    trainer = Trainer(cfg, tmp_path)
    assert trainer.precision.name == "bf16-autocast"
    fit(trainer, None, eval_before=False)
    r = rows(tmp_path)[0]
    assert 0 < r["mismatch/abs_diff_max"] < 0.1
    assert r["mismatch/abs_diff_mean"] < 1e-2
    assert abs(r["mismatch/kl_k3"]) < 1e-4


@pytest.mark.trains
def test_a_tiny_model_learns_under_bf16_autocast(tmp_path: Path, margin) -> None:  # noqa: ANN001
    """The vowel-fraction reward rises under bf16 autocast (as test_tiny_model_learns_toy_reward in fp32). Over the
    10 runs of scripts/kernel_matrix.py (seeds 0-4 x kernel sets default/avx2, bf16 emulated on an AVX2 CPU) the
    rise of the last 4 steps' mean over the first 4's was 0.10-0.67: the bound is 0.05, half the smallest."""
    extra = ["model.precision=bf16-autocast", *TINY_LEARNING, f"train.steps={TINY_LEARNING_STEPS}"]
    fit(Trainer(build_config("grpo", overrides=[*TINY, *extra]), tmp_path), None, eval_before=False)
    rewards = [r["reward/mean"] for r in rows(tmp_path)]
    assert all(math.isfinite(x) for x in rewards)
    first, last = sum(rewards[:4]) / 4, sum(rewards[-4:]) / 4
    margin("reward rise (> 0.05)", last - first)
    assert last > first + 0.05, (first, last, rewards)
