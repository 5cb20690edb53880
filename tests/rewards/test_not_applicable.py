"""A sample no reward applies to (every reward returned None) is "not applicable", not a failure (issue 28 item 6).

TRL's GRPOTrainer sums the weighted rewards with nansum, so such a sample scores 0, and warns; grpokit does the same
by default (`not_applicable="zero"`) or leaves the sample out of training (`"exclude"`), counts it in
`reward/na_frac` and never toward `max_fail_frac`. The rewards here are real TRL-style functions in a file, run in
the sandboxed worker like any user reward."""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path

import pytest

from grpokit.config import ConfigError, build_config
from grpokit.data import Example
from grpokit.rewards import FAILURE_KINDS, RewardManager
from grpokit.rewards.applicability import NOT_APPLICABLE

MATH_ONLY = '''
def math_only(completions, task, answer, **kwargs):
    """TRL style: scores math rows only; None (not applicable) for the others."""
    return [float(c.strip() == a) if t == "math" else None for c, t, a in zip(completions, task, answer)]


def code_only(completions, task, **kwargs):
    return [0.5 if t == "code" else None for t in task]
'''


@pytest.fixture
def math_only(tmp_path: Path) -> str:
    path = tmp_path / "task_rewards.py"
    path.write_text(MATH_ONLY)
    return str(path)


def _rows(tasks: list[str]) -> list[Example]:
    return [Example("q", "4", columns={"prompt": "q", "answer": "4", "task": t}) for t in tasks]


COMPLETIONS = ["4", "5", "4", "x"]
TASKS = ["math", "math", "chat", "chat"]  # the reward applies to half the samples


def test_half_not_applicable_is_no_failure_and_scores_zero_by_default(math_only: str) -> None:
    # max_fail_frac=0: a single failed sample would raise; not-applicable samples do not count
    with RewardManager([(f"{math_only}:math_only", 1.0)], max_fail_frac=0.0) as m:
        result = m.score(COMPLETIONS, _rows(TASKS))
    assert result.failures == [] and result.not_applicable == [2, 3]
    assert result.rewards == [1.0, 0.0, 0.0, 0.0]
    assert result.metrics["reward/fail_frac"] == 0.0
    assert result.metrics["reward/na_frac"] == 0.5
    assert result.metrics["reward/math_only_none_frac"] == 0.5
    assert "none" not in FAILURE_KINDS and "reward/failures_none" not in result.metrics
    assert math.isnan(result.accuracy[2])  # the correctness reward did not apply: no accuracy either


def test_exclude_leaves_them_out_of_training_still_no_failure(math_only: str) -> None:
    with RewardManager([(f"{math_only}:math_only", 1.0)], max_fail_frac=0.0, not_applicable="exclude") as m:
        result = m.score(COMPLETIONS, _rows(TASKS))
    assert result.rewards[:2] == [1.0, 0.0] and math.isnan(result.rewards[2]) and math.isnan(result.rewards[3])
    assert result.failures == [] and result.metrics["reward/fail_frac"] == 0.0
    assert result.metrics["reward/na_frac"] == 0.5


def test_a_sample_one_reward_applies_to_is_applicable(math_only: str) -> None:
    specs = [(f"{math_only}:math_only", 1.0), (f"{math_only}:code_only", 2.0)]
    with RewardManager(specs) as m:
        result = m.score(["4", "4", "4"], _rows(["math", "code", "chat"]))
    assert result.rewards == [1.0, 1.0, 0.0]  # math 1 * 1; code 2 * 0.5; chat: neither applies -> 0
    assert result.not_applicable == [2] and result.metrics["reward/na_frac"] == pytest.approx(1 / 3)


def test_warned_once_with_the_count_not_per_batch(math_only: str, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="grpokit.rewards.manager"):
        with RewardManager([(f"{math_only}:math_only", 1.0)]) as m:
            for _ in range(3):
                m.score(COMPLETIONS, _rows(TASKS))
            assert m.not_applicable.samples == 6
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    [warning] = [w for w in warnings if "no reward applies" in w]
    assert warning.startswith("2 of 4 samples: no reward applies") and "reward/na_frac" in warning
    assert "shown once" in warning and "scored 0 (as TRL does)" in warning
    assert any("6 sample(s) in all had no applicable reward" in r.getMessage() for r in caplog.records)


def test_unknown_policy_is_one_clear_error() -> None:
    assert NOT_APPLICABLE.names() == ["exclude", "zero"]
    with pytest.raises(ValueError, match=r"reward.not_applicable='skip' is invalid: use zero \(.*\); exclude \("):
        RewardManager([("format", 1.0)], not_applicable="skip")


def test_config_key_defaults_to_zero_and_is_validated() -> None:
    assert build_config("grpo").reward.not_applicable == "zero"
    assert build_config("grpo", overrides=["reward.not_applicable=exclude"]).reward.not_applicable == "exclude"
    with pytest.raises(ConfigError, match=r"reward.not_applicable='skip' is invalid: use zero .* exclude"):
        build_config("grpo", overrides=["reward.not_applicable=skip"])


@pytest.mark.slow
def test_training_goes_on_when_no_reward_applies_and_logs_na_frac(tmp_path: Path) -> None:
    """Every sample not applicable used to stop the run as failures; now each step logs reward/na_frac 1.0 (scored 0,
    as TRL does: no learning signal, no failure)."""
    from tiny_config import tiny_overrides

    from grpokit.training import Trainer, fit

    cfg = build_config("grpo", overrides=tiny_overrides("train.steps=2", "reward.functions=[toy_rewards:always_none]"))
    fit(Trainer(cfg, tmp_path), None, eval_before=False)
    rows = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines() if '"time/step"' in x]
    assert [r["step"] for r in rows] == [1, 2]
    for r in rows:
        assert r["reward/na_frac"] == 1.0 and r["reward/fail_frac"] == 0.0
        assert r["reward/mean"] == 0.0 and r["reward/valid_frac"] == 1.0


def test_the_trainer_applies_the_configured_policy_and_reward_model_device(tmp_path: Path) -> None:
    """reward.not_applicable and reward.model_device reach the trainer's reward manager (auto: the learner's device);
    with `exclude`, samples no reward applies to are left out of training: reward/valid_frac 0, no failure."""
    from tiny_config import tiny_overrides

    from grpokit.training import Trainer, fit

    extra = ("train.steps=1", "reward.functions=[toy_rewards:always_none]", "reward.not_applicable=exclude")
    trainer = Trainer(build_config("grpo", overrides=tiny_overrides(*extra)), tmp_path)
    assert trainer.rewards.not_applicable.name == "exclude"
    assert trainer.rewards.model_device == str(trainer.device)
    fit(trainer, None, eval_before=False)
    rows = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines() if '"time/step"' in x]
    assert rows[0]["reward/na_frac"] == 1.0 and rows[0]["reward/fail_frac"] == 0.0
    assert rows[0]["reward/valid_frac"] == 0.0
