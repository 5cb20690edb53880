"""Masked reductions and group helpers shared by every algorithm (docs/math.md §1)."""

from __future__ import annotations

import torch

LOG_RATIO_CLAMP = 20.0  # docs/math.md §1.2: clamp log-ratios to [-20, 20] before exp


def masked_sum(x: torch.Tensor, mask: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    """sum(x * m). Uses `where` so that inf/NaN at masked positions never leak into the result."""
    x = torch.where(mask.bool(), x, torch.zeros((), dtype=x.dtype, device=x.device))
    return x.sum() if dim is None else x.sum(dim)


def masked_mean(x: torch.Tensor, mask: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    """sum(x*m)/sum(m); 0 where the mask is empty (docs/math.md §1.5 rule 1)."""
    den = mask.sum() if dim is None else mask.sum(dim)
    return masked_sum(x, mask, dim) / den.clamp(min=1)


def masked_var(x: torch.Tensor, mask: torch.Tensor, unbiased: bool = True) -> torch.Tensor:
    """Masked variance over all valid elements (Bessel-corrected by default, as verl's masked_whiten)."""
    n = mask.sum()
    mu = masked_mean(x, mask)
    ss = masked_sum((x - mu) ** 2, mask)
    den = (n - 1) if unbiased else n
    return ss / den.clamp(min=1)


def masked_whiten(x: torch.Tensor, mask: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """(x - mean) / sqrt(var + eps) over valid elements, Bessel-corrected (docs/math.md §2, verl)."""
    if int(mask.sum()) < 2:
        raise ValueError("whitening needs at least 2 valid tokens (docs/math.md §2 edge cases)")
    mu = masked_mean(x, mask)
    var = masked_var(x, mask)
    return (x - mu) * torch.rsqrt(var + eps) * mask


def group_index(group_ids: torch.Tensor) -> tuple[torch.Tensor, int]:
    """Map arbitrary group ids [N] to dense indices 0..Q-1; returns (index[N], Q)."""
    uniq, inv = torch.unique(group_ids, return_inverse=True)
    return inv, int(uniq.numel())


def group_stats(
    values: torch.Tensor, group_ids: torch.Tensor, valid: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per-sample group mean, Bessel std, group size and max-min spread (docs/math.md §1.3).

    `valid` [N] (bool) excludes unscorable samples from their group's statistics (TRL's NaN-aware stats).
    Groups with fewer than 2 valid members get std 0.
    """
    values = values.to(torch.float64)
    valid = torch.ones_like(values, dtype=torch.bool) if valid is None else valid.bool()
    idx, q = group_index(group_ids)
    v = torch.where(valid, values, torch.zeros_like(values))
    w = valid.to(values.dtype)
    cnt = torch.zeros(q, dtype=values.dtype).index_add_(0, idx, w)
    s = torch.zeros(q, dtype=values.dtype).index_add_(0, idx, v)
    mean = s / cnt.clamp(min=1)
    dev = torch.where(valid, values - mean[idx], torch.zeros_like(values))
    ss = torch.zeros(q, dtype=values.dtype).index_add_(0, idx, dev * dev)
    std = torch.sqrt(ss / (cnt - 1).clamp(min=1))
    big = torch.finfo(values.dtype).max
    mx = torch.full((q,), -big, dtype=values.dtype).scatter_reduce(
        0, idx, torch.where(valid, values, torch.full_like(values, -big)), reduce="amax"
    )
    mn = torch.full((q,), big, dtype=values.dtype).scatter_reduce(
        0, idx, torch.where(valid, values, torch.full_like(values, big)), reduce="amin"
    )
    spread = (mx - mn).clamp(min=0)
    return mean[idx], std[idx], cnt[idx], spread[idx]


def last_token_index(mask: torch.Tensor) -> torch.Tensor:
    """Index t* of the last valid position of each row ([N]); -1 for empty rows."""
    t = torch.arange(mask.shape[1], device=mask.device).expand_as(mask)
    return torch.where(mask.bool(), t, torch.full_like(t, -1)).amax(dim=1)
