"""The training loop on tiny random Llama models with the real SmolLM2 tokenizer: every recipe runs, a tiny
model learns a toy reward under grpo and dapo, resume continues exactly, reward failures are isolated."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import torch
from tiny_config import TINY_LEARNING, TINY_LEARNING_STEPS, tiny_overrides

from grpokit.config import build_config, list_recipes
from grpokit.rewards import RewardFailureError
from grpokit.training import Trainer, fit

# runs under whatever `model.precision=auto` picks; `make test` runs this module a second time under the other
# CPU decision (GRPOKIT_CPU_BF16 flipped), so both the fp32 and the bf16-autocast paths are exercised on any machine
pytestmark = pytest.mark.precision

FAST = tiny_overrides()


def run(recipe: str, tmp: Path, steps: int, extra: list[str] | None = None) -> tuple[Trainer, dict]:
    cfg = build_config(recipe, overrides=FAST + [f"train.steps={steps}"] + list(extra or []))
    trainer = Trainer(cfg, tmp)
    summary = fit(trainer, None, eval_before=False)
    return trainer, summary


def metrics(run_dir: Path) -> list[dict]:
    return [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("recipe", sorted(list_recipes()))
def test_every_recipe_runs_three_steps(recipe: str, tmp_path: Path) -> None:
    extra = ["algo.max_gen_rounds=8"]
    if "gae" in build_config(recipe).algo.advantage:
        extra.append("critic.pretrain_max_steps=1")
    trainer, summary = run(recipe, tmp_path, 3, extra)
    rows = [r for r in metrics(tmp_path) if "time/step" in r]
    assert [r["step"] for r in rows] == [1, 2, 3]
    for r in rows:
        assert r["train/batch_size"] == 8
        assert r["reward/mean"] is not None
        assert (
            r.get("actor/loss") is not None
            or r.get("critic/value_loss") is not None
            or r.get("train/skipped_update") == 1.0
        )
        assert r["entropy/token_mean"] is not None and r["entropy/token_mean"] > 0
    assert (tmp_path / "final" / "config.json").exists()
    assert (tmp_path / "checkpoints" / "step_3" / "model.safetensors").exists()


@pytest.mark.trains
@pytest.mark.parametrize("recipe", ["grpo", "dapo"])
def test_tiny_model_learns_toy_reward(recipe: str, tmp_path: Path, margin) -> None:  # noqa: ANN001
    """The vowel-fraction reward rises clearly: first 4 steps' mean vs last 4 steps' mean. Margin: a rise of
    0.15-0.42 (bound 0.1) for grpo and dapo in all 10 runs of scripts/kernel_matrix.py (seeds 0-4 x kernel sets
    default/avx2)."""
    extra = [
        *TINY_LEARNING,
        "algo.max_gen_rounds=8",
        "algo.ds_oversample=1",  # every group has reward variance here: one round of P prompts fills the batch
        "algo.soft_overlong=false",
        # a policy that has learned emits one completion per prompt (zero-variance groups), which ends DAPO's
        # dynamic sampling with an error by design; the short batches that follow train nothing
        "algo.ds_shortfall=partial",
    ]
    run(recipe, tmp_path, TINY_LEARNING_STEPS, extra)
    rewards = [r["reward/mean"] for r in metrics(tmp_path) if "reward/mean" in r]
    first, last = sum(rewards[:4]) / 4, sum(rewards[-4:]) / 4
    margin("reward rise (> 0.1)", last - first)
    assert last > first + 0.1, (first, last, rewards)


def test_resume_continues_from_checkpoint_with_identical_metrics(tmp_path: Path) -> None:
    """4 straight steps == 2 steps, stop, resume for 2 more (weights, optimizer, RNG, data position restored)."""
    extra = ["train.save_every=2", "train.lr=1e-3"]
    straight, _ = run("dapo", tmp_path / "a", 4, extra)
    first, _ = run("dapo", tmp_path / "b", 2, extra)
    cfg = build_config("dapo", overrides=FAST + ["train.steps=4"] + extra)
    resumed = Trainer(cfg, tmp_path / "b")
    assert resumed.restore() == 2
    fit(resumed, None, eval_before=False)
    a = [r for r in metrics(tmp_path / "a") if "time/step" in r]
    b = [r for r in metrics(tmp_path / "b") if "time/step" in r]
    assert [r["step"] for r in b] == [1, 2, 3, 4]
    for ra, rb in zip(a, b):
        assert ra["reward/mean"] == pytest.approx(rb["reward/mean"], abs=1e-6)
        assert ra["actor/loss"] == pytest.approx(rb["actor/loss"], rel=1e-4, abs=1e-6)
    for pa, pb in zip(straight.model.parameters(), resumed.model.parameters()):
        torch.testing.assert_close(pa, pb, rtol=1e-5, atol=1e-6)


def test_final_model_loads_with_transformers(tmp_path: Path) -> None:
    from transformers import AutoModelForCausalLM

    trainer, summary = run("grpo", tmp_path, 1)
    model = AutoModelForCausalLM.from_pretrained(summary["final_model"], local_files_only=True)
    for (n, p), q in zip(trainer.model.named_parameters(), model.parameters()):
        torch.testing.assert_close(p.detach(), q.detach(), msg=n)


def test_reward_exception_is_isolated_and_counted(tmp_path: Path) -> None:
    run(
        "grpo",
        tmp_path,
        2,
        ["reward.functions=[toy_rewards:raises_on_e]", "rollout.group_size=8", "reward.max_fail_frac=1.0"],
    )
    rows = [r for r in metrics(tmp_path) if "time/step" in r]
    samples = [json.loads(x) for x in (tmp_path / "completions.jsonl").read_text().splitlines()]
    assert any("reward_failure" in s for s in samples)  # the offending sample is reported
    failed = 0
    for r in rows:
        failed += r["reward/failures_exception"]
        # failed samples are excluded: the valid share is exactly the unfailed share of the 16 samples
        assert r["reward/valid_frac"] == pytest.approx(1 - r["reward/failures_exception"] / 16)
    assert failed >= 1


def test_reward_failing_everywhere_stops_with_clear_message(tmp_path: Path) -> None:
    with pytest.raises(RewardFailureError, match="always_raises"):  # None everywhere is not applicable, no failure
        run("grpo", tmp_path, 2, ["reward.functions=[toy_rewards:always_raises]"])
    # nothing already written is lost: the config was written before the failure
    assert (tmp_path / "config.yaml").exists()


def test_lora_trains_only_adapters(tmp_path: Path) -> None:
    trainer, summary = run("dapo", tmp_path, 2, ["model.lora_r=4", "train.lr=1e-2"])
    names = [n for n, p in trainer.model.named_parameters() if p.requires_grad]
    assert names and all("lora_" in n for n in names)
    rows = [r for r in metrics(tmp_path) if "time/step" in r]
    assert all(r["train/grad_norm"] > 0 for r in rows if "train/grad_norm" in r)
    # the merged final model is a plain transformers model
    from transformers import AutoModelForCausalLM

    merged = AutoModelForCausalLM.from_pretrained(summary["final_model"], local_files_only=True)
    assert not any("lora_" in n for n, _ in merged.named_parameters())


def test_trains_on_a_jsonl_file_with_custom_keys(tmp_path: Path) -> None:
    data = tmp_path / "qa.jsonl"
    data.write_text(
        "".join(json.dumps({"question": f"What is {a} + 1?", "solution": str(a + 1)}) + "\n" for a in range(12))
    )
    run(
        "grpo",
        tmp_path / "run",
        1,
        [
            f"data.task={data}",
            "data.prompt_key=question",
            "data.answer_key=solution",
            "reward.functions=[exact_numeric]",
        ],
    )
    rows = [r for r in metrics(tmp_path / "run") if "time/step" in r]
    assert len(rows) == 1 and rows[0]["reward/valid_frac"] == 1.0


def test_on_policy_step_reports_sampler_learner_mismatch(tmp_path: Path) -> None:
    """§17.6 is measured from the training forward itself when no separate old-logprob pass runs; the sampler and
    the learner are the same fp32 model here (precision pinned: the bound is fp32's; bf16-autocast has its own in
    test_precision.py), so the mismatch is tiny — and it grows when the sampler samples at a different temperature
    than the learner assumes."""
    run("dapo", tmp_path / "same", 1, ["model.precision=fp32"])
    same = [r for r in metrics(tmp_path / "same") if "time/step" in r][0]
    assert same["mismatch/abs_diff_max"] < 1e-3
    trainer, _ = run("dapo", tmp_path / "hot", 0, ["model.precision=fp32"])
    trainer.engine.generate  # noqa: B018 (the engine object is what we perturb next)
    cfg_temp = trainer.cfg.rollout.temperature
    trainer.cfg.rollout.temperature = cfg_temp  # learner keeps T=1
    generate = trainer.engine.generate

    def hotter(prompts, params):  # sample at T=2 while the learner scores at T=1
        return generate(prompts, dataclasses.replace(params, temperature=2.0))

    trainer.engine.generate = hotter
    m = trainer.train_step().metrics
    assert m["mismatch/abs_diff_mean"] > 0.01  # > 10x the same-temperature mismatch above


@pytest.mark.trains
def test_reward_component_correlation_is_logged_and_flags_a_hackable_reward(tmp_path: Path) -> None:
    """Total reward = correctness (always 0 here) + a non-correctness component: the total follows the component
    (r = 1) and not correctness, which the noisy-reward detector reports."""
    run(
        "grpo",
        tmp_path,
        5,
        [
            "reward.functions=[toy_rewards:always_zero,toy_rewards:vowel_frac]",
            "reward.weights=[1.0,1.0]",
            "monitor.thresholds={noisy_reward: {window: 3}}",
        ],
    )
    rows = [r for r in metrics(tmp_path) if "time/step" in r]
    corr = [r[k] for r in rows for k in r if k.startswith("reward/corr/")]
    assert corr and all(c == pytest.approx(1.0) for c in corr)
    alerts = [json.loads(x) for x in (tmp_path / "alerts.jsonl").read_text().splitlines()]
    assert any(a["detector"] == "noisy_reward" for a in alerts)


@pytest.mark.trains
def test_kl_to_reference_is_measured_on_policy_and_to_the_initial_model_under_ema(tmp_path: Path, margin) -> None:  # noqa: ANN001
    """§17.3: GRPO's on-policy step logs KL to the frozen reference from its own forward (0 at step 1, > 0 after an
    update); T1's EMA reference also logs KL to the initial model. With eta = 0 the anchor is the policy itself after
    every update, so at each step's forward KL to the anchor is 0 while KL to the initial model has grown: the
    ordering holds by construction. (At eta = 0.9 the ordering of the two 8-sample k3 estimates after 3 steps held
    on one kernel set and flipped under ATEN_CPU_CAPABILITY=default with seed 3: a trajectory, not a property.)
    Margins over the 10 runs of scripts/kernel_matrix.py (seeds 0-4 x default/avx2): GRPO's KL at step 3
    0.019-0.029, T1's KL to the initial model 0.010-0.017 (bounds 1e-4)."""
    run("grpo", tmp_path / "grpo", 3, ["train.lr=1e-2"])
    rows = [r for r in metrics(tmp_path / "grpo") if "time/step" in r]
    assert rows[0]["kl_ref/k3"] == pytest.approx(0.0, abs=1e-6)
    margin("grpo kl_ref at step 3 (> 1e-4)", rows[-1]["kl_ref/k3"])
    assert rows[-1]["kl_ref/k3"] > 1e-4
    run("t1", tmp_path / "t1", 3, ["train.lr=1e-2", "algo.ref_ema_eta=0.0"])
    rows = [r for r in metrics(tmp_path / "t1") if "time/step" in r]
    margin("t1 kl_init at step 3 (> 1e-4)", rows[-1]["kl_init/k3"])
    assert rows[-1]["kl_init/k3"] > 1e-4
    assert all(r["kl_ref/k3"] == pytest.approx(0.0, abs=1e-5) for r in rows)  # the anchor is the policy
