"""Generation overlapped with learning (`rollout.max_staleness=1`): the stale sampler drifting from the learner."""

from __future__ import annotations

import math
from typing import Any

from ... import metric_names as mn
from .base import Alert, Windowed, register
from .rows import StepWindow, finite_at, number_at, rounded


@register
class StaleSampler(Windowed):
    """One-step off-policy batches (`rollout/staleness` >= 1) whose sampler has drifted from the learner: over the
    last `window` stale steps, the sampler-learner mismatch KL (k3 of docs/math.md §17.6, `mismatch/kl_k3`) has a
    mean above `kl_max`, or the importance weights rho = pi_learner / pi_sampler spread beyond [1/C, C] (C the IS
    cap, `mismatch/frac_high` + `mismatch/frac_low`) on a mean share of tokens above `spread_max`. A row without
    `rollout/staleness` (or with 0) is a synchronous step: it restarts the window (sampler and learner are then the
    same weights; `sampler_mismatch` watches the numerics of that case)."""

    name, mode = "stale_sampler", "stale-sampler drift"
    kl_max, spread_max, window = 0.01, 0.05, 3
    keys = (mn.MISMATCH_KL_K3,)
    requires = ((mn.MISMATCH_KL_K3, mn.MISMATCH_FRAC_HIGH),)

    def __init__(self, context: dict[str, Any] | None = None, **params: Any) -> None:
        super().__init__(context, **params)
        self.spread = StepWindow(self.window)

    def check(self, step: int, m: dict[str, Any]) -> tuple[bool, Alert | None]:
        staleness = number_at(m, mn.ROLLOUT_STALENESS)
        if not (math.isfinite(staleness) and staleness >= 1):
            self.values, self.spread = StepWindow(self.window), StepWindow(self.window)
            return False, None
        self.push(step, m)
        high, low = finite_at(m, mn.MISMATCH_FRAC_HIGH), finite_at(m, mn.MISMATCH_FRAC_LOW)
        if math.isfinite(high):
            self.spread.add(step, high + (low if math.isfinite(low) else 0.0))
        spread = sum(self.spread.values()) / len(self.spread) if len(self.spread) else math.nan
        drift = self.full() and self.mean() > self.kl_max
        wide = self.spread.full() and spread > self.spread_max
        if not (drift or wide):
            return False, None
        ess = finite_at(m, mn.MISMATCH_PREFIX + "ess")
        evidence = {
            "staleness": staleness,
            "mismatch_kl_k3": rounded(self.mean(), 6) if len(self.values) else None,
            "kl_k3_first_last": [rounded(self.vals()[0], 6), rounded(self.vals()[-1], 6)] if self.vals() else None,
            "rho_outside_C_frac": rounded(spread) if math.isfinite(spread) else None,
            "is_weight_ess": rounded(ess) if math.isfinite(ess) else None,
        }
        has_is = bool(self.context.get("is_correction"))
        return True, self.new_alert(
            step,
            "warning",
            f"the sampler, {staleness:g} update(s) behind, has drifted from the learner: the stale batches are "
            "off-policy enough to bias the update",
            evidence,
            "lower rollout.max_staleness to 0 (synchronous), "
            + ("" if has_is else "turn on TIS/MIS (algo.is_correction=token_truncate or token_mask), ")
            + "or lower train.lr (smaller updates keep consecutive policies close)",
            ["train.lr*=0.5"] if has_is else ["algo.is_correction=token_truncate"],
            onset=(self.values if drift else self.spread).first_step(),
        )
