"""Sampler/learner mismatch correction: TIS and MIS at token and sequence level (docs/math.md §10, §17.6).

rho_{i,t} = exp(old_logp - samp_logp) (detached). Each correction returns a weight [N,T] (0 at padding) that
multiplies the per-token policy loss after the clipped surrogate; the weights never carry a gradient.
Declared parameters of every correction (docs/math.md §10 defaults): is_c_max C = 2.0 (verl), is_c_min None (no floor).
"""

from __future__ import annotations

import math

import torch

from .masked import LOG_RATIO_CLAMP, masked_mean, masked_sum
from .registry import IS_CORRECTIONS


def _log_rho(old_logp: torch.Tensor, samp_logp: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return ((old_logp - samp_logp).detach().clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)) * mask


def _check(c_max: float) -> None:
    if c_max is None or c_max <= 0:
        raise ValueError(f"is_c_max={c_max!r} must be > 0 (docs/math.md §10)")


@IS_CORRECTIONS.register("token_truncate", "tis")
def token_truncate(old_logp, samp_logp, mask, *, is_c_max: float = 2.0, is_c_min: float | None = None):
    """Token TIS (docs/math.md §10): w = min(rho, C) (optional floor C_min, TRL)."""
    _check(is_c_max)
    w = torch.exp(_log_rho(old_logp, samp_logp, mask)).clamp(min=is_c_min, max=is_c_max)
    return w * mask


@IS_CORRECTIONS.register("token_mask", "mis")
def token_mask(old_logp, samp_logp, mask, *, is_c_max: float = 2.0, is_c_min: float | None = None):
    """Token MIS (IcePop-style, docs/math.md §10): w = rho * 1[C_min <= rho <= C_max]; C_min unset means 0 (TRL)."""
    _check(is_c_max)
    rho = torch.exp(_log_rho(old_logp, samp_logp, mask))
    keep = (rho <= is_c_max) & (rho >= (is_c_min or 0.0))
    return rho * keep * mask


def _seq_log_rho(old_logp, samp_logp, mask) -> torch.Tensor:
    return masked_sum(_log_rho(old_logp, samp_logp, mask), mask, dim=1).clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)


@IS_CORRECTIONS.register("sequence_truncate")
def sequence_truncate(old_logp, samp_logp, mask, *, is_c_max: float = 2.0, is_c_min: float | None = None):
    """Sequence TIS (docs/math.md §10): w_i = min(exp(sum_t log rho), C), broadcast to tokens (log-space product)."""
    _check(is_c_max)
    w = torch.exp(_seq_log_rho(old_logp, samp_logp, mask)).clamp(min=is_c_min, max=is_c_max)
    return w[:, None] * mask


@IS_CORRECTIONS.register("sequence_mask")
def sequence_mask(old_logp, samp_logp, mask, *, is_c_max: float = 2.0, is_c_min: float | None = None):
    """Sequence MIS (docs/math.md §10): w_i = rho_seq 1[C_min <= rho_seq <= C_max] (TRL's default mode)."""
    _check(is_c_max)
    rho = torch.exp(_seq_log_rho(old_logp, samp_logp, mask))
    keep = (rho <= is_c_max) & (rho >= (is_c_min or 0.0))
    return (rho * keep)[:, None] * mask


def is_weights(
    old_logp: torch.Tensor,
    samp_logp: torch.Tensor,
    mask: torch.Tensor,
    mode: str = "token_truncate",
    *,
    is_c_max: float = 2.0,
    is_c_min: float | None = None,
) -> torch.Tensor:
    """Importance weights [N,T] of the named correction (docs/math.md §10). Every correction declares the same
    parameters: is_c_max (C, default 2.0: verl's rollout_is_threshold) and is_c_min (floor, default None = unset)."""
    return IS_CORRECTIONS.get(mode)(old_logp, samp_logp, mask, is_c_max=is_c_max, is_c_min=is_c_min)


def mismatch_stats(
    old_logp: torch.Tensor,
    samp_logp: torch.Tensor,
    mask: torch.Tensor,
    c: float | None = 2.0,
    weights: torch.Tensor | None = None,
) -> dict[str, float]:
    """§17.6 statistics of lambda = old - samp before truncation (NaN when no valid token). `c` is the threshold
    C of the fractions above C / below 1/C; None (no IS correction chosen) means the docs/math.md §10 default 2.0."""
    c = 2.0 if c is None else c
    m = mask.bool()
    if not bool(m.any()):
        return {
            k: float("nan")
            for k in (
                "rho_mean",
                "rho_max",
                "rho_min",
                "frac_high",
                "frac_low",
                "seq_frac_high",
                "abs_diff_mean",
                "abs_diff_max",
                "kl_k1",
                "kl_k3",
                "ess",
            )
        }
    lam = (old_logp - samp_logp).detach().to(torch.float64).clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)
    rho = torch.exp(lam)
    seq = masked_sum(lam, mask, dim=1)
    nonempty = mask.sum(1) > 0
    out = {
        "rho_mean": float(masked_mean(rho, mask)),
        "rho_max": math.exp(float(lam[m].max())),
        "rho_min": math.exp(float(lam[m].min())),
        "frac_high": float(masked_mean((rho > c).double(), mask)),
        "frac_low": float(masked_mean((rho < 1 / c).double(), mask)),
        "seq_frac_high": float((seq[nonempty] > math.log(c)).double().mean()),
        "abs_diff_mean": float(masked_mean(lam.abs(), mask)),
        "abs_diff_max": float(lam[m].abs().max()),
        "kl_k1": float(masked_mean(-lam, mask)),
        "kl_k3": float(masked_mean(rho - lam - 1, mask)),
    }
    if weights is not None:
        w = weights.detach().to(torch.float64)
        wbar = float(masked_mean(w, mask))
        out["ess"] = 1.0 / float(masked_mean((w / wbar) ** 2, mask)) if wbar > 0 else 0.0
    return out
