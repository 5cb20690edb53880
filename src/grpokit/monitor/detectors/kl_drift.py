"""KL to the reference (§17.3): too large, growing without bound, or a penalty that outweighs the policy gradient."""

from __future__ import annotations

import math
from typing import Any

from ... import metric_names as mn
from .base import Alert, Windowed, register
from .rows import StepWindow, finite_at, rounded, slope


@register
class KLDrift(Windowed):
    """KL to the reference (§17.3): above `kl_max` (a warning for one logged row, a spike that may clear; critical
    when the next row holds it), or growing without bound (slope > 0 over `window` steps, the
    last value > `growth` x the first (the first floored at `kl_floor`) and above the absolute floor `min_kl`: a KL
    going 0.006 -> 0.03 is not drift). Opposite failure: with a KL penalty on, the penalty term exceeds the
    policy-gradient term while reward stalls (slope <= 0) for `window` steps.

    Drift is a rise: a KL already above `kl_max` at the first logged row is an offset, not drift (before any update
    the policy is its reference, so the reference is something else: a teacher, as in verl on-policy-distillation
    recipes that load the teacher as the reference model (KL 0.55 at step 1, 0.46-0.72 after), or the log starts
    late). Then the bar is `growth` x that first value instead of `kl_max`: KL 0.83 -> 16.9 is drift, 0.55 -> 0.7 is
    not.

    No offset excuses a KL above `kl_abs_max` (10 nats per token): that is critical at any row, the first included
    (a TRL + LoRA run logged KL 10,833 at its first row, step 10). Every KL this detector reads is a per-token mean
    (docs/math.md §17.3), and 10 is beyond any sane run: grpokit and verl clamp each token's k3 at 10 (§16), so a
    mean above 10 is more than a single token may report there; a mean k1 of 10 puts the sampled tokens e^10 ~
    22,000x likelier under the policy than under the reference (the policy has left the reference's support); and
    in the corpus the highest KLs of runs still learning are a teacher reference's 0.55-0.72 and a one-row spike of
    2.9, while its blow-ups pass 10 (17, 280, 1034)."""

    name, mode = "kl_drift", "KL drift"
    kl_max, growth, kl_floor, min_kl, window, kl_abs_max = 0.5, 3.0, 0.01, 0.1, 10, 10.0
    keys = (mn.KL_REF_K3, mn.KL_REF_K1, mn.ACTOR_KL_LOSS)
    requires = (keys,)

    def __init__(self, context: dict[str, Any] | None = None, **params: Any) -> None:
        super().__init__(context, **params)
        self.rewards = StepWindow(self.window)
        self.dominates = StepWindow(self.window)
        self.first_kl = math.nan  # the first logged KL (an offset when above kl_max, up to kl_abs_max)
        self.first_step: int | None = None

    def _track(self, step: int, m: dict[str, Any]) -> tuple[float, float, float]:
        """Record the reward and whether the KL penalty outweighs the policy-gradient term; returns (KL
        coefficient, KL loss, policy-gradient scale) of this row."""
        r = finite_at(m, mn.REWARD_MEAN)
        if math.isfinite(r):
            self.rewards.add(step, r)
        coef, kl_loss, pg = finite_at(m, mn.KL_COEF), finite_at(m, mn.ACTOR_KL_LOSS), finite_at(m, mn.ACTOR_PG_LOSS)
        # the policy-gradient term's scale: mean |advantage| when logged (the value of a group-normalised surrogate
        # is ~0 on-policy whatever its gradient), else |pg loss|
        pg_scale = finite_at(m, mn.ADV_ABS_MEAN)
        if not math.isfinite(pg_scale):
            pg_scale = abs(pg)
        if math.isfinite(coef) and math.isfinite(kl_loss) and math.isfinite(pg_scale):
            self.dominates.add(step, coef * kl_loss > pg_scale and coef > 0)
        return coef, kl_loss, pg_scale

    def _drift(self, step: int, key: str) -> Alert | None:
        """KL above `kl_abs_max` (critical at once, any row), above `kl_max` or the offset's bar (a warning, critical
        when held), or growing `growth`-fold over the window above the floors (warning)."""
        vals = self.vals()
        last = vals[-1]
        fix = (
            "a larger KL coefficient (algo.kl_coef) or a lower learning rate (train.lr); decoupled KL (no KL in the "
            "reward; algo.kl_placement=loss), an adaptive coefficient (algo.kl_controller=adaptive), an EMA "
            "reference (algo.reference=ema)"
        )
        actions = [] if self.context.get("kl_controller") == "adaptive" else ["algo.kl_controller=adaptive"]
        # past the bar the updates outrun any coefficient's pull: the learning rate comes down too (a slow growth,
        # below, is the controller's to hold)
        steep = [*actions, "train.lr*=0.25"]
        if last > self.kl_abs_max:
            ev = {"kl": round(last, 4), "ceiling": self.kl_abs_max, "signal": key}
            where = " at the first logged row, too large to be an offset" if step == self.first_step else ""
            msg = (
                f"KL to the reference {last:.4g} is beyond any healthy scale (above {self.kl_abs_max:g} nats per "
                f"token){where}: the policy has left the reference's support"
            )
            return self.new_alert(step, "critical", msg, ev, fix, steep)
        offset = self.kl_max < self.first_kl <= self.kl_abs_max
        bar = self.growth * self.first_kl if offset else self.kl_max
        if last > bar:
            ev = {"kl": round(last, 4), "signal": key}
            what = f"{bar:.3g}"
            if offset:
                ev["kl_first"] = round(self.first_kl, 4)
                what += f", {self.growth:g}x its first logged value {self.first_kl:.3g} (already above {self.kl_max})"
            if len(vals) >= 2 and vals[-2] > bar:  # held for two logged rows: drift, not a spike
                ev["kl_previous"] = round(vals[-2], 4)
                msg = f"KL to the reference {last:.3f} exceeds {what} (and did at the row before)"
                return self.new_alert(step, "critical", msg, ev, fix, steep, onset=self.values.items[-2][0])
            msg = f"KL to the reference spiked to {last:.3f} (above {what}); critical if the next row holds it"
            return self.new_alert(step, "warning", msg, ev, fix, steep)
        if (
            self.full()
            and len(vals) >= 2
            and slope(vals) > 0
            and last > self.growth * max(vals[0], self.kl_floor)
            and last > max(self.kl_floor, self.min_kl)
        ):
            first = self.values.first_step()
            msg = (
                f"KL to the reference grew from {vals[0]:.4g} to {last:.4g} "
                f"({last / max(vals[0], self.kl_floor):.1f}x) in {step - first + 1} steps"
            )
            ev = {"kl_first": round(vals[0], 5), "kl_last": round(last, 5), "signal": key}
            return self.new_alert(step, "warning", msg, ev, fix, actions, onset=first)
        return None

    def _penalty_dominates(self, step: int, coef: float, kl_loss: float, pg_scale: float) -> Alert | None:
        """The KL penalty term above the policy-gradient term for the whole window while reward stalls."""
        dom = self.dominates.values()
        if not (
            self.dominates.full()
            and dom
            and all(dom)
            and self.rewards.full()
            and len(self.rewards) >= 2
            and slope(self.rewards.values()) <= 0
        ):
            return None
        return self.new_alert(
            step,
            "warning",
            "the KL penalty outweighs the policy gradient and reward has stalled",
            {"kl_coef": coef, "kl_loss": rounded(kl_loss, 5), "pg_scale": rounded(pg_scale, 5)},
            "lower the KL coefficient or use an adaptive controller (algo.kl_controller=adaptive)",
            ["algo.kl_coef*=0.5"],
            onset=self.dominates.first_step(),
        )

    def check(self, step: int, m: dict[str, Any]) -> tuple[bool, Alert | None]:
        key = self.push(step, m)
        coef, kl_loss, pg_scale = self._track(step, m)
        if key is None:
            return self.active, None
        if math.isnan(self.first_kl):
            self.first_step, self.first_kl = self.values.items[-1]
        alert = self._drift(step, key) or self._penalty_dominates(step, coef, kl_loss, pg_scale)
        return (True, alert) if alert is not None else (False, None)
