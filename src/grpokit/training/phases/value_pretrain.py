"""Value pretraining (VC-PPO / VAPO, docs/math.md §11): before the first policy step, the critic alone regresses the
returns of fresh rollouts of the fixed initial policy."""

from __future__ import annotations

from typing import Any

import torch

from ... import algos
from ... import metric_names as mn
from ...parallel.distributed import global_metrics
from ..critic import pretraining_done
from .update import run_update


def pretrain_critic(trainer: Any) -> list[dict[str, float]]:
    """Value pretraining (VC-PPO / VAPO, docs/math.md §11): the policy is fixed; the critic regresses the returns of
    fresh rollouts until its explained variance, measured on each batch *before* training on it (so held
    out), reaches `critic.pretrain_ev` on `critic.pretrain_patience` consecutive batches, or for at most
    `critic.pretrain_max_steps` batches. Returns one row per batch."""
    cc = trainer.critic_cfg
    if trainer.critic is None or cc.pretrain_max_steps <= 0 or trainer.step > 0:
        return []
    rows: list[dict[str, float]] = []
    history: list[float] = []
    while not pretraining_done(history, cc):
        timings: dict[str, float] = {}
        b = trainer.draw(timings)
        trainer.advantages(b, timings)
        # one value on every rank (torchrun), so every rank stops pretraining at the same batch
        ev = algos.explained_variance(b.returns, b.values, b.mask)
        history.append(global_metrics({"ev": ev}, trainer.info)["ev"])
        for epoch in range(cc.pretrain_epochs):
            m, _ = run_update(
                trainer.train_state(),
                b,
                timings,
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
