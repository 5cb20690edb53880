"""The reward manager's failure warning reaches a library user's own logging handler escaped and cut, not only the
CLI's filter: a reward library's error text carries no terminal escape and no 5,000-character line out of grpokit."""

from __future__ import annotations

import logging

from toy_rewards import raises_with_escapes

from grpokit.data import Example
from grpokit.rewards import RewardManager


class Keep(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def test_a_failure_warning_is_escaped_at_its_source() -> None:
    keep = Keep()
    logger = logging.getLogger("grpokit.rewards.manager")
    logger.addHandler(keep)
    try:
        with RewardManager([(raises_with_escapes, 1.0)], max_fail_frac=1.0, isolation="inline", sandbox=None) as m:
            result = m.score(["a", "b"], [Example(prompt="q", answer="1")] * 2)
    finally:
        logger.removeHandler(keep)
    assert len(result.failures) == 2
    warned = [line for line in keep.lines if "reward failure(s)" in line]
    assert len(warned) == 1, keep.lines
    assert "\x1b" not in warned[0] and "\x07" not in warned[0] and len(warned[0]) < 1000
    assert "ValueError" in warned[0] or "bad" in warned[0]
