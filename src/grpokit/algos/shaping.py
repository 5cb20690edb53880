"""Reward shaping and response filtering of DAPO (docs/math.md §5)."""

from __future__ import annotations

import torch


def soft_overlong_punishment(lengths: torch.Tensor, max_len: int, cache_len: int, factor: float = 1.0) -> torch.Tensor:
    """DAPO soft overlong punishment R_len(L) (docs/math.md §5, TRL form):
    0 for L <= L_max - L_cache; ((L_max - L_cache) - L) / L_cache inside the cache zone; -1 beyond L_max.
    `factor` kappa scales both the zone value and the -1 (verl's penalty factor; identical for kappa = 1)."""
    if cache_len <= 0 or cache_len > max_len:
        raise ValueError(f"overlong cache_len={cache_len} must lie in (0, max_len={max_len}]")
    lengths = lengths.to(torch.float64)
    start = max_len - cache_len
    zone = (start - lengths) / cache_len
    out = torch.where(lengths <= start, torch.zeros_like(lengths), zone)
    out = torch.where(lengths > max_len, torch.full_like(lengths, -1.0), out)
    return (out * factor).to(torch.float32)


def overlong_filter(mask: torch.Tensor, truncated: torch.Tensor) -> torch.Tensor:
    """DAPO overlong filtering (docs/math.md §5): zero the whole loss mask of truncated responses (tau_i = 1).
    The truncated responses still enter their group's reward statistics (spec [X], TRL)."""
    return mask * (~truncated.bool()).to(mask.dtype)[:, None]


def group_keep_mask(metric: torch.Tensor, group_ids: torch.Tensor) -> torch.Tensor:
    """DAPO dynamic-sampling filter (docs/math.md §5): keep a group iff the population std (ddof 0) of its filter metric
    is > 0 or it has a single member. Returns a per-sample bool [N]."""
    from .masked import group_stats

    _, _, cnt, spread = group_stats(metric.to(torch.float64), group_ids)
    return (spread > 0) | (cnt == 1)
