"""grpokit.algos — the algorithm core: pure torch, no transformers. Stable public API:

    get_advantage(name)(rewards, group_ids, **params) -> advantages [N] (or [N,T] for token-level estimators)
    get_policy_loss(name)(logp, old_logp, advantages, mask, **params) -> (per_token_loss [N,T], metrics)
    aggregate(per_token_loss, mask, mode, denominators=None, l_norm=None) -> scalar
    kl_estimate(logp, ref_logp, kind) -> [N,T]
    list_methods() -> {kind: {name: one-line description}}
    ADVANTAGES.params(name), POLICY_LOSSES.params(name), ... -> {parameter: Param(name, default, annotation)}

Each component's keyword-only arguments (other than tensor inputs such as `mask`) are its declared
hyper-parameters, with defaults from its paper; `AlgoConfig.bind()` binds them from a recipe and rejects keys
the chosen components do not take.

Tensors are [N, T] (N sequences, T tokens, right-padded) with a 0/1 mask. Formulas and their sections of
grpokit's math reference, docs/math.md (every `§N` in grpokit's docstrings), are in each function's docstring.
"""

from __future__ import annotations

from collections.abc import Callable

from . import advantages, correction, entropy, group_filter, kl, kl_placement, policy_loss, reference, shaping  # noqa: F401  (register everything)
from .advantages import (
    explained_variance,
    gae,
    gpg_alpha,
    length_adaptive_lambda,
    pkpo_rewards,
    value_targets,
)
from .aggregate import Denominators, aggregate
from .algo_config import AlgoConfig
from .compose import LossInputs, compute_advantages, compute_loss, loss_denominators
from .correction import is_weights, mismatch_stats
from .entropy import EntropyCoef, entropy_from_logits, logprobs_and_entropy
from .kl import (
    KL_CONTROLLERS,
    AdaptiveKLController,
    FixedKLController,
    centered_sequence_kl,
    ema_update_,
    kl_estimate,
    kl_metrics,
    kl_reward_penalty,
    sequence_kl,
)
from .policy_loss import covariance_score, top_entropy_mask, top_entropy_threshold
from .registry import (
    ADVANTAGES,
    AGGREGATIONS,
    GROUP_FILTERS,
    IS_CORRECTIONS,
    KL_ESTIMATORS,
    KL_PLACEMENTS,
    POLICY_LOSSES,
    REFERENCES,
)
from .shaping import group_keep_mask, overlong_filter, soft_overlong_punishment
from .value import value_loss


def get_advantage(name: str) -> Callable:
    """Advantage estimator by name (see `list_methods()["advantage"]`)."""
    return ADVANTAGES.get(name)


def get_policy_loss(name: str) -> Callable:
    """Policy loss by name (see `list_methods()["policy_loss"]`)."""
    return POLICY_LOSSES.get(name)


def list_methods() -> dict[str, dict[str, str]]:
    """Every registered component, by kind, with its one-line description."""
    return {
        "advantage": ADVANTAGES.describe(),
        "policy_loss": POLICY_LOSSES.describe(),
        "aggregation": AGGREGATIONS.describe(),
        "kl_estimator": KL_ESTIMATORS.describe(),
        "is_correction": IS_CORRECTIONS.describe(),
        "group_filter": GROUP_FILTERS.describe(),
    }


__all__ = [
    "AdaptiveKLController",
    "AlgoConfig",
    "Denominators",
    "EntropyCoef",
    "FixedKLController",
    "KL_CONTROLLERS",
    "GROUP_FILTERS",
    "KL_PLACEMENTS",
    "REFERENCES",
    "LossInputs",
    "aggregate",
    "centered_sequence_kl",
    "compute_advantages",
    "compute_loss",
    "covariance_score",
    "ema_update_",
    "entropy_from_logits",
    "explained_variance",
    "gae",
    "get_advantage",
    "get_policy_loss",
    "gpg_alpha",
    "group_keep_mask",
    "is_weights",
    "kl_estimate",
    "kl_metrics",
    "kl_reward_penalty",
    "length_adaptive_lambda",
    "list_methods",
    "logprobs_and_entropy",
    "loss_denominators",
    "mismatch_stats",
    "overlong_filter",
    "pkpo_rewards",
    "sequence_kl",
    "soft_overlong_punishment",
    "top_entropy_mask",
    "top_entropy_threshold",
    "value_loss",
    "value_targets",
]
