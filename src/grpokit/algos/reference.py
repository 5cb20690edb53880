"""The reference policy of the KL term, as registered strategies (docs/math.md §12, §16, §17.3).

`algo.reference` picks one: `none` (no reference model), `frozen` (the initial policy, GRPO/PPO), `ema`
(T1's dynamic anchor: theta_ref <- eta theta_ref + (1 - eta) theta after every optimizer step) or `sync`
(hard copy of the policy every `ref_sync_every` steps). A moving reference hides cumulative drift, so `ema` and
`sync` also keep the initial policy and KL to it is logged as `kl_init/*` (docs/math.md §17.3).
"""

from __future__ import annotations

import copy

import torch

from .algo_config import AlgoConfig
from .kl import ema_update_
from .registry import REFERENCES


def _frozen_copy(model: torch.nn.Module) -> torch.nn.Module:
    return copy.deepcopy(model).eval().requires_grad_(False)


class Reference:
    """No reference model: nothing to score against, nothing to update."""

    name = "none"
    moving = False  # whether the reference follows the policy (then KL to the initial policy is logged too)

    def __init__(self, policy: torch.nn.Module, algo: AlgoConfig) -> None:
        self.algo = algo
        self.model: torch.nn.Module | None = None
        self.init_model: torch.nn.Module | None = None

    def after_optimizer_step(self, policy: torch.nn.Module) -> None:
        """Called after every optimizer step of the policy."""

    def after_step(self, policy: torch.nn.Module, step: int) -> None:
        """Called once at the end of training step `step` (0-based)."""

    def checkpoint_modules(self) -> dict[str, torch.nn.Module]:
        """Modules a checkpoint must hold to resume exactly (a moving reference is state)."""
        return {"ref_model": self.model} if self.moving and self.model is not None else {}


REFERENCES.register("none")(Reference)


@REFERENCES.register("frozen")
class FrozenReference(Reference):
    """pi_ref = the initial policy, never updated (GRPO, PPO, DAPO with KL)."""

    name = "frozen"

    def __init__(self, policy: torch.nn.Module, algo: AlgoConfig) -> None:
        super().__init__(policy, algo)
        self.model = _frozen_copy(policy)


class _MovingReference(Reference):
    moving = True

    def __init__(self, policy: torch.nn.Module, algo: AlgoConfig) -> None:
        super().__init__(policy, algo)
        self.model = _frozen_copy(policy)
        self.init_model = _frozen_copy(policy)


@REFERENCES.register("ema")
class EmaReference(_MovingReference):
    """T1 dynamic anchor (docs/math.md §12): theta_ref <- eta theta_ref + (1 - eta) theta after each optimizer step."""

    name = "ema"

    def after_optimizer_step(self, policy: torch.nn.Module) -> None:
        ema_update_(self.model.parameters(), policy.parameters(), self.algo.ref_ema_eta)


@REFERENCES.register("sync")
class SyncReference(_MovingReference):
    """Hard sync theta_ref <- theta every `ref_sync_every` training steps (TR-DPO style, TRL `sync_ref_model`)."""

    name = "sync"

    def after_step(self, policy: torch.nn.Module, step: int) -> None:
        every = self.algo.ref_sync_every
        if every > 0 and (step + 1) % every == 0:
            ema_update_(self.model.parameters(), policy.parameters(), 0.0)


def make_reference(policy: torch.nn.Module, algo: AlgoConfig) -> Reference:
    """The recipe's reference strategy; `none` when the KL coefficient is 0 (no model is kept for nothing)."""
    if not algo.needs_reference:
        return Reference(policy, algo)
    if algo.reference not in REFERENCES:
        raise ValueError(f"algo.reference={algo.reference!r} is not one of {sorted(REFERENCES)}")
    return REFERENCES[algo.reference](policy, algo)
