"""Whether a run still improves: its reward's recent trend and its held-out accuracy since a step, the evidence that
keeps low entropy or zero-variance groups from being called a collapse while the run learns (docs/math.md §17.1,
§17.7)."""

from __future__ import annotations

import math
import statistics
from collections import deque
from typing import Any

from ... import metric_names as mn
from .rows import StepWindow, finite_at


class Progress:
    """The reward of the last `window` steps and the last `keep` held-out evaluations (`eval/accuracy`).

    Still improving (`improving(since)`) when either (a) the reward's later half over the window beats its earlier
    half by `min_gain`, or (b) the latest held-out accuracy beats the one at `since` (the last evaluation at or before
    it, else the first after it) by `min_gain`: a policy whose held-out accuracy rose since its entropy fell has not
    collapsed, whatever its entropy (verl's PPO reference run on GSM8K: entropy 0.53 -> 0.05 while held-out accuracy
    rises to 0.58)."""

    def __init__(self, window: int = 20, min_gain: float = 0.01, keep: int = 64) -> None:
        self.rewards = StepWindow(window)
        self.min_gain = min_gain
        self.evals: deque[tuple[int, float]] = deque(maxlen=keep)

    def add(self, step: int, m: dict[str, Any]) -> None:
        reward = finite_at(m, mn.REWARD_MEAN)
        if math.isfinite(reward):
            self.rewards.add(step, reward)
        held = finite_at(m, mn.EVAL_ACCURACY)
        if math.isfinite(held):
            if self.evals and self.evals[-1][0] >= step:
                if self.evals[-1][0] > step:
                    self.evals.clear()  # a restart: the evaluations before it are another run's
                else:
                    self.evals.pop()
            self.evals.append((step, held))

    def reward_trend(self) -> dict[str, float]:
        """`reward_earlier` / `reward_later`: the means of the window's two halves (empty under 4 rows)."""
        r = self.rewards.values()
        if len(r) < 4:
            return {}
        half = len(r) // 2
        early, late = statistics.fmean(r[:half]), statistics.fmean(r[half:])
        return {"reward_earlier": round(early, 4), "reward_later": round(late, 4)}

    def held_out_since(self, since: int) -> dict[str, float]:
        """The held-out accuracy at `since` (`held_out_earlier`, its step) and the latest (`held_out_later`, its
        step); empty under 2 evaluations."""
        if len(self.evals) < 2:
            return {}
        before = [e for e in self.evals if e[0] <= since]
        ref = before[-1] if before else self.evals[0]
        last = self.evals[-1]
        if last[0] <= ref[0]:
            return {}
        return {
            "held_out_earlier": round(ref[1], 4),
            "held_out_earlier_step": ref[0],
            "held_out_later": round(last[1], 4),
            "held_out_later_step": last[0],
        }

    def improving(self, since: int) -> tuple[bool, dict[str, Any], str]:
        """(still improving, the numbers that say so or not, why in words: '' when not improving)."""
        ev: dict[str, Any] = {**self.reward_trend(), **self.held_out_since(since)}
        why = []
        if ev.get("reward_later", -math.inf) > ev.get("reward_earlier", math.inf) + self.min_gain:
            why.append(f"reward is still rising ({ev['reward_earlier']:.3g} -> {ev['reward_later']:.3g})")
        if ev.get("held_out_later", -math.inf) > ev.get("held_out_earlier", math.inf) + self.min_gain:
            why.append(
                f"held-out accuracy rose from {ev['held_out_earlier']:.3g} (step {ev['held_out_earlier_step']}) to "
                f"{ev['held_out_later']:.3g} (step {ev['held_out_later_step']})"
            )
        return bool(why), ev, " and ".join(why)

    def fell(self) -> bool:
        """The reward's later half is below its earlier half by more than `min_gain`."""
        ev = self.reward_trend()
        return bool(ev) and ev["reward_later"] < ev["reward_earlier"] - self.min_gain
