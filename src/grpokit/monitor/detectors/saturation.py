"""Converged / saturated: the model is at its accuracy ceiling on the data (not a failure of the algorithm)."""

from __future__ import annotations

import math
import statistics
from typing import Any

from ... import metric_names as mn
from .base import Alert, Windowed, register
from .rows import RewardRange, StepWindow, finite_at, first_logged


@register
class Saturation(Windowed):
    """Converged / saturated: over `window` steps the train accuracy (or a reward known to be a 0/1 score) averages
    at or above `ceiling`, or the share of all-correct groups averages at or above `all_correct`, or the latest
    held-out accuracy is at or above `ceiling`. Not a failure of the
    algorithm: the data is too easy for the model now, and further steps mostly do nothing. Its onset is the first
    step at which the signal itself was at its ceiling (`since`), not the start of the window."""

    name, mode = "saturation", "converged / saturated"
    ceiling, all_correct, window, margin = 0.95, 0.8, 10, 0.05
    keys = (mn.ZV_ALL_CORRECT,)
    requires = ((mn.REWARD_ACCURACY, mn.EVAL_ACCURACY, mn.ZV_ALL_CORRECT, mn.REWARD_MIN),)

    def __init__(self, context: dict[str, Any] | None = None, **params: Any) -> None:
        super().__init__(context, **params)
        self.acc = StepWindow(self.window)
        self.range = RewardRange()
        self.eval_acc: tuple[int, float] | None = None

    def check(self, step: int, m: dict[str, Any]) -> tuple[bool, Alert | None]:
        self.range.update(m)
        self.push(step, m)
        ev_acc = finite_at(m, mn.EVAL_ACCURACY)
        if math.isfinite(ev_acc):
            self.eval_acc = (step, ev_acc)
        key, acc = first_logged(m, [mn.REWARD_ACCURACY] + ([mn.REWARD_MEAN] if self.range.zero_one else []))
        if key is not None and not 0.0 <= acc <= 1.0:
            key = None  # not a share of right samples: a correctness reward that is no 0/1 score (e.g. a length)
        if key is not None:
            self.acc.add(step, acc)
        if key is None and not self.vals():
            return self.active, None
        acc_vals, ac_vals = self.acc.values(), self.vals()
        acc_mean = statistics.fmean(acc_vals) if self.acc.full() and acc_vals else math.nan
        ac_mean = statistics.fmean(ac_vals) if self.full() and ac_vals else math.nan
        held_out = self.eval_acc[1] if self.eval_acc is not None else math.nan
        slack = self.margin if self.active else 0.0  # hysteresis: a saturated run stays so until clearly below
        at_ceiling = (
            (math.isfinite(acc_mean) and acc_mean >= self.ceiling - slack)
            or (math.isfinite(ac_mean) and ac_mean >= self.all_correct - slack)
            or (math.isfinite(held_out) and held_out >= self.ceiling - slack)
        )
        if not at_ceiling:
            return False, None
        ev: dict[str, Any] = {}
        if math.isfinite(acc_mean):
            ev["accuracy"] = round(acc_mean, 3)
            ev["accuracy_signal"] = key or mn.REWARD_ACCURACY
        if math.isfinite(ac_mean):
            ev["all_correct_groups"] = round(ac_mean, 3)
        if self.eval_acc is not None:
            ev["held_out_accuracy"] = round(self.eval_acc[1], 3)
            ev["held_out_step"] = self.eval_acc[0]
        start = self.since(step, slack, acc_mean, ac_mean)
        return True, self.new_alert(
            step,
            "info",
            "the model is at its accuracy ceiling on this data: "
            + "; ".join(
                part
                for part in (
                    f"{acc_mean:.0%} of training samples right over the last {self.window} steps"
                    if math.isfinite(acc_mean)
                    else "",
                    f"{ac_mean:.0%} of groups all-correct (no gradient)" if math.isfinite(ac_mean) else "",
                    f"held-out accuracy {held_out:.0%}" if math.isfinite(held_out) else "",
                )
                if part
            ),
            ev,
            "the task is solved for this model: stop training (monitor.stop_when_learned=true stops a run by "
            "itself), or move to harder data (grpokit preflight filters always-solved prompts)",
            onset=start,
        )

    def since(self, step: int, slack: float, acc_mean: float, ac_mean: float) -> int:
        """The onset: the first step at which a signal that holds now was itself at its ceiling (a row's accuracy
        at or above `ceiling`, its all-correct share at or above `all_correct`, the held-out evaluation's step); never
        a step where it was still below (a window mean at the ceiling always has a row at or above it)."""
        onsets = []
        for mean, limit, win in ((acc_mean, self.ceiling, self.acc), (ac_mean, self.all_correct, self.values)):
            if math.isfinite(mean) and mean >= limit - slack:
                onsets.extend(s for s, v in win.items if v >= limit - slack)
        if self.eval_acc is not None and self.eval_acc[1] >= self.ceiling - slack:
            onsets.append(self.eval_acc[0])
        return min(onsets, default=step)
