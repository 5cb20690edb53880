"""Response length (§17.5): incorrect answers growing longer than correct ones, length collapse, truncation."""

from __future__ import annotations

import math
import statistics
from typing import Any

from ... import metric_names as mn
from .base import Alert, Windowed, register
from .rows import StepWindow, finite_at, slope


@register
class LengthBias(Windowed):
    """Incorrect responses longer than correct ones by `ratio` and still growing over `window` steps (the 1/|o|
    length bias of §4), or length collapse: mean length below `collapse_frac` of its mean over the first
    `baseline_steps` (5) training steps (at least the first row; steps, not rows: in a log written every 10 steps 5
    rows reach 50 steps in, and a collapse there joined its own baseline, bench/latency.py) while accuracy is at or
    below its mean over those rows (VC-PPO's symptom). A log without accuracy (verl logs
    the verifier's score, not an accuracy, unless it is 0/1) is judged on its mean reward the same way: length
    falling to under 30% with no gain in reward is a collapse (verl's ReTool on-policy-distillation run: 1,759
    tokens at step 1, exactly 1 from step 12, score -0.68 -> -1.0), a shorter answer that earns more is not."""

    name, mode = "length_bias", "length bias"
    ratio, window, collapse_frac, baseline_steps = 1.3, 10, 0.3, 5
    keys = (mn.LENGTH_INCORRECT_MEAN,)
    requires = ((mn.LENGTH_INCORRECT_MEAN, mn.LENGTH_MEAN),)

    def __init__(self, context: dict[str, Any] | None = None, **params: Any) -> None:
        super().__init__(context, **params)
        self.first_len: list[float] = []
        self.first_acc: list[float] = []
        self.first_reward: list[float] = []
        self.ratios = StepWindow(self.window)
        self.first_step: int | None = None  # the first step with a length: the baseline covers `baseline_steps`

    def check(self, step: int, m: dict[str, Any]) -> tuple[bool, Alert | None]:
        self.push(step, m)
        inc, cor = finite_at(m, mn.LENGTH_INCORRECT_MEAN), finite_at(m, mn.LENGTH_CORRECT_MEAN)
        if math.isfinite(inc) or math.isfinite(cor):
            self.ratios.add(step, inc / cor if math.isfinite(inc) and math.isfinite(cor) and cor > 0 else math.nan)
        rs = self.ratios.values()
        sustained = self.ratios.full() and bool(rs) and all(r > self.ratio for r in rs)
        mean, acc = finite_at(m, mn.LENGTH_MEAN), finite_at(m, mn.REWARD_ACCURACY)
        fix = (
            "token-level aggregation (algo.loss_agg=token-mean), Dr. GRPO normalisation "
            "(algo.loss_agg=constant-norm, algo.adv_scale=none), overlong shaping (algo.soft_overlong=true)"
        )
        if (
            self.full()
            and sustained
            and math.isfinite(inc)
            and math.isfinite(cor)
            and cor > 0
            and slope(self.vals()) > 0
        ):
            return True, self.new_alert(
                step,
                "warning",
                f"incorrect responses ({inc:.0f} tokens) are {inc / cor:.1f}x longer than correct "
                f"ones ({cor:.0f}) and growing",
                {"incorrect_len": round(inc, 1), "correct_len": round(cor, 1)},
                fix,
                ["algo.loss_agg=token-mean"],
                onset=self.values.first_step(),
            )
        if math.isfinite(mean):
            reward = finite_at(m, mn.REWARD_MEAN)
            if self.first_step is None:
                self.first_step = step
            if not self.first_len or step < self.first_step + self.baseline_steps:
                self.first_len.append(mean)
                if math.isfinite(acc):
                    self.first_acc.append(acc)
                if math.isfinite(reward):
                    self.first_reward.append(reward)
            elif mean < self.collapse_frac * statistics.fmean(self.first_len):
                # accuracy when the log has it from the start, else the mean reward
                what, now, first = (
                    ("accuracy", acc, self.first_acc) if self.first_acc else ("reward", reward, self.first_reward)
                )
                base = statistics.fmean(first) if first else math.nan
                if math.isfinite(now) and math.isfinite(base) and now <= base:
                    return True, self.new_alert(
                        step,
                        "warning",
                        f"mean length fell to {mean:.0f} from {statistics.fmean(self.first_len):.0f} "
                        f"tokens without any {what} gain",
                        {"length": round(mean, 1), what: round(now, 3), f"initial_{what}": round(base, 3)},
                        "value pretraining and decoupled GAE for PPO (VC-PPO); a lower learning rate",
                        mode="length collapse",
                    )
        return False, None


@register
class Truncation(Windowed):
    """Share of responses cut at the maximum length: window mean >= `threshold` and not falling (a warning).

    Critical when near-total truncation is sustained: every logged row of the last `sustained_steps` (20) training
    steps at or above `critical_rate` (0.9). Then nearly every response ends at the cap, before its answer: the
    reward scores cut-off text and the length limit, not the task, shapes the policy (TRL/Unsloth's Chaos-Economy
    run: 1.0 at 35 of 50 rows, every completion cut at 512 tokens from step 80 to 250). A run at 20-90%, or at
    100% for a few steps, stays a warning."""

    name, mode = "truncation", "truncation"
    threshold, window = 0.2, 5
    critical_rate, sustained_steps = 0.9, 20
    keys = (mn.LENGTH_TRUNCATION_RATE,)
    requires = (keys,)

    def __init__(self, context: dict[str, Any] | None = None, **params: Any) -> None:
        super().__init__(context, **params)
        self.long = StepWindow(self.sustained_steps)

    def check(self, step: int, m: dict[str, Any]) -> tuple[bool, Alert | None]:
        if self.push(step, m) is None:
            return self.active, None
        self.long.add(step, self.values.items[-1][1])
        if not self.full():
            return self.active, None
        vals = self.vals()
        if self.mean() >= self.threshold and vals[-1] >= vals[0]:
            fix = (
                "overlong filtering (algo.overlong_filter=true) or soft overlong punishment "
                "(algo.soft_overlong=true), or a larger rollout.max_new_tokens"
            )
            actions = [] if self.context.get("soft_overlong") else ["algo.soft_overlong=true"]
            ev = {"truncation_rate": round(self.mean(), 3), "now": round(vals[-1], 3)}
            msg = f"{self.mean():.0%} of responses hit the length limit"
            sustained = self.long.values()
            if self.long.full() and all(v >= self.critical_rate for v in sustained):
                ev[f"min_over_{self.sustained_steps}_steps"] = round(min(sustained), 3)
                msg += (
                    f", and at least {self.critical_rate:.0%} at every row of the last {self.sustained_steps} steps: "
                    "nearly every response is cut before its answer"
                )
                return True, self.new_alert(step, "critical", msg, ev, fix, actions, onset=self.values.first_step())
            return True, self.new_alert(step, "warning", msg, ev, fix, actions, onset=self.values.first_step())
        return False, None
