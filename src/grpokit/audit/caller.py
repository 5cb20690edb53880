"""One reward behind a one-reward `RewardManager` (training's isolation), every call timed, failures recorded."""

from __future__ import annotations

import logging
import time

from ..data.example import Example

MAX_TIMEOUTS = 2


class RewardCaller:
    """One reward behind a RewardManager; every call timed, failures and timeouts recorded."""

    def __init__(self, spec: str, timeout_s: float) -> None:
        from ..rewards import RewardManager

        self.spec = spec
        self.timeout_s = timeout_s
        self.manager = RewardManager([(spec, 1.0)], timeout_s=timeout_s, max_fail_frac=1.0)
        # failures are collected and summarised here; the manager's per-batch warning would repeat each one
        self._log = logging.getLogger("grpokit.rewards.manager")
        self._level = self._log.level
        self._log.setLevel(logging.ERROR)
        self.latencies: list[float] = []
        self.failures: list[dict[str, str]] = []
        self.not_applicable: list[str] = []  # cases the reward returned None for (not failures)
        self.timeouts = 0

    @property
    def gave_up(self) -> bool:
        return self.timeouts >= MAX_TIMEOUTS

    def score(self, texts: list[str], examples: list[Example], case: str) -> list[float] | None:
        """Scores (NaN where that sample failed or the reward returned None), or None when skipped after repeated
        timeouts."""
        if self.gave_up:
            return None
        t0 = time.perf_counter()
        res = self.manager.score(texts, examples)
        self.latencies.append(time.perf_counter() - t0)
        for f in res.failures:
            self.failures.append({"case": case, "kind": f.kind, "message": f.message})
        self.not_applicable += [case] * len(res.not_applicable)
        if any(f.kind == "timeout" for f in res.failures):
            self.timeouts += 1
        return list(res.per_reward[self.manager.rewards[0].name])

    def close(self) -> None:
        self.manager.close()
        self._log.setLevel(self._level)
