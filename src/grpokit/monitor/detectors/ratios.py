"""Importance ratios: PPO clipping out of range, and the sampler disagreeing with the learner (§17.6)."""

from __future__ import annotations

import math
import statistics
from typing import Any

from ... import metric_names as mn
from .base import Alert, Windowed, register
from .context import on_policy_run
from .rows import StepWindow, finite_at, rounded


@register
class ClippingAnomaly(Windowed):
    """Updates mostly clipped (clip fraction mean > `high` over `window` steps), or clip-high never active for
    `window` steps under clip-higher with off-policy updates. Not for the losses in `CLIPS_BY_DESIGN`: GSPO and
    GSPO-token clip a sequence-level ratio with eps ~3e-4 (most tokens clip by design), and CISPO's "clipped"
    tokens keep their gradient (only the importance weight is capped, detached), so nothing is thrown away."""

    name, mode = "clipping", "clipping anomaly"
    high, window = 0.3, 20
    CLIPS_BY_DESIGN = frozenset({"gspo", "gspo_token", "cispo"})
    keys = (mn.ACTOR_CLIPFRAC_HIGH,)
    requires = ((mn.ACTOR_CLIPFRAC_HIGH, mn.ACTOR_CLIPFRAC, mn.ACTOR_CLIPFRAC_LOW),)

    def __init__(self, context: dict[str, Any] | None = None, **params: Any) -> None:
        super().__init__(context, **params)
        self.totals = StepWindow(self.window)

    def check(self, step: int, m: dict[str, Any]) -> tuple[bool, Alert | None]:
        self.push(step, m)
        tot = finite_at(m, mn.ACTOR_CLIPFRAC)
        if not math.isfinite(tot):
            parts = [
                v
                for v in (finite_at(m, mn.ACTOR_CLIPFRAC_HIGH), finite_at(m, mn.ACTOR_CLIPFRAC_LOW))
                if math.isfinite(v)
            ]
            if not parts:
                return self.active, None
            tot = sum(parts)
        self.totals.add(step, tot)
        if not self.totals.full():
            return self.active, None
        ctx = self.context
        mean = statistics.fmean(self.totals.values())
        if ctx.get("policy_loss") not in self.CLIPS_BY_DESIGN and mean > self.high:
            return True, self.new_alert(
                step,
                "warning",
                f"{mean:.0%} of tokens are clipped: most of each update is thrown away",
                {"clip_frac": round(mean, 3)},
                "a lower learning rate (train.lr) or fewer epochs per batch",
                ["train.lr*=0.5"],
                onset=self.totals.first_step(),
            )
        off_policy = on_policy_run(ctx) is False
        clip_higher = isinstance(ctx.get("eps_high"), (int, float)) and ctx["eps_high"] > (ctx.get("eps_low") or 0)
        highs = self.vals()
        if off_policy and clip_higher and self.full() and highs and max(highs) == 0.0:
            return True, self.new_alert(
                step,
                "info",
                f"clip-higher is configured but the high clip never fired in {self.window} steps",
                {"eps_high": ctx.get("eps_high")},
                "eps_high may be larger than the ratios reached; that is harmless, or raise train.lr",
                onset=self.values.first_step(),
            )
        return False, None


@register
class SamplerMismatch(Windowed):
    """§17.6 out of range: mismatch KL (k3) window mean > `kl_max`, or share of tokens with rho > C above
    `frac_max`, or max |logp_learner - logp_sampler| above `abs_max`."""

    name, mode = "sampler_mismatch", "sampler/learner mismatch"
    kl_max, frac_max, abs_max, window = 1e-3, 0.01, 2.0, 3
    keys = (mn.MISMATCH_KL_K3,)
    requires = ((mn.MISMATCH_KL_K3, mn.MISMATCH_FRAC_HIGH, mn.MISMATCH_ABS_DIFF_MAX),)

    def check(self, step: int, m: dict[str, Any]) -> tuple[bool, Alert | None]:
        key = self.push(step, m)
        frac, amax = finite_at(m, mn.MISMATCH_FRAC_HIGH), finite_at(m, mn.MISMATCH_ABS_DIFF_MAX)
        if key is None and not math.isfinite(frac) and not math.isfinite(amax):
            return self.active, None
        bad = (
            (self.full() and self.mean() > self.kl_max)
            or (math.isfinite(frac) and frac > self.frac_max)
            or (math.isfinite(amax) and amax > self.abs_max)
        )
        if not bad:
            return False, None
        ev = {
            "mismatch_kl": rounded(self.mean(), 6) if len(self.values) else None,
            "frac_rho_above_C": frac if math.isfinite(frac) else None,
            "abs_logp_diff_max": amax if math.isfinite(amax) else None,
        }
        actions = [] if self.context.get("is_correction") else ["algo.is_correction=token_truncate"]
        return True, self.new_alert(
            step,
            "warning",
            "the sampler's log-probs disagree with the learner's (the update is off-policy)",
            ev,
            "truncated or masked importance sampling (algo.is_correction=token_truncate or "
            "sequence_mask); sample with the learner's temperature and precision",
            actions,
        )
