"""A noisy or hackable reward: repeated completions scored differently, reward tracking length or a
non-correctness component more than correctness."""

from __future__ import annotations

import math
import statistics
from typing import Any

from ... import metric_names as mn
from .base import Alert, Windowed, register
from .rows import StepWindow, finite_at, rounded


@register
class NoisyReward(Windowed):
    """Identical completions scored differently within a step (a non-deterministic verifier), or reward that
    tracks length (|corr| > `corr_max`) much more than correctness over `window` steps, or tracks a non-correctness
    reward component such as `format` (`reward/corr/<name>`) more than correctness over `window` steps."""

    name, mode = "noisy_reward", "noisy or hackable reward"
    corr_max, window = 0.5, 5
    keys = (mn.REWARD_LENGTH_CORR,)
    requires = ((mn.REWARD_DUP_INCONSISTENCY, mn.REWARD_LENGTH_CORR),)

    def __init__(self, context: dict[str, Any] | None = None, **params: Any) -> None:
        super().__init__(context, **params)
        self.components: dict[str, StepWindow] = {}
        # reward-correctness correlation at the same steps as the length correlation (0 where accuracy was constant
        # in the step: then only something else can have moved the reward)
        self.acc = StepWindow(self.window)

    def check(self, step: int, m: dict[str, Any]) -> tuple[bool, Alert | None]:
        if self.push(step, m) is not None:
            a = finite_at(m, mn.REWARD_ACC_CORR)
            self.acc.add(step, a if math.isfinite(a) else 0.0)
        for key in [k for k in m if isinstance(k, str) and k.startswith(mn.REWARD_CORR_PREFIX)]:
            v = finite_at(m, key)
            if math.isfinite(v):
                self.components.setdefault(key, StepWindow(self.window)).add(step, v)
        dup = finite_at(m, mn.REWARD_DUP_INCONSISTENCY)
        fix = "audit the verifier (grpokit audit-reward): noisy rewards feed false signal into every group"
        if math.isfinite(dup) and dup > 0:
            return True, self.new_alert(
                step,
                "critical",
                f"{dup:.0%} of repeated completions got different rewards in the same step",
                {"dup_inconsistency": round(dup, 3)},
                fix,
            )
        acc_corr = finite_at(m, mn.REWARD_ACC_CORR)
        acc_vals = self.acc.values()
        acc_mean = statistics.fmean(acc_vals) if acc_vals else math.nan
        if self.full() and abs(self.mean()) > self.corr_max:
            # compared over the same steps: a step with a single tiny group can correlate reward with length and
            # with correctness alike (both |r| = 1); that is not a length-tracking reward
            if not math.isfinite(acc_mean) or abs(acc_mean) < abs(self.mean()):
                return True, self.new_alert(
                    step,
                    "warning",
                    f"reward correlates with response length (r = {self.mean():.2f}) more than with correctness",
                    {"length_corr": round(self.mean(), 3), "acc_corr": rounded(acc_corr, 3)},
                    fix,
                    onset=self.values.first_step(),
                )
        for key, win in self.components.items():
            vals = win.values()
            if not (win.full() and vals):
                continue
            c = statistics.fmean(vals)
            if abs(c) > self.corr_max and (not math.isfinite(acc_corr) or abs(acc_corr) < abs(c)):
                name = key.removeprefix(mn.REWARD_CORR_PREFIX)
                return True, self.new_alert(
                    step,
                    "warning",
                    f"reward follows its '{name}' component (r = {c:.2f}) more than correctness",
                    {f"corr_{name}": round(c, 3), "acc_corr": rounded(acc_corr, 3)},
                    fix + "; lower the weight of the non-correctness reward",
                    onset=win.first_step(),
                )
        return False, None
