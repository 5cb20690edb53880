"""Which side a step's zero-variance groups are on (all-correct: the task learned; all-wrong: data too hard), from
what a log has, and the zero-variance signal of a log that logs no fraction (docs/math.md §17.1)."""

from __future__ import annotations

import math
import statistics
from typing import Any

from ... import metric_names as mn
from .rows import StepWindow, finite_at

RANGE_SIGNAL = "adv/min=max"  # the zero-variance signal derived from the range of the step's advantages or rewards


def range_signal(m: dict[str, Any]) -> float:
    """Without a zero-variance fraction: 1 for a step whose advantages are all exactly 0 (min = max = 0), whose rewards
    are all equal (min = max) or whose reward std is 0 (TRL's `reward_std`, the mean of the groups' stds or the
    batch's std: 0 either way means every group's rewards are equal), else 0; NaN when the row has none of these.
    A lower bound of the zero-variance fraction (a step with some varied groups says nothing of the others)."""
    lo, hi = finite_at(m, mn.ADV_MIN), finite_at(m, mn.ADV_MAX)
    if math.isfinite(lo) and math.isfinite(hi):
        return 1.0 if abs(lo) < 1e-8 and abs(hi) < 1e-8 else 0.0
    lo, hi = finite_at(m, mn.REWARD_MIN), finite_at(m, mn.REWARD_MAX)
    if math.isfinite(lo) and math.isfinite(hi):
        return 1.0 if hi - lo < 1e-8 else 0.0
    std = finite_at(m, mn.REWARD_STD)
    if math.isfinite(std):
        return 1.0 if abs(std) < 1e-8 else 0.0
    return math.nan


class GroupSplit:
    """The all-correct and all-wrong groups of the last `window` steps, each a share of all groups, from the best
    evidence a row has:

    1. the split logged (`zv/all_correct`, `zv/all_wrong`);
    2. a step whose rewards are all equal (`whole` True: every advantage 0, reward min = max, or a std of 0): every
       group is on the side of that one reward level, all-correct at the top of the rewards the run has logged, all-
       wrong at its bottom (a level between, a shaped reward, says neither);
    3. the zero-variance fraction z beside an accuracy a in [0, 1]: an all-wrong group scores 0, so at most 1 - a of
       the groups are all-wrong and at least max(0, z - (1 - a)) all-correct; that bound is counted as all-correct
       and the rest of z as all-wrong, so the split can only under-report a learned task."""

    def __init__(self, window: int) -> None:
        self.rows = StepWindow(window)
        self.lo, self.hi = math.inf, -math.inf

    def _level(self, m: dict[str, Any]) -> None:
        for k in (mn.REWARD_MIN, mn.REWARD_MAX, mn.REWARD_MEAN):
            v = finite_at(m, k)
            if math.isfinite(v):
                self.lo, self.hi = min(self.lo, v), max(self.hi, v)

    def add(self, step: int, m: dict[str, Any], zv: float, whole: bool, accuracy: float) -> None:
        """Record the split of step `step` (row `m`, its zero-variance fraction `zv`, `whole`: the range signal said
        every reward of the step is equal, `accuracy`: the row's accuracy or NaN)."""
        self._level(m)
        c, w = finite_at(m, mn.ZV_ALL_CORRECT), finite_at(m, mn.ZV_ALL_WRONG)
        if not (math.isfinite(c) and math.isfinite(w)):
            c = w = math.nan
            if whole:
                level = finite_at(m, mn.REWARD_MEAN)
                if not math.isfinite(level):
                    level = finite_at(m, mn.REWARD_MAX)
                tol = 1e-6 + 1e-3 * (self.hi - self.lo)
                if math.isfinite(level) and self.hi - self.lo > 1e-8:
                    c, w = (1.0, 0.0) if level >= self.hi - tol else (0.0, 1.0) if level <= self.lo + tol else (c, w)
            elif zv == 0.0:
                c = w = 0.0
            elif math.isfinite(zv) and math.isfinite(accuracy) and 0.0 <= accuracy <= 1.0:
                c = max(0.0, zv - (1.0 - accuracy))
                w = zv - c
        self.rows.add(step, (c, w))

    def means(self, last: int | None = None) -> tuple[float, float] | None:
        """(all-correct, all-wrong) averaged over the window's rows (its `last` rows) that say, or None when none
        does."""
        rows = self.rows.values()[-last:] if last else self.rows.values()
        known = [(c, w) for c, w in rows if math.isfinite(c) and math.isfinite(w)]
        if not known:
            return None
        return statistics.fmean(c for c, _ in known), statistics.fmean(w for _, w in known)

    def evidence(self, ev: dict[str, Any], last: int | None = None) -> None:
        """Put the split in `ev` as `all_correct_frac` / `all_wrong_frac` (when any row says)."""
        split = self.means(last)
        if split is not None:
            ev["all_correct_frac"], ev["all_wrong_frac"] = round(split[0], 3), round(split[1], 3)
