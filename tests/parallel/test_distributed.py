"""Multi-process training under torchrun (gloo on this CPU), for real: two processes of the tiny model produce
the parameters one process produces on the same global batch (DDP sums gradients; loss denominators are
all-reduced, docs/math.md §1.5), a 2-process `grpokit train` writes one log and per-rank checkpoints and resumes, and
the
ranks' prompt streams never overlap."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from grpokit.parallel.distributed import reduce_metrics
from grpokit.training.phases.rollout import PromptStream

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "dist_scripts" / "one_update.py"


def _env() -> dict[str, str]:
    # one thread per process: two ranks on two cores
    return {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}


def _torchrun(n: int, *args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={n}", *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=_env(), timeout=timeout, cwd=ROOT)


@pytest.mark.parametrize(
    ("recipe", "sharding", "split", "mode"),
    [
        ("grpo", "ddp", "even", ""),
        ("dapo", "ddp", "even", ""),
        ("dapo", "fsdp2", "uneven", ""),
        ("grpo", "ddp", "even", "episodes"),
    ],
)
def test_two_processes_update_equals_one_process(
    recipe: str, sharding: str, split: str, mode: str, tmp_path: Path
) -> None:
    """DDP (whole policy per rank) and FSDP2 (learner sharded over the ranks, its replica refreshed after the
    step) both give the 1-process update; under FSDP2 with 3 prompts on one rank and 1 on the other, the rank with
    fewer micro-batches pads with zero-loss repeats so the all-gathers stay in step. A batch of multi-turn episodes
    (`episodes`: the environment's tokens in context, out of the loss) too."""
    one = subprocess.run(
        [sys.executable, str(SCRIPT), str(tmp_path), recipe, "4", "ddp", "even", mode],
        capture_output=True,
        text=True,
        env=_env(),
    )
    assert one.returncode == 0, one.stderr[-3000:]
    two = _torchrun(2, str(SCRIPT), str(tmp_path), recipe, "4", sharding, split, mode, timeout=300)
    assert two.returncode == 0, two.stderr[-3000:]
    ref = torch.load(tmp_path / "params_ddp_rank0_of1.pt")
    r0, r1 = (torch.load(tmp_path / f"params_{sharding}_rank{r}_of2.pt") for r in (0, 1))
    from grpokit.models import load_model_and_tokenizer

    init = dict(load_model_and_tokenizer("tiny", dtype="fp32", device="cpu", seed=0)[0].named_parameters())
    moved = 0.0
    for name, p in ref.items():
        assert torch.equal(r0[name], r1[name]), name  # every rank's policy holds the same weights
        assert float((r0[name] - p).abs().max()) <= 1e-5, (name, float((r0[name] - p).abs().max()))
        moved = max(moved, float((p - init[name].detach()).abs().max()))
    assert moved > 1e-4  # the update moved the weights far more than the tolerance


@pytest.mark.parametrize("sharding", ["ddp", "fsdp2"])
def test_torchrun_train_writes_one_log_and_resumes(sharding: str, tmp_path: Path) -> None:
    out = tmp_path / "run"
    sets = [
        f"train.sharding={sharding}",
        "model.precision=fp32",  # the mismatch bound below is fp32's
        "train.lr=1e-3",  # weights move enough that a learner left at its initial weights would show
        "rollout.prompts_per_step=4",
        "rollout.group_size=4",
        "rollout.max_new_tokens=6",
        "data.eval_size=4",
        "train.eval_every=0",
        "train.save_every=1",
        "train.save_only_model=false",  # continued below with --steps 3: its last checkpoint keeps the optimizer
        "reward.functions=[toy_rewards:vowel_frac]",
        "train.steps=2",
    ]
    common = ["-m", "grpokit", "train", "--model", "tiny", *[x for s in sets for x in ("--set", s)]]
    first = _torchrun(2, *common, "--output-dir", str(out))
    assert first.returncode == 0, first.stderr[-3000:]
    ck = out / "checkpoints" / "step_2"
    state = json.loads(next(ck.rglob("state.json")).read_text())
    ranks = state["ranks"]
    assert len(ranks) == 2 and all(r["data_position"] == 4 for r in ranks)  # 2 steps x 2 prompts per rank
    again = _torchrun(2, "-m", "grpokit", "train", "--resume", str(out), "--steps", "3")
    assert again.returncode == 0, again.stderr[-3000:]
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    steps = [r["step"] for r in rows if "time/generate" in r]
    assert steps == [1, 2, 3]  # one writer, nothing duplicated by the resume
    assert all(r["train/batch_size"] == 16 for r in rows if "time/generate" in r)  # global: 4 prompts x 4
    # the resumed learner holds the checkpoint's weights: its log-probs equal the sampler's (the restored policy's)
    assert [r["mismatch/abs_diff_mean"] < 1e-4 for r in rows if "time/generate" in r] == [True] * 3, rows
    info = json.loads((out / "run.json").read_text())
    assert info["world_size"] == 2


@pytest.mark.skipif(
    os.environ.get("GRPOKIT_REQUIRE_VLLM") != "1" and importlib.util.find_spec("vllm") is None,
    reason="vLLM is not installed",
)
def test_torchrun_with_a_colocated_vllm_per_rank(tmp_path: Path) -> None:
    """Each rank starts its own vLLM (external launcher, tensor parallel 1) and trains; rank 0 writes the log."""
    out = tmp_path / "run"
    sets = [
        "model.precision=fp32",  # the mismatch bound below is fp32's (bf16 vLLM vs bf16-autocast learner: ~0.05)
        "rollout.engine=vllm",
        "rollout.prompts_per_step=2",
        "rollout.group_size=4",
        "rollout.max_new_tokens=8",
        "data.eval_size=2",
        "train.eval_every=0",
        "train.steps=1",
        "algo.group_filter=all",
        "reward.functions=[toy_rewards:vowel_frac]",
    ]
    args = ["-m", "grpokit", "train", "--recipe", "dapo", "--model", "smollm2-135m-instruct"]
    p = _torchrun(2, *args, *[x for s in sets for x in ("--set", s)], "--output-dir", str(out))
    assert p.returncode == 0, p.stderr[-3000:]
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    step = [r for r in rows if "time/generate" in r]
    assert len(step) == 1 and step[0]["train/batch_size"] == 8 and step[0]["mismatch/abs_diff_mean"] < 1e-3
    info = json.loads((out / "run.json").read_text())
    assert info["engine"] == "vllm" and info["world_size"] == 2


def test_ranks_read_disjoint_prompts() -> None:
    streams = [PromptStream(10, seed=3, rank=r, world=2) for r in range(2)]
    a, b = streams[0].take(5), streams[1].take(5)
    assert sorted(a + b) == list(range(10))  # one epoch split between the ranks, no prompt twice
    assert PromptStream(10, seed=3).take(10) == [x for pair in zip(a, b) for x in pair]


def test_global_metrics_sum_counts_and_average_the_rest() -> None:
    rows = [
        {"train/batch_size": 8.0, "reward/mean": 0.2, "time/step": 3.0},
        {"train/batch_size": 8.0, "reward/mean": 0.6, "time/step": 5.0},
    ]
    m = reduce_metrics(rows)
    assert m == {"train/batch_size": 16.0, "reward/mean": pytest.approx(0.4), "time/step": 5.0}


def test_sharding_choices_are_the_registered_strategies() -> None:
    """`train.sharding` accepts exactly the registered strategies, refuses others and FSDP2 with LoRA by name."""
    from grpokit.config import ConfigError, build_config
    from grpokit.parallel.sharding import SHARDINGS

    assert sorted(SHARDINGS) == ["ddp", "fsdp2"]
    for name in SHARDINGS:
        assert build_config("grpo", overrides=[f"train.sharding={name}"]).train.sharding == name
    with pytest.raises(ConfigError, match=r"train.sharding='zero3'.*ddp or fsdp2"):
        build_config("grpo", overrides=["train.sharding=zero3"])
    with pytest.raises(ConfigError, match=r"train.sharding.*LoRA.*train.sharding=ddp"):
        build_config("grpo", overrides=["train.sharding=fsdp2", "model.lora_r=8"])
