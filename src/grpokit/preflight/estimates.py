"""Preflight's pure estimates: expected zero-variance groups per group size (unbiased from the sampled counts),
the recommended G, pass-rate histogram, percentiles, the entropy verdict, the recommended length limit, and a reward
model's noise within groups."""

from __future__ import annotations

import math
import statistics
from typing import Any

import torch

from ..rewards.agreement import AGREEMENT_MIN, NOISE_MAX, auc

GROUP_SIZES = (2, 4, 8, 16, 32, 64)
ZV_TARGET = 0.5
LOW_ENTROPY_NATS = 0.5  # absolute rule: below this the policy barely explores (seeds' rule)
RELATIVE_LOW = 0.1  # relative rule: below 0.1 x ln(vocab size) (the entropy of a uniform next token)
NEAR_UNIFORM = 0.5  # above 0.5 x ln(vocab): near-uniform, an untrained model or a too-high temperature
LENGTH_MARGIN = 1.25
CACHE_FRACTION = 0.2


def zero_variance(pass_rates: list[float], group_size: int, samples: int | None = None) -> dict[str, float]:
    """Expected fraction of groups of `group_size` with zero reward variance (docs/math.md §17.1's ZV, forecast).

    Each prompt's pass rate p = c/n was measured on n = `samples` samples. For G <= n the forecast is unbiased:
    P(all G correct) = C(c, G) / C(n, G), P(all G wrong) = C(n - c, G) / C(n, G) (drawing G of the n without
    replacement). The plug-in p^G + (1-p)^G, used when `samples` is None or G > n, overstates it: at G = n a
    prompt with one correct sample of 8 gives (7/8)^8 = 0.34 though none of its groups of 8 was zero-variance.
    Returns the means over prompts."""
    n = len(pass_rates)
    if n == 0:
        return {"all_correct": math.nan, "all_wrong": math.nan, "zero_variance": math.nan}
    if samples is not None and group_size <= samples:
        total = math.comb(samples, group_size)
        hits = [round(p * samples) for p in pass_rates]
        correct = sum(math.comb(c, group_size) for c in hits) / total / n
        wrong = sum(math.comb(samples - c, group_size) for c in hits) / total / n
    else:
        correct = sum(p**group_size for p in pass_rates) / n
        wrong = sum((1 - p) ** group_size for p in pass_rates) / n
    return {"all_correct": correct, "all_wrong": wrong, "zero_variance": correct + wrong}


def recommend_group_size(table: dict[int, dict[str, float]], target: float = ZV_TARGET) -> int | None:
    """The smallest group size whose expected zero-variance fraction is below `target`, or None."""
    for g in sorted(table):
        if table[g]["zero_variance"] < target:
            return g
    return None


def histogram(values: list[float], bins: int = 5) -> list[dict[str, Any]]:
    """Counts of `values` in [0, 1] over `bins` equal bins (the last bin includes 1.0)."""
    counts = [0] * bins
    for v in values:
        counts[min(bins - 1, int(v * bins))] += 1
    return [{"lo": i / bins, "hi": (i + 1) / bins, "count": c} for i, c in enumerate(counts)]


def percentiles(values: torch.Tensor, qs: tuple[int, ...] = (10, 50, 90, 99)) -> dict[str, float]:
    if values.numel() == 0:
        return {f"p{q}": math.nan for q in qs}
    v = values.double()
    return {f"p{q}": float(torch.quantile(v, q / 100)) for q in qs}


def entropy_verdict(mean_nats: float, vocab_size: int) -> tuple[str, str]:
    """(verdict, advice) for the starting model's mean token entropy."""
    ln_v = math.log(max(vocab_size, 2))
    if not math.isfinite(mean_nats):
        return "unknown", "no completion tokens were sampled"
    if mean_nats < LOW_ENTROPY_NATS or mean_nats < RELATIVE_LOW * ln_v:
        rule = f"< {LOW_ENTROPY_NATS} nats" if mean_nats < LOW_ENTROPY_NATS else f"< {RELATIVE_LOW} x ln(V)"
        return (
            f"too low to explore ({rule}): strong SFT bias",
            "use clip-higher (algo.eps_high=0.28), an entropy bonus (algo.entropy_coef>0), a higher "
            "rollout.temperature, or an earlier / less over-fitted checkpoint",
        )
    if mean_nats > NEAR_UNIFORM * ln_v:
        return (
            "near-uniform: the model looks untrained or the temperature is too high",
            "check the model and its chat template; lower rollout.temperature",
        )
    return "healthy: enough entropy to explore", "no change needed"


def recommend_length(
    lengths: torch.Tensor, truncated: torch.Tensor, max_new_tokens: int, correct: torch.Tensor | None = None
) -> dict[str, Any]:
    """Recommended max_new_tokens and overlong cache.

    With correct completions (`correct`, a bool mask): p99 of the correct answers' lengths x 1.25, rounded up to a
    multiple of 8 -- the room a right answer needs; wrong answers that ramble into the limit do not raise it.
    Without any: p99 of the untruncated lengths x 1.25, and double the current limit when more than 5% were
    truncated (the untruncated lengths then under-estimate the need).
    """
    trunc_rate = float(truncated.double().mean()) if truncated.numel() else math.nan
    right = lengths[correct.bool()].double() if correct is not None else torch.zeros(0)
    stats: dict[str, Any] = {"correct_n": int(right.numel())}
    if right.numel():
        p99 = float(torch.quantile(right, 0.99))
        rec = max(8, int(math.ceil(p99 * LENGTH_MARGIN / 8) * 8))
        stats.update(correct_p50=float(torch.quantile(right, 0.5)), correct_p99=p99)
        note = f"p99 of the {right.numel()} correct answers' lengths x {LENGTH_MARGIN}, rounded up to a multiple of 8"
        if trunc_rate > 0.05:
            note += f" ({trunc_rate:.0%} truncated: wrong answers that run to the limit do not raise it)"
        return _length_advice(rec, note, trunc_rate, stats)
    done = lengths[~truncated].double()
    if done.numel() == 0:
        rec = 2 * max_new_tokens
        note = "every completion was truncated: the limit is far too short; re-run preflight with a larger one"
    else:
        p99 = float(torch.quantile(done, 0.99))
        rec = max(8, int(math.ceil(p99 * LENGTH_MARGIN / 8) * 8))
        note = "no correct answer to measure: p99 of untruncated lengths x 1.25, rounded up to a multiple of 8"
        if trunc_rate > 0.05:
            rec = max(rec, 2 * max_new_tokens)
            note = (
                f"no correct answer and {trunc_rate:.0%} truncated: untruncated lengths under-estimate the need; "
                "doubled the current limit (re-run preflight with it to confirm)"
            )
    return _length_advice(rec, note, trunc_rate, stats)


def _length_advice(rec: int, note: str, trunc_rate: float, stats: dict[str, Any]) -> dict[str, Any]:
    return {
        "recommended_max_new_tokens": rec,
        "recommended_overlong_cache": max(1, round(CACHE_FRACTION * rec)),
        "note": note,
        "truncation_rate": trunc_rate,
        **stats,
    }


def reward_model_noise(scores: list[float], labels: list[float] | None, group_size: int) -> dict[str, Any]:
    """How noisy a reward model's scores are where GRPO reads them: within each group of `group_size` samples.

    `spread_within_groups`: the mean over groups of the scores' standard deviation (what the advantages normalise).
    With a verifier's `labels` (right when >= 0.5): `agreement_auc`, P(right outscores wrong) over the right/wrong
    pairs of the same group (grpokit/rewards/agreement.py), `gap`, the mean over groups that have both of mean(right)
    - mean(wrong), and `noise_to_signal`: the standard deviation of each score around its group's mean for its label
    (the spread the verifier does not explain) over that gap. Noisy when the AUC is below `AGREEMENT_MIN` or the
    noise is above `NOISE_MAX` x the gap."""
    g = max(group_size, 1)
    groups = [list(range(s, min(s + g, len(scores)))) for s in range(0, len(scores), g)]
    finite = [s for s in scores if math.isfinite(s)]
    stds = [statistics.pstdev(v) for v in ([scores[i] for i in grp if math.isfinite(scores[i])] for grp in groups)]
    out: dict[str, Any] = {
        "spread_within_groups": statistics.fmean(stds) if stds else math.nan,
        "spread_overall": statistics.pstdev(finite) if finite else math.nan,
        "agreement_auc": math.nan,
        "pairs": 0,
        "gap": math.nan,
        "noise_to_signal": math.nan,
    }
    if labels is None:
        return {**out, "verdict": "no verifier (no rule reward and no reference answers): agreement not measured"}
    wins = pairs = 0.0
    gaps, residuals = [], []
    for grp in groups:
        ok = [i for i in grp if math.isfinite(scores[i]) and math.isfinite(labels[i])]
        right = [scores[i] for i in ok if labels[i] >= 0.5]
        wrong = [scores[i] for i in ok if labels[i] < 0.5]
        for side in (right, wrong):
            residuals += [v - statistics.fmean(side) for v in side]
        if right and wrong:
            wins += auc(right, wrong) * len(right) * len(wrong)
            pairs += len(right) * len(wrong)
            gaps.append(statistics.fmean(right) - statistics.fmean(wrong))
    if not pairs:
        return {**out, "verdict": "no group had both right and wrong answers: agreement not measured"}
    gap = statistics.fmean(gaps)
    noise = math.sqrt(statistics.fmean(r * r for r in residuals))
    ratio = noise / gap if gap > 0 else math.inf
    agreement = wins / pairs
    noisy = agreement < AGREEMENT_MIN or ratio > NOISE_MAX
    verdict = (
        f"noisy: within groups it ranks right over wrong in {agreement:.0%} of pairs and its unexplained spread is "
        f"{ratio:.2f} x the right-wrong gap (needs >= {AGREEMENT_MIN:.0%} and <= {NOISE_MAX:g}); audit it with "
        "grpokit audit-reward, or weight it below the verifier"
        if noisy
        else "agrees with the verifier within groups"
    )
    return {
        **out,
        "agreement_auc": agreement,
        "pairs": int(pairs),
        "gap": gap,
        "noise_to_signal": ratio,
        "verdict": verdict,
    }
