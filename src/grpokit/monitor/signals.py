"""Per-step failure-mode signals with the exact definitions of spec §17 (pure torch, NaN for empty sets)."""

from __future__ import annotations

import math

import torch

from ..algos.masked import group_stats, masked_mean, masked_sum

NAN = float("nan")


def zero_variance_signals(
    rewards: torch.Tensor, accuracy: torch.Tensor, group_ids: torch.Tensor, real_valued: bool = True
) -> dict[str, float]:
    """§17.1: fraction of zero-variance groups over groups with G_q >= 2, its all-correct / all-wrong split, and
    the sample-weighted version (TRL `frac_reward_zero_std`). Rewards that are NaN (failed) are ignored."""
    ok = torch.isfinite(rewards)
    r = torch.where(ok, rewards.double(), torch.zeros_like(rewards, dtype=torch.float64))
    _, _, cnt, spread = group_stats(r, group_ids, ok)
    acc_mean, _, _, _ = group_stats(accuracy.double(), group_ids, ok)
    uniq, first = _first_index(group_ids)
    cnt_g, spread_g, acc_g = cnt[first], spread[first], acc_mean[first]
    eligible = cnt_g >= 2
    if not bool(eligible.any()):
        return {"zv/frac": NAN, "zv/all_correct": NAN, "zv/all_wrong": NAN, "zv/sample_frac": NAN, "zv/groups": 0.0}
    tol = 1e-8 if real_valued else 0.0
    zv = (spread_g <= tol) & eligible
    n = float(eligible.sum())
    return {
        "zv/frac": float(zv.sum()) / n,
        "zv/all_correct": float((zv & (acc_g >= 1.0 - 1e-9)).sum()) / n,
        "zv/all_wrong": float((zv & (acc_g <= 1e-9)).sum()) / n,
        "zv/sample_frac": float((cnt_g * zv).sum() / (cnt_g * eligible).sum()),
        "zv/groups": n,
    }


def _first_index(group_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    uniq, inv = torch.unique(group_ids, return_inverse=True)
    first = torch.full((uniq.numel(),), len(group_ids), dtype=torch.long)
    first = first.scatter_reduce(0, inv, torch.arange(len(group_ids)), reduce="amin")
    return uniq, first


def entropy_signals(entropy: torch.Tensor, mask: torch.Tensor) -> dict[str, float]:
    """§17.2: token-mean entropy and the sequence-mean variant over non-empty sequences."""
    if int(mask.sum()) == 0:
        return {"entropy/token_mean": NAN, "entropy/seq_mean": NAN}
    length = mask.sum(1)
    per_seq = masked_sum(entropy, mask, dim=1) / length.clamp(min=1)
    ne = length > 0
    return {
        "entropy/token_mean": float(masked_mean(entropy, mask)),
        "entropy/seq_mean": float(per_seq[ne].mean()),
    }


def length_signals(
    lengths: torch.Tensor,
    truncated: torch.Tensor,
    accuracy: torch.Tensor,
    max_len: int,
    cache_len: int = 0,
) -> dict[str, float]:
    """§17.5: raw response length mean/min/max, by correct/incorrect, truncation and soft-zone rates."""
    lengths = lengths.double()
    correct = accuracy >= 0.5

    def mean(x: torch.Tensor) -> float:
        return float(x.mean()) if x.numel() else NAN

    out = {
        "length/mean": mean(lengths),
        "length/min": float(lengths.min()) if lengths.numel() else NAN,
        "length/max": float(lengths.max()) if lengths.numel() else NAN,
        "length/correct_mean": mean(lengths[correct]),
        "length/incorrect_mean": mean(lengths[~correct]),
        "length/truncation_rate": mean(truncated.double()),
    }
    if cache_len > 0:
        out["length/soft_zone_rate"] = mean((lengths > max_len - cache_len).double())
    return out


def reward_signals(rewards: torch.Tensor, accuracy: torch.Tensor) -> dict[str, float]:
    ok = torch.isfinite(rewards)
    r = rewards[ok].double()
    return {
        "reward/mean": float(r.mean()) if r.numel() else NAN,
        "reward/std": float(r.std()) if r.numel() > 1 else NAN,
        "reward/accuracy": float(accuracy[ok].double().mean()) if r.numel() else NAN,
        "reward/valid_frac": float(ok.double().mean()) if ok.numel() else NAN,
    }


def finite_or_nan(x: float) -> float:
    return x if isinstance(x, float) and math.isfinite(x) else NAN
