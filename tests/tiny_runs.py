"""Real run directories from short trainings of the tiny model (for `grpokit report` and `grpokit compare` tests).

Two arms that differ the way compared runs do: a GRPO run on a dense toy reward with two mini-batches per step
(so clipping can act), and a DAPO run whose verifier never passes (every group zero-variance: dynamic sampling
uses its rounds, updates are skipped, the advantage-collapse alert fires)."""

from __future__ import annotations

from pathlib import Path

from tiny_config import SEED

from grpokit.config import build_config
from grpokit.training import Trainer, fit

COMMON = [
    "model.name=tiny",
    "rollout.prompts_per_step=2",
    "rollout.max_new_tokens=6",
    "data.eval_size=4",
    "train.save_every=0",
    "train.save_only_model=false",  # test_report continues a finished run: its last checkpoint keeps the optimizer
    "train.log_completions=3",
    f"train.seed={SEED}",
]
LEARNING = [
    *COMMON,
    "rollout.group_size=4",
    "train.steps=4",
    "train.eval_every=2",
    "train.mini_batches=2",
    "reward.functions=[toy_rewards:vowel_frac]",
]
COLLAPSING = [
    *COMMON,
    "rollout.group_size=2",
    "train.steps=3",
    "train.eval_every=0",
    "reward.functions=[toy_rewards:always_zero]",
    "algo.ds_shortfall=partial",
    "algo.max_gen_rounds=2",
    "monitor.thresholds={advantage_collapse: {window: 2}}",
]


def tiny_run(run_dir: Path, recipe: str, overrides: list[str]) -> Path:
    """Train the tiny model into `run_dir` (evaluation before and after) and return the directory."""
    trainer = Trainer(build_config(recipe, overrides=overrides), run_dir)
    fit(trainer, None, eval_before=True)
    return run_dir
