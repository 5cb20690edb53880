"""Critic losses for PPO-family recipes (docs/math.md §2, §11)."""

from __future__ import annotations

import torch


def value_loss(
    values: torch.Tensor,
    old_values: torch.Tensor,
    returns: torch.Tensor,
    mask: torch.Tensor,
    *,
    value_clip: float | None = 0.5,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Clipped value loss (docs/math.md §2): 0.5 * max((V - G)^2, (clip(V, V_old - eps_v, V_old + eps_v) - G)^2).
    Returns per-token losses [N,T] (aggregate with the policy's mode) and the clip fraction."""
    err = (values - returns) ** 2
    if value_clip is None:
        loss = 0.5 * err
        frac = 0.0
    else:
        v_clip = old_values + (values - old_values).clamp(-value_clip, value_clip)
        err_clip = (v_clip - returns) ** 2
        loss = 0.5 * torch.maximum(err, err_clip)
        with torch.no_grad():
            m = mask.bool()
            frac = float((err_clip > err)[m].float().mean()) if m.any() else float("nan")
    return loss * mask, {"value_clipfrac": frac}
