"""Policy losses (docs/math.md §2, §6, §7, §8, §9, §14).

Every loss has the signature `(logp, old_logp, advantages, mask, *, <params>) -> (per_token_loss[N,T], metrics)`:
`logp` carries the gradient, `old_logp` is pi_old (detached), advantages are [N] or [N,T], mask is 0/1.
Per-token losses are 0 at masked positions; sequence-level losses (GSPO, GMPO) are broadcast to the sequence's
valid tokens, so that seq-mean-token-mean aggregation gives their seq-mean value and gradient exactly (§7).
Metrics are floats, token-means over the valid tokens of this call (clip fractions as in §17.4).
The keyword-only arguments are the loss's declared hyper-parameters (defaults from its paper, docs/math.md section in
each docstring); `generator` (Clip-Cov) is an input, not a parameter.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from .advantages import broadcast_advantages, sequence_advantages
from .masked import LOG_RATIO_CLAMP, masked_mean, masked_sum
from .registry import POLICY_LOSSES

Metrics = dict[str, float]


def _ratio(logp: torch.Tensor, old_logp: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    log_ratio = (logp - old_logp.detach()).clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)
    return torch.exp(log_ratio), log_ratio


def _frac(cond: torch.Tensor, mask: torch.Tensor) -> float:
    return float(masked_mean(cond.float(), mask)) if int(mask.sum()) else float("nan")


def _zero_masked(loss: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return torch.where(mask.bool(), loss, torch.zeros((), dtype=loss.dtype, device=loss.device))


@POLICY_LOSSES.register("ppo_clip", "vanilla")
def ppo_clip_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    eps_low: float = 0.2,
    eps_high: float | None = None,
    dual_clip_c: float | None = None,
    delta: float | None = None,
) -> tuple[torch.Tensor, Metrics]:
    """PPO clipped surrogate with clip-higher, dual-clip and two-sided delta (docs/math.md §2, §5).

    l = max(-A r', -A clip(r, 1-eps_low, 1+eps_high)), r = exp(logp - old_logp), r' = min(r, delta) when the
    two-sided `delta` bound is set (INTELLECT-2 / TRL `delta`, must exceed 1+eps_high), else r' = r.
    Dual-clip (c > 1): for A < 0, l = min(l, -c A). eps_high defaults to eps_low (symmetric clip).
    Zero-gradient regions: A>0 & r>1+eps_high; A<0 & r<1-eps_low; dual: A<0 & r>c; A = 0.
    Parameters (docs/math.md §2 defaults): eps_low 0.2 (PPO paper, verl, TRL); eps_high None = eps_low (DAPO's
    clip-higher uses 0.28, §5); dual_clip_c None = off (verl's clip_ratio_c is 3.0); delta None = off.
    """
    eps_high = eps_low if eps_high is None else eps_high
    if dual_clip_c is not None and dual_clip_c <= 1.0:
        raise ValueError(f"dual_clip_c={dual_clip_c} must be > 1 (docs/math.md §2); set it to e.g. 3.0 or null")
    if delta is not None and delta <= 1.0 + eps_high:
        raise ValueError(f"delta={delta} must exceed 1 + eps_high = {1 + eps_high} (two-sided clip)")
    a = broadcast_advantages(advantages, mask).to(logp.dtype)
    r, log_ratio = _ratio(logp, old_logp)
    r1 = r if delta is None else r.clamp(max=delta)
    loss1 = -a * r1
    loss2 = -a * r.clamp(1.0 - eps_low, 1.0 + eps_high)
    loss = torch.maximum(loss1, loss2)
    if dual_clip_c is not None:
        loss = torch.where(a < 0, torch.minimum(loss, -a * dual_clip_c), loss)
    with torch.no_grad():
        metrics = {
            "clipfrac_high": _frac((a > 0) & (r > 1 + eps_high), mask),
            "clipfrac_low": _frac((a < 0) & (r < 1 - eps_low), mask),
            "clipfrac_dual": _frac((a < 0) & (r > dual_clip_c), mask) if dual_clip_c else 0.0,
            "ppo_kl": _frac(-log_ratio, mask) if int(mask.sum()) else float("nan"),
            "ratio_mean": _frac(r, mask),
        }
    return _zero_masked(loss, mask), metrics


@POLICY_LOSSES.register("pg", "reinforce", "gpg")
def pg_loss(
    logp: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor
) -> tuple[torch.Tensor, Metrics]:
    """Plain policy gradient (GPG, REINFORCE; docs/math.md §6): l = -A * logp. No ratio, no clipping, no trust
    region."""
    a = broadcast_advantages(advantages, mask).to(logp.dtype)
    loss = -a * logp
    with torch.no_grad():
        _, log_ratio = _ratio(logp, old_logp)
        metrics = {"ppo_kl": _frac(-log_ratio, mask)}
    return _zero_masked(loss, mask), metrics


def _seq_len(mask: torch.Tensor) -> torch.Tensor:
    return mask.sum(1).to(torch.float32)


@POLICY_LOSSES.register("gspo")
def gspo_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    eps_low: float = 3e-4,
    eps_high: float | None = 4e-4,
) -> tuple[torch.Tensor, Metrics]:
    """GSPO (docs/math.md §7): s_i = exp(mean_t m (logp - old_logp)), l_i = max(-A_i s_i, -A_i clip(s_i, 1-eps_low,
    1+eps_high)). Broadcast to tokens; aggregate with seq-mean-token-mean (= seq-mean, §1.5).
    log s_i is clamped to <= 10 (verl); sequences with L_i = 0 are excluded (spec [X]).
    [N,T] advantages are reduced to [N] by their masked token mean. eps_high=None means eps_high = eps_low.
    Parameters (docs/math.md §7 defaults, the paper's): eps_low 3e-4, eps_high 4e-4."""
    eps_high = eps_low if eps_high is None else eps_high
    a = sequence_advantages(advantages, mask).to(logp.dtype)
    length = _seq_len(mask)
    log_s = masked_sum(logp - old_logp.detach(), mask, dim=1) / length.clamp(min=1)
    log_s = log_s.clamp(-LOG_RATIO_CLAMP, 10.0)
    s = torch.exp(log_s)
    loss_i = torch.maximum(-a * s, -a * s.clamp(1 - eps_low, 1 + eps_high))
    nonempty = length > 0
    with torch.no_grad():
        n = int(nonempty.sum())
        hi = ((a > 0) & (s > 1 + eps_high) & nonempty).sum()
        lo = ((a < 0) & (s < 1 - eps_low) & nonempty).sum()
        metrics = {
            "clipfrac_high": float(hi) / n if n else float("nan"),
            "clipfrac_low": float(lo) / n if n else float("nan"),
            "seq_log_ratio_abs_max": float(log_s[nonempty].abs().max()) if n else float("nan"),
        }
    return _zero_masked(loss_i[:, None].expand_as(logp), mask), metrics


@POLICY_LOSSES.register("gspo_token")
def gspo_token_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    eps_low: float = 3e-4,
    eps_high: float | None = 4e-4,
) -> tuple[torch.Tensor, Metrics]:
    """GSPO-token (docs/math.md §7): log s_{i,t} = logp_t - sg(logp_t) + sg(log s_i); token-level advantages allowed.
    l_{i,t} = max(-A_{i,t} s_{i,t}, -A_{i,t} clip(s_{i,t})). With A_{i,t} = A_i it equals GSPO in value and
    gradient under seq-mean-token-mean aggregation. eps_high=None means eps_high = eps_low.
    Parameters (docs/math.md §7 defaults, the paper's): eps_low 3e-4, eps_high 4e-4."""
    eps_high = eps_low if eps_high is None else eps_high
    a = broadcast_advantages(advantages, mask).to(logp.dtype)
    length = _seq_len(mask)
    log_s = (masked_sum(logp - old_logp.detach(), mask, dim=1) / length.clamp(min=1)).clamp(-LOG_RATIO_CLAMP, 10.0)
    log_st = logp - logp.detach() + log_s.detach()[:, None]
    s = torch.exp(log_st)
    loss = torch.maximum(-a * s, -a * s.clamp(1 - eps_low, 1 + eps_high))
    with torch.no_grad():
        metrics = {
            "clipfrac_high": _frac((a > 0) & (s > 1 + eps_high), mask),
            "clipfrac_low": _frac((a < 0) & (s < 1 - eps_low), mask),
        }
    return _zero_masked(loss, mask), metrics


@POLICY_LOSSES.register("gmpo")
def gmpo_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    clip_c: float = 0.4,
    clip_c_low: float | None = None,
    clip_c_high: float | None = None,
) -> tuple[torch.Tensor, Metrics]:
    """GMPO (docs/math.md §8), log-space form: d = logp - old_logp; d' = min(d, c_high) if A>0, max(d, -c_low) if A<0;
    s_bar_i = exp(sum_t m d' / L_i); l_i = -A_i s_bar_i (broadcast to tokens, seq-mean aggregation).
    Clipping is per token and sign-aware, before the geometric mean; clipped tokens get zero gradient.
    Parameters (docs/math.md §8 defaults): clip_c 0.4 (the GMPO repo and verl), clip_c_low / clip_c_high None = clip_c
    (c_low, c_high of the log-space form)."""
    c_lo = clip_c if clip_c_low is None else clip_c_low
    c_hi = clip_c if clip_c_high is None else clip_c_high
    a = sequence_advantages(advantages, mask).to(logp.dtype)
    d = (logp - old_logp.detach()).clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)
    sign = torch.sign(a)[:, None].expand_as(d)
    d_clip = torch.where(sign > 0, d.clamp(max=c_hi), torch.where(sign < 0, d.clamp(min=-c_lo), d))
    length = _seq_len(mask)
    s_bar = torch.exp(masked_sum(d_clip, mask, dim=1) / length.clamp(min=1))
    loss_i = -a * s_bar
    with torch.no_grad():
        metrics = {
            "clipfrac_high": _frac((sign > 0) & (d > c_hi), mask),
            "clipfrac_low": _frac((sign < 0) & (d < -c_lo), mask),
            "log_ratio_max": float(d[mask.bool()].max()) if int(mask.sum()) else float("nan"),
            "log_ratio_min": float(d[mask.bool()].min()) if int(mask.sum()) else float("nan"),
        }
    return _zero_masked(loss_i[:, None].expand_as(logp), mask), metrics


@POLICY_LOSSES.register("cispo")
def cispo_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    cispo_cap_mode: str = "relative",
    cispo_eps_low: float | None = None,
    cispo_eps_high: float = 0.2,
    cispo_cap: float = 5.0,
) -> tuple[torch.Tensor, Metrics]:
    """CISPO (docs/math.md §9): l = -sg(r_hat) * A * logp; every token keeps a gradient (-r_hat A grad logp).

    `cispo_cap_mode="relative"` (verl, spec default): r_hat = clip(r, 1 - cispo_eps_low, 1 + cispo_eps_high),
    no lower clip when cispo_eps_low is None (the paper's setting).
    `"absolute"` (TRL/ScaleRL): r_hat = min(r, cispo_cap).
    The loss *value* contains logp and is not comparable with PPO-family losses; compare gradients.
    Parameters (docs/math.md §9 defaults): cispo_cap_mode "relative", cispo_eps_low None (the paper: no lower clip),
    cispo_eps_high 0.2 (verl's example: cap 1.2), cispo_cap 5.0 (TRL/ScaleRL, absolute mode).
    """
    a = broadcast_advantages(advantages, mask).to(logp.dtype)
    with torch.no_grad():
        r, _ = _ratio(logp, old_logp)
        if cispo_cap_mode == "relative":
            upper = 1.0 + cispo_eps_high
            r_hat = r.clamp(min=None if cispo_eps_low is None else 1.0 - cispo_eps_low, max=upper)
        elif cispo_cap_mode == "absolute":
            upper = cispo_cap
            r_hat = r.clamp(max=upper)
        else:
            raise ValueError(f"cispo_cap_mode={cispo_cap_mode!r} must be 'relative' or 'absolute'")
        metrics = {"clipfrac_high": _frac(r > upper, mask), "ratio_mean": _frac(r, mask)}
    loss = -r_hat * a * logp
    return _zero_masked(loss, mask), metrics


def covariance_score(logp: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Cov_{i,t} = (A_{i,t} - mean A)(sg logp_{i,t} - mean sg logp) over the valid tokens (docs/math.md §14.1)."""
    a = broadcast_advantages(advantages, mask).detach().to(torch.float32)
    lp = logp.detach().to(torch.float32)
    return (a - masked_mean(a, mask)) * (lp - masked_mean(lp, mask)) * mask


@POLICY_LOSSES.register("clip_cov")
def clip_cov_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    eps_low: float = 1.0,
    eps_high: float | None = 1.0,
    clip_cov_ratio: float = 2e-4,
    clip_cov_lb: float = 1.0,
    clip_cov_ub: float = 5.0,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, Metrics]:
    """Clip-Cov (docs/math.md §14.1): among valid tokens with lb < Cov < ub not already PPO-clipped, draw
    n = max(floor(ratio * sum m), 1) uniformly without replacement and detach them (loss * 0); other tokens
    use the PPO clipped loss. Selection is local to the tokens of this call (micro-batch, as the reference).
    eps_high=None means eps_high = eps_low.
    Parameters (docs/math.md §14.1 defaults): eps_low = eps_high = 1.0 (the paper's scripts: almost no ordinary
    clipping), clip_cov_ratio 2e-4, clip_cov_lb 1.0, clip_cov_ub 5.0."""
    eps_high = eps_low if eps_high is None else eps_high
    a = broadcast_advantages(advantages, mask).to(logp.dtype)
    r, _ = _ratio(logp, old_logp)
    loss1, loss2 = -a * r, -a * r.clamp(1 - eps_low, 1 + eps_high)
    cov = covariance_score(logp, advantages, mask)
    with torch.no_grad():
        clipped_by_ppo = (loss2 > loss1) & mask.bool()
        cand = mask.bool() & (cov > clip_cov_lb) & (cov < clip_cov_ub) & ~clipped_by_ppo
        idx = torch.nonzero(cand.flatten()).squeeze(1)
        n = max(int(clip_cov_ratio * float(mask.sum())), 1)
        keep = torch.ones(mask.numel(), dtype=logp.dtype, device=logp.device)
        if idx.numel():
            perm = torch.randperm(idx.numel(), generator=generator, device="cpu")[:n].to(idx.device)
            keep[idx[perm]] = 0.0
        keep = keep.view_as(mask)
        metrics = {
            "clipfrac_high": _frac((a > 0) & (r > 1 + eps_high), mask),
            "clipfrac_low": _frac((a < 0) & (r < 1 - eps_low), mask),
            "cov_detached_frac": _frac(keep == 0, mask),
        }
    return _zero_masked(torch.maximum(loss1, loss2) * keep, mask), metrics


@POLICY_LOSSES.register("kl_cov")
def kl_cov_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    kl_cov_ratio: float = 2e-4,
    kl_cov_coef: float = 1.0,
) -> tuple[torch.Tensor, Metrics]:
    """KL-Cov (docs/math.md §14.1): top-k valid tokens by Cov (k = max(floor(ratio * sum m), 1), ratio a *fraction*
    as in the verl port, §19) get l = -A r + coef |logp - old_logp|; all others l = -A r (no clipping).
    Parameters (docs/math.md §14.1 defaults): kl_cov_ratio 2e-4 (verl port; the paper's 7B runs use 2e-3),
    kl_cov_coef 1.0."""
    a = broadcast_advantages(advantages, mask).to(logp.dtype)
    r, log_ratio = _ratio(logp, old_logp)
    cov = covariance_score(logp, advantages, mask)
    with torch.no_grad():
        sel = torch.zeros(mask.numel(), dtype=torch.bool, device=logp.device)
        valid_idx = torch.nonzero(mask.flatten().bool()).squeeze(1)
        if valid_idx.numel():
            k = min(max(int(kl_cov_ratio * valid_idx.numel()), 1), valid_idx.numel())
            top = torch.topk(cov.flatten()[valid_idx], k).indices
            sel[valid_idx[top]] = True
        sel = sel.view_as(mask)
    loss = -a * r + torch.where(sel, kl_cov_coef * log_ratio.abs(), torch.zeros_like(r))
    return _zero_masked(loss, mask), {"kl_cov_selected_frac": _frac(sel, mask)}


def top_entropy_threshold(entropy: torch.Tensor, mask: torch.Tensor, rho: float, *, group: Any = None) -> float:
    """tau_rho = quantile_{1-rho} of H over valid tokens of the whole batch across all ranks (docs/math.md §14.2).

    Linear interpolation as `torch.quantile`: with the n values sorted ascending (v_0..v_{n-1}) and
    h = (1 - rho)(n - 1), tau = v_floor(h) + (h - floor(h)) (v_ceil(h) - v_floor(h)). The two order statistics
    come from `torch.kthvalue`, which has no size limit (`torch.quantile` refuses inputs above 2^24 elements,
    i.e. paper-scale batches). When torch.distributed is initialised the valid entropies of every rank in
    `group` are gathered first, so every rank gets the same threshold.
    """
    vals = entropy.detach()[mask.bool()].to(torch.float32).flatten()
    vals = _gather_ranks(vals, group)
    n = vals.numel()
    if n == 0:
        return float("inf")
    h = (1.0 - rho) * (n - 1)
    lo, hi = math.floor(h), math.ceil(h)
    v_lo = torch.kthvalue(vals, lo + 1).values.double()
    v_hi = v_lo if hi == lo else torch.kthvalue(vals, hi + 1).values.double()
    return float(v_lo + (h - lo) * (v_hi - v_lo))


def _gather_ranks(vals: torch.Tensor, group: Any = None) -> torch.Tensor:
    """Concatenate a 1-D tensor of any length from every rank (identity outside torch.distributed)."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size(group) == 1:
        return vals
    world = dist.get_world_size(group)
    count = torch.tensor([vals.numel()], dtype=torch.long, device=vals.device)
    counts = [torch.zeros_like(count) for _ in range(world)]
    dist.all_gather(counts, count, group=group)
    width = int(max(int(c) for c in counts))
    padded = torch.zeros(width, dtype=vals.dtype, device=vals.device)
    padded[: vals.numel()] = vals
    parts = [torch.zeros_like(padded) for _ in range(world)]
    dist.all_gather(parts, padded, group=group)
    return torch.cat([p[: int(c)] for p, c in zip(parts, counts)])


def top_entropy_mask(
    entropy: torch.Tensor, mask: torch.Tensor, rho: float = 0.2, threshold: float | None = None
) -> torch.Tensor:
    """Top-entropy ("80/20") keep mask e = 1[H >= tau_rho] * m (docs/math.md §14.2). Pass `threshold` computed once over
    the whole batch (all ranks) when the loss is evaluated per micro-batch. Multiply per-token losses by e and
    aggregate with the ORIGINAL mask's denominator."""
    tau = top_entropy_threshold(entropy, mask, rho) if threshold is None else threshold
    return ((entropy.detach() >= tau) & mask.bool()).to(mask.dtype)
