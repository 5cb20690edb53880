"""The §17 measures: each per-step failure-mode signal computed from a batch's tensors, with the exact definitions of
docs/math.md §17 (pure torch, NaN for empty sets). The training step's signals phase calls them; the group filters
(`group_filter.py`) read the zero-variance ones."""

from __future__ import annotations

from typing import Any

import torch

from .. import metric_names as mn
from .masked import group_stats, masked_mean, masked_sum

NAN = float("nan")


def zero_variance_signals(
    rewards: torch.Tensor, accuracy: torch.Tensor, group_ids: torch.Tensor, real_valued: bool = True
) -> dict[str, float]:
    """§17.1 over groups with G_q >= 2 (failed, NaN rewards ignored):

    - `zv/frac`: groups whose (shaped) rewards are all equal (max - min <= 1e-8) — zero advantage;
    - `zv/sample_frac`: the sample-weighted version (TRL's `frac_reward_zero_std`);
    - `zv/acc_frac`: groups whose accuracy is all equal — what DAPO's filter drops (shaping such as the soft
      overlong punishment can give a group reward variance without any correctness signal);
    - `zv/all_correct`, `zv/all_wrong`: groups with sum acc = G_q or 0 (spec's split, on accuracy alone).
    """
    ok = torch.isfinite(rewards)
    r = torch.where(ok, rewards.double(), torch.zeros_like(rewards, dtype=torch.float64))
    _, _, cnt, spread = group_stats(r, group_ids, ok)
    acc = accuracy.double()
    acc_mean, _, _, acc_spread = group_stats(acc, group_ids, ok)
    _, first = _first_index(group_ids)
    cnt_g, spread_g, acc_g, acc_spread_g = cnt[first], spread[first], acc_mean[first], acc_spread[first]
    eligible = cnt_g >= 2
    if not bool(eligible.any()):
        keys = (mn.ZV_FRAC, mn.ZV_ALL_CORRECT, mn.ZV_ALL_WRONG, mn.ZV_SAMPLE_FRAC, mn.ZV_ACC_FRAC)
        return {**{k: NAN for k in keys}, mn.ZV_GROUPS: 0.0}
    tol = 1e-8 if real_valued else 0.0
    zv = (spread_g <= tol) & eligible
    n = float(eligible.sum())
    return {
        mn.ZV_FRAC: float(zv.sum()) / n,
        mn.ZV_ACC_FRAC: float(((acc_spread_g <= 1e-12) & eligible).sum()) / n,
        mn.ZV_ALL_CORRECT: float(((acc_g >= 1.0 - 1e-9) & eligible).sum()) / n,
        mn.ZV_ALL_WRONG: float(((acc_g <= 1e-9) & eligible).sum()) / n,
        mn.ZV_SAMPLE_FRAC: float((cnt_g * zv).sum() / (cnt_g * eligible).sum()),
        mn.ZV_GROUPS: n,
    }


def _first_index(group_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    uniq, inv = torch.unique(group_ids, return_inverse=True)
    first = torch.full((uniq.numel(),), len(group_ids), dtype=torch.long)
    first = first.scatter_reduce(0, inv, torch.arange(len(group_ids)), reduce="amin")
    return uniq, first


def entropy_signals(entropy: torch.Tensor, mask: torch.Tensor) -> dict[str, float]:
    """§17.2: token-mean entropy and the sequence-mean variant over non-empty sequences."""
    if int(mask.sum()) == 0:
        return {mn.ENTROPY_TOKEN_MEAN: NAN, mn.ENTROPY_SEQ_MEAN: NAN}
    length = mask.sum(1)
    per_seq = masked_sum(entropy, mask, dim=1) / length.clamp(min=1)
    ne = length > 0
    return {
        mn.ENTROPY_TOKEN_MEAN: float(masked_mean(entropy, mask)),
        mn.ENTROPY_SEQ_MEAN: float(per_seq[ne].mean()),
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
        mn.LENGTH_MEAN: mean(lengths),
        mn.LENGTH_MIN: float(lengths.min()) if lengths.numel() else NAN,
        mn.LENGTH_MAX: float(lengths.max()) if lengths.numel() else NAN,
        mn.LENGTH_CORRECT_MEAN: mean(lengths[correct]),
        mn.LENGTH_INCORRECT_MEAN: mean(lengths[~correct]),
        mn.LENGTH_TRUNCATION_RATE: mean(truncated.double()),
    }
    if cache_len > 0:
        out[mn.LENGTH_SOFT_ZONE_RATE] = mean((lengths > max_len - cache_len).double())
    return out


def reward_signals(rewards: torch.Tensor, accuracy: torch.Tensor) -> dict[str, float]:
    ok = torch.isfinite(rewards)
    r = rewards[ok].double()
    return {
        mn.REWARD_MEAN: float(r.mean()) if r.numel() else NAN,
        mn.REWARD_STD: float(r.std()) if r.numel() > 1 else NAN,
        mn.REWARD_ACCURACY: float(accuracy[ok].double().mean()) if r.numel() else NAN,
        mn.REWARD_VALID_FRAC: float(ok.double().mean()) if ok.numel() else NAN,
    }


def reward_consistency_signals(
    texts: list[str],
    rewards: torch.Tensor,
    accuracy: torch.Tensor,
    lengths: torch.Tensor,
    prompts: list[Any] | None = None,
) -> dict[str, float]:
    """Verifier checks on one step's batch: the share of repeated completions (same text for the same prompt)
    whose rewards differ (`reward/dup_inconsistency`, NaN without repeats), and the Pearson correlation of reward
    with response length (`reward/length_corr`) and with correctness (`reward/acc_corr`).

    `prompts` identifies each sample's prompt: the same answer to two different prompts (e.g. "8" to 3+5 and to
    2+2) may rightly score differently, so only repeats under one prompt count."""
    ok = torch.isfinite(rewards)
    keys = prompts if prompts is not None else [None] * len(texts)
    by_text: dict[tuple[Any, str], list[float]] = {}
    for p, t, r, good in zip(keys, texts, rewards.tolist(), ok.tolist()):
        if good:
            by_text.setdefault((p, t.strip()), []).append(r)
    repeated = [v for v in by_text.values() if len(v) > 1]
    dup = sum(max(v) - min(v) > 1e-6 for v in repeated) / len(repeated) if repeated else NAN
    out = {mn.REWARD_DUP_INCONSISTENCY: dup}
    r = rewards[ok].double()
    for key, x in ((mn.REWARD_LENGTH_CORR, lengths[ok].double()), (mn.REWARD_ACC_CORR, accuracy[ok].double())):
        if r.numel() > 2 and float(r.std()) > 0 and float(x.std()) > 0:
            out[key] = float(torch.corrcoef(torch.stack([r, x]))[0, 1])
        else:
            out[key] = NAN
    return out


def component_correlations(total: list[float], per_reward: dict[str, list[float]]) -> dict[str, float]:
    """Pearson correlation of the total reward with each reward component after the first (the correctness one),
    e.g. `reward/corr/format`: a reward that follows formatting more than correctness is hackable."""
    out: dict[str, float] = {}
    names = list(per_reward)
    t = torch.tensor(total, dtype=torch.float64)
    for name in names[1:]:
        x = torch.tensor(per_reward[name], dtype=torch.float64)
        ok = torch.isfinite(t) & torch.isfinite(x)
        if int(ok.sum()) > 2 and float(t[ok].std()) > 0 and float(x[ok].std()) > 0:
            out[f"{mn.REWARD_CORR_PREFIX}{name}"] = float(torch.corrcoef(torch.stack([t[ok], x[ok]]))[0, 1])
    return out
