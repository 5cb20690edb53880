"""The constant-reward warning is kept for a reward that cannot see what it scores (issue 45 item 4): a batch that a
reward scores all alike after it has told completions apart is the policy's state (all right: saturation, the task
learned; all wrong: a collapse), counted but not warned about. TinyZero's countdown scorer given the response alone,
which never tells any apart, is still warned about (tests/rewards/test_conventions.py,
test_verl_compute_score_prompt_and_response)."""

from __future__ import annotations

import logging

import pytest

from grpokit.data.example import Example
from grpokit.rewards import RewardManager


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING and "same value" in r.getMessage()]


def test_the_demos_all_right_batch_is_saturation_not_a_blind_reward(caplog: pytest.LogCaptureFixture) -> None:
    """The demo's reward (exact_numeric on single-digit sums): its early batches mix right and wrong answers, then
    at step 10 every one of 32 different completions is right. That batch is counted, and no warning is given."""
    prompts = [
        Example(prompt=f"What is {a} + {b}? Answer with just the number.", answer=str(a + b))
        for a, b in [(3, 4), (2, 6), (6, 3), (1, 0)]
    ]
    early = [f"{int(ex.answer) + (i % 3 == 0)}" for ex in prompts for i in range(8)]  # a third wrong
    right = [f"{'The answer is ' if i % 2 else ''}{ex.answer}{'.' * (i // 2)}" for ex in prompts for i in range(8)]
    examples = [ex for ex in prompts for _ in range(8)]
    assert len(set(right)) == 32
    with caplog.at_level(logging.DEBUG, logger="grpokit.rewards.manager"), RewardManager([("exact_numeric", 1.0)]) as m:
        first = m.score(early, examples)
        assert 0 < sum(first.rewards) < 32 and first.metrics["reward/exact_numeric_constant"] == 0.0
        done = m.score(right, examples)
        assert done.rewards == [1.0] * 32 and done.metrics["reward/exact_numeric_constant"] == 1.0
        wrong = m.score([f"{int(ex.answer) + 1 + i}" for i, ex in enumerate(examples)], examples)
        assert wrong.rewards == [0.0] * 32 and wrong.metrics["reward/exact_numeric_constant"] == 1.0
        assert m.constant.batches == {"exact_numeric": 2}  # both counted
    assert _warnings(caplog) == []


def test_a_reward_that_never_told_two_apart_is_warned_about_once(caplog: pytest.LogCaptureFixture) -> None:
    """The same reward, all right from its very first batch: it has never told two completions apart, so its
    constant batch is worth the warning (it may not see what it scores), once."""
    ex = Example(prompt="What is 2 + 2?", answer="4")
    with caplog.at_level(logging.DEBUG, logger="grpokit.rewards.manager"), RewardManager([("exact_numeric", 1.0)]) as m:
        m.score(["4", "4.", "The answer is 4"], [ex] * 3)
        m.score(["4", "four is 4"], [ex] * 2)
    warnings = _warnings(caplog)
    assert len(warnings) == 1 and "gave all 3 completions of this batch, which differ, the same value 1" in warnings[0]
