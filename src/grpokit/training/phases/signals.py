"""Signals phase: every docs/math.md §17 signal of one step, computed in one pass from the batch and the policy's
log-probs/entropies for it (the old-logprob pass, or the training forward itself when exactly on-policy).

Lengths, truncation, rewards of the trained batch (`reward/kept_*`), reward consistency, token entropy (§17.2),
KL to the reference and to the initial policy (§17.3), sampler/learner mismatch (§17.6) and the critic's explained
variance. Also on steps whose update was skipped: that is when advantage collapse happens.
"""

from __future__ import annotations

import torch

from ... import algos
from ... import metric_names as mn
from ...algos import measures
from ...algos.algo_config import AlgoConfig
from ..batch import Batch


def step_signals(
    b: Batch,
    algo: AlgoConfig,
    *,
    max_new_tokens: int,
    policy_logp: torch.Tensor | None,
    policy_entropy: torch.Tensor | None,
) -> dict[str, float]:
    m: dict[str, float] = {}
    kept = measures.reward_signals(b.rewards, b.accuracy)
    m.update({mn.kept(k): v for k, v in kept.items()})
    # verifier checks read the verifier's own scores: shaping (soft overlong punishment) is length-based by design
    scores = b.scores if b.scores is not None else b.rewards
    m.update(measures.reward_consistency_signals(b.texts, scores, b.accuracy, b.lengths, b.example_index))
    cache = int(algo.overlong_cache) if algo.soft_overlong else 0
    m.update(measures.length_signals(b.lengths, b.truncated, b.accuracy, max_new_tokens, cache))
    if policy_entropy is not None:
        m.update(measures.entropy_signals(policy_entropy, b.raw_mask))
    if policy_logp is not None:
        if b.ref_logp is not None:
            m.update(algos.kl_metrics(policy_logp, b.ref_logp, b.raw_mask, prefix=mn.KL_REF_FAMILY))
        if b.init_logp is not None:
            m.update(algos.kl_metrics(policy_logp, b.init_logp, b.raw_mask, prefix=mn.KL_INIT_FAMILY))
        ms = algos.mismatch_stats(policy_logp, b.sampler_logp, b.raw_mask, algo.is_c_max)
        m.update({mn.MISMATCH_PREFIX + k: v for k, v in ms.items()})
    if b.values is not None and b.returns is not None:
        m[mn.CRITIC_EXPLAINED_VARIANCE] = algos.explained_variance(b.returns, b.values, b.mask)
    return m


def timing_metrics(timings: dict[str, float], total: float, b: Batch) -> dict[str, float]:
    """The step's seconds by phase (`time/*`), generated tokens, and tokens per second overall and in generation."""
    m = {f"time/{k}" if k != "gen_tokens" else mn.PERF_GEN_TOKENS: v for k, v in timings.items()}
    m[mn.TIME_STEP] = total
    m[mn.PERF_TOKENS_PER_S] = float((b.prompt_mask.sum() + b.raw_mask.sum()) / total)
    m[mn.PERF_GEN_TOKENS_PER_S] = timings.get("gen_tokens", 0.0) / max(timings.get("generate", 1e-9), 1e-9)
    return m
