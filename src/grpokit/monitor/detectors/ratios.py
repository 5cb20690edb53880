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


#: significand bits (the implicit bit included) of the precisions a run may name; a name not here counts as fp32
SIGNIFICAND_BITS = {
    "fp32": 24,
    "float32": 24,
    "32": 24,
    "fp16": 11,
    "float16": 11,
    "fp16-autocast": 11,
    "16-mixed": 11,
    "bf16": 8,
    "bfloat16": 8,
    "bf16-autocast": 8,
    "bf16-mixed": 8,
    "bf16-true": 8,
}


def precision_mismatch_kl(precision: Any, logit_scale: float) -> float:
    """The mismatch KL (k3) that rounding alone gives at `precision`: 0.5 * (logit_scale * 2^-p)^2, p the
    significand bits. A token's log-prob carries the rounding of its logits, about one unit in the last place of a
    logit of magnitude `logit_scale` (2^-p relative); for small differences k3 = E[rho - 1 - log rho] ~ E[d^2] / 2.
    bf16 (p = 8) at a logit scale of 16 nats: d ~ 1/16 nat, k3 ~ 2.0e-3; fp16 (p = 11) 3.1e-5; fp32 ~1e-12."""
    bits = SIGNIFICAND_BITS.get(str(precision).strip().lower(), 24) if precision is not None else 24
    return 0.5 * (logit_scale * 2.0**-bits) ** 2


@register
class SamplerMismatch(Windowed):
    """§17.6 out of range: mismatch KL (k3) window mean > `kl_max` plus what the run's precision gives by rounding
    alone (`precision_mismatch_kl`, context `precision`), or share of tokens with rho > C above `frac_max`, or max
    |logp_learner - logp_sampler| above `abs_max`.

    fp32 (and a log that names no precision) keeps `kl_max` = 1e-3. Under bf16 (8 significand bits, weights or
    autocast) a token's log-prob differs between two otherwise equal forward passes by about a logit's last place:
    at `logit_scale` 16 nats that is ~1/16 nat, a k3 of ~2e-3 (the demo's bf16-autocast run on a CPU logged 1.03e-3
    and then less), so the bf16 threshold is 1e-3 + 1.95e-3 = 2.95e-3; a real mismatch (a sampler at another
    temperature, stale weights: 1e-2 and more) still fires."""

    name, mode = "sampler_mismatch", "sampler/learner mismatch"
    kl_max, frac_max, abs_max, window, logit_scale = 1e-3, 0.01, 2.0, 3, 16.0
    keys = (mn.MISMATCH_KL_K3,)
    requires = ((mn.MISMATCH_KL_K3, mn.MISMATCH_FRAC_HIGH, mn.MISMATCH_ABS_DIFF_MAX),)

    def kl_threshold(self) -> float:
        """`kl_max` plus the mismatch KL the run's precision gives by rounding alone."""
        return self.kl_max + precision_mismatch_kl(self.context.get("precision"), self.logit_scale)

    def check(self, step: int, m: dict[str, Any]) -> tuple[bool, Alert | None]:
        key = self.push(step, m)
        frac, amax = finite_at(m, mn.MISMATCH_FRAC_HIGH), finite_at(m, mn.MISMATCH_ABS_DIFF_MAX)
        if key is None and not math.isfinite(frac) and not math.isfinite(amax):
            return self.active, None
        kl_max = self.kl_threshold()
        bad = (
            (self.full() and self.mean() > kl_max)
            or (math.isfinite(frac) and frac > self.frac_max)
            or (math.isfinite(amax) and amax > self.abs_max)
        )
        if not bad:
            return False, None
        ev = {
            "mismatch_kl": rounded(self.mean(), 6) if len(self.values) else None,
            "frac_rho_above_C": frac if math.isfinite(frac) else None,
            "abs_logp_diff_max": amax if math.isfinite(amax) else None,
            "kl_threshold": rounded(kl_max, 6),
            "precision": self.context.get("precision"),  # None (not logged) is left out by new_alert
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
