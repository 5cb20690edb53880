"""Value pretraining (VC-PPO / VAPO, docs/math.md §11): before the first policy step, the critic alone regresses the
returns of fresh rollouts of the fixed initial policy."""

from __future__ import annotations

from collections.abc import Callable

import torch

from ... import algos
from ... import metric_names as mn
from ...config import CriticConfig
from ...parallel.distributed import DistInfo, global_metrics
from ..batch import Batch
from ..critic import pretraining_done
from .update import TrainState, run_update


def pretrain_critic(
    draw: Callable[[], Batch],
    advantages: Callable[[Batch], object],
    state: TrainState,
    critic_cfg: CriticConfig,
    info: DistInfo,
) -> list[dict[str, float]]:
    """Value pretraining (VC-PPO / VAPO, docs/math.md §11): the policy is fixed; the critic regresses the returns of
    fresh rollouts (`draw`, then `advantages`: values, returns) until its explained variance, measured on each batch
    *before* training on it (so held out), reaches `critic.pretrain_ev` on `critic.pretrain_patience` consecutive
    batches, or for at most `critic.pretrain_max_steps` batches. Returns one row per batch."""
    cc = critic_cfg
    rows: list[dict[str, float]] = []
    history: list[float] = []
    while not pretraining_done(history, cc):
        b = draw()
        advantages(b)
        # one value on every rank (torchrun), so every rank stops pretraining at the same batch
        ev = algos.explained_variance(b.returns, b.values, b.mask)
        history.append(global_metrics({"ev": ev}, info)["ev"])
        for epoch in range(cc.pretrain_epochs):
            m, _ = run_update(
                state,
                b,
                step=10**6 + len(history) * 100 + epoch,
                kl_coef=0.0,
                entropy_coef=0.0,
                train_policy=False,
                value_pretraining=True,
            )
        rows.append(
            {
                mn.CRITIC_PRETRAIN_STEP: float(len(history)),
                mn.CRITIC_PRETRAIN_EXPLAINED_VARIANCE: history[-1],
                mn.CRITIC_PRETRAIN_VALUE_LOSS: m.get(mn.CRITIC_VALUE_LOSS, float("nan")),
                mn.CRITIC_PRETRAIN_REWARD_MEAN: float(torch.nan_to_num(b.rewards).mean()),
            }
        )
    return rows
