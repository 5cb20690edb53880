"""Where the KL penalty to the reference enters the update, as registered strategies (docs/math.md §12, §16).

`algo.kl_placement` picks one:
* `loss` — beta Agg(k(theta)) is added to the loss (`loss_term`, which `algos.compute_loss` asks every placement
  for: GRPO, verl `use_kl_loss`); nothing happens before the loss.
* `reward` — r <- r - beta sg(k1) with pi_old vs pi_ref (PPO/InstructGPT, REINFORCE++, RLOO): per token for
  estimators that take token rewards (GAE, REINFORCE++ and its baseline variant), else the per-sequence sum
  subtracted from the scalar reward.
* `reward_centered` — T1's on-policy KL normalisation: A <- A - beta (KL_seq - group mean KL_seq).
"""

from __future__ import annotations

import inspect
from typing import Protocol

import torch

from .aggregate import Denominators, aggregate
from .algo_config import AlgoConfig
from .kl import centered_sequence_kl, kl_estimate, kl_reward_penalty, sequence_kl
from .registry import ADVANTAGES, KL_PLACEMENTS


class KLBatch(Protocol):
    """What a placement reads of a step's batch (`grpokit.training.batch.Batch` has it)."""

    old_logp: torch.Tensor | None
    ref_logp: torch.Tensor | None
    mask: torch.Tensor
    group_ids: torch.Tensor


def takes_token_rewards(advantage: str) -> bool:
    """Whether the advantage estimator accepts per-token rewards (its signature has `token_rewards`)."""
    return "token_rewards" in inspect.signature(ADVANTAGES.get(advantage)).parameters


@KL_PLACEMENTS.register("loss")
class KLPlacement:
    """KL as a loss term: added in `compute_loss`; rewards and advantages are left alone."""

    def __init__(self, algo: AlgoConfig) -> None:
        self.algo = algo

    def active(self, b: KLBatch, beta: float) -> bool:
        return b.ref_logp is not None and b.old_logp is not None and beta > 0

    def needs_old_logp(self) -> bool:
        """Whether the penalty is computed from pi_old before the update (so a scoring pass must run)."""
        return False

    def rewards(self, b: KLBatch, rewards: torch.Tensor, beta: float) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(scalar rewards [N], per-token rewards [N,T] or None) that the advantage estimator sees."""
        return rewards, None

    def advantages(self, b: KLBatch, adv: torch.Tensor, beta: float) -> torch.Tensor:
        return adv

    def loss_term(
        self, logp: torch.Tensor, ref_logp: torch.Tensor, mask: torch.Tensor, denominators: Denominators | None
    ) -> torch.Tensor | None:
        """Agg(k(theta)) with the recipe's estimator and aggregation (docs/math.md §16), which `compute_loss`
        weighs by beta; None where the KL enters the rewards or advantages instead."""
        kl = kl_estimate(logp, ref_logp, self.algo.kl_estimator)
        return aggregate(kl, mask, self.algo.loss_agg, denominators=denominators, l_norm=self.algo.l_norm)


class NotInLoss(KLPlacement):
    """A placement that acts before the update: no loss term."""

    def loss_term(
        self, logp: torch.Tensor, ref_logp: torch.Tensor, mask: torch.Tensor, denominators: Denominators | None
    ) -> torch.Tensor | None:
        return None


@KL_PLACEMENTS.register("reward")
class KLInReward(NotInLoss):
    """r_t <- r_t - beta k1_t (per token), or R <- R - beta sum_t k1_t for scalar-reward estimators (docs/math.md
    §16)."""

    def needs_old_logp(self) -> bool:
        return self.algo.kl_coef > 0

    def rewards(self, b: KLBatch, rewards: torch.Tensor, beta: float) -> tuple[torch.Tensor, torch.Tensor | None]:
        if not self.active(b, beta):
            return rewards, None
        if self.algo.uses_critic or takes_token_rewards(self.algo.advantage):
            return rewards, kl_reward_penalty(b.old_logp, b.ref_logp, b.mask, beta)
        return rewards - beta * sequence_kl(b.old_logp, b.ref_logp, b.mask), None


@KL_PLACEMENTS.register("reward_centered")
class CenteredKL(NotInLoss):
    """T1 (docs/math.md §12): A <- A - beta (KL_seq,i - mean of its group), so the penalty does not shift the group
    mean."""

    def needs_old_logp(self) -> bool:
        return self.algo.kl_coef > 0

    def advantages(self, b: KLBatch, adv: torch.Tensor, beta: float) -> torch.Tensor:
        if not self.active(b, beta):
            return adv
        return adv - beta * centered_sequence_kl(
            b.old_logp, b.ref_logp, b.mask, b.group_ids, **self.algo.kwargs("kl_placement")
        )


def make_placement(algo: AlgoConfig) -> KLPlacement:
    if algo.kl_placement not in KL_PLACEMENTS:
        raise ValueError(f"algo.kl_placement={algo.kl_placement!r} is not one of {sorted(KL_PLACEMENTS)}")
    return KL_PLACEMENTS[algo.kl_placement](algo)
