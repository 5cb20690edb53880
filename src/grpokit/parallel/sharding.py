"""How the learner's weights are laid out over the ranks of a torchrun job (`train.sharding`), as registered
strategies:

- `ddp` (default): every rank holds the whole policy; torch DDP sums gradients over ranks (`wrap_ddp`).
- `fsdp2`: the *learner* is a copy of the policy sharded with torch FSDP2 `fully_shard` (one unit per decoder
  layer, the rest in the root unit), so parameters, gradients and AdamW state are split over ranks - what a model
  whose training state does not fit one device needs. Rollouts, scoring passes (old/ref log-probs, values),
  evaluation, weight pushes to vLLM and the saved model use the plain policy (`session.model`): an inference
  replica that receives the full weights after every optimizer step (one all-gather). Inference needs 2 bytes
  per parameter in bf16 where training needs about 16, so the replica fits where the learner does not, and no
  FSDP collective runs in the rollout, whose decode steps differ between ranks (the early exit).

A single process (world size 1) uses neither: the policy is trained in place.

Gradients are summed over ranks, not averaged: every rank's loss already divides by the global token/sequence
counts (docs/math.md §1.5 rule 2), so the sum is the gradient of the whole batch.
"""

from __future__ import annotations

import contextlib
import copy
from typing import Any

import torch
from torch import nn

from ..common.registry import Registry
from .distributed import DistInfo, PolicyForward, wrap_ddp

SHARDINGS = Registry("sharding")


class Sharding:
    """One process: the policy itself is the learner, its optimizer state is the optimizer's own."""

    name = "none"
    lockstep = False  # whether every forward is a collective, so all ranks must run the same number of them
    fused_optimizer = True  # torch's fused AdamW (plain tensors on CPU or GPU)

    def __init__(self, policy: nn.Module, info: DistInfo) -> None:
        self.policy = policy
        self.info = info

    @property
    def train_module(self) -> nn.Module | None:
        """The module the training forward goes through (None: `completion_forward(policy)` directly)."""
        return None

    def parameters(self) -> list[nn.Parameter]:
        """The parameters the policy optimizer steps."""
        return [p for p in self.policy.parameters() if p.requires_grad]

    def sync_context(self, last: bool) -> contextlib.AbstractContextManager:
        """Gradient accumulation: gradients are reduced over ranks only on the last micro-batch."""
        return contextlib.nullcontext()

    def grad_norm(self, norm: torch.Tensor) -> torch.Tensor:
        """The global gradient norm as a plain tensor (`clip_grad_norm_` already clips with it)."""
        return norm

    def after_optimizer_step(self) -> None:
        """Make the policy (what samples and scores) equal the learner's new weights."""

    def optimizer_state(self, optimizer: torch.optim.Optimizer) -> Any:
        """What a checkpoint saves and restores through `state_dict()` / `load_state_dict()`."""
        return optimizer

    def after_restore(self) -> None:
        """The policy was loaded from a checkpoint: give the learner the same weights."""


@SHARDINGS.register("ddp")
class DDPSharding(Sharding):
    """Every rank holds the whole policy; DDP sums the gradients over ranks once per optimizer step."""

    name = "ddp"

    def __init__(self, policy: nn.Module, info: DistInfo) -> None:
        super().__init__(policy, info)
        self._ddp = wrap_ddp(policy, info)

    @property
    def train_module(self) -> nn.Module:
        return self._ddp

    def sync_context(self, last: bool) -> contextlib.AbstractContextManager:
        return contextlib.nullcontext() if last else self._ddp.no_sync()


@SHARDINGS.register("fsdp2")
class FSDP2Sharding(Sharding):
    """The learner is a copy of the policy under FSDP2 `fully_shard` (one unit per decoder layer plus the root);
    the policy is its inference replica, refreshed with the full weights after every optimizer step."""

    name = "fsdp2"

    lockstep = True
    fused_optimizer = False  # sharded DTensor parameters: the foreach AdamW

    def __init__(self, policy: nn.Module, info: DistInfo) -> None:
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard

        super().__init__(policy, info)
        self._opt_state: _FullOptimizerState | None = None
        if hasattr(policy, "peft_config"):
            raise ValueError(
                "train.sharding=fsdp2 with a LoRA adapter (model.lora_r > 0) is not supported: the adapter is small, "
                "use train.sharding=ddp (or model.lora_r=0 to shard the full model)"
            )
        dev = next(policy.parameters()).device
        mesh = init_device_mesh(dev.type, (info.world,))
        learner = copy.deepcopy(policy)
        for layer in _decoder_layers(learner):
            fully_shard(layer, mesh=mesh)
        self._root = fully_shard(_OwnedOutputs(learner), mesh=mesh)
        for m in self._root.modules():  # sum over ranks (FSDP's default divides by the world size)
            if hasattr(m, "set_gradient_divide_factor"):
                m.set_gradient_divide_factor(1.0)
                m.set_force_sum_reduction_for_comms(True)  # a plain SUM collective (gloo has no PREMUL_SUM)

    @property
    def train_module(self) -> nn.Module:
        return self._root

    def parameters(self) -> list[nn.Parameter]:
        return [p for p in self._root.parameters() if p.requires_grad]

    def sync_context(self, last: bool) -> contextlib.AbstractContextManager:
        self._root.set_requires_gradient_sync(last)  # recursive: every unit keeps its gradient until the last
        return contextlib.nullcontext()

    def grad_norm(self, norm: torch.Tensor) -> torch.Tensor:
        return norm.full_tensor() if hasattr(norm, "full_tensor") else norm

    def full_state(self) -> dict[str, torch.Tensor]:
        """The learner's whole weights on every rank, named as in the policy (one all-gather per tensor)."""
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

        sd = get_model_state_dict(self._root, options=StateDictOptions(full_state_dict=True))
        return {k.removeprefix("model."): v for k, v in sd.items()}

    @torch.no_grad()
    def after_optimizer_step(self) -> None:
        full = self.full_state()
        for name, p in self.policy.named_parameters():
            p.copy_(full[name])

    def optimizer_state(self, optimizer: torch.optim.Optimizer) -> Any:
        if self._opt_state is None or self._opt_state.optimizer is not optimizer:
            self._opt_state = _FullOptimizerState(self._root, optimizer)
        return self._opt_state

    def after_restore(self) -> None:
        """Collective, on every rank: the restored policy's weights and the checkpoint's optimizer state are
        sharded into the learner (rank 0 reads a checkpoint alone first, so loading itself must not communicate)."""
        from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict

        sd = {f"model.{k}": v for k, v in self.policy.state_dict().items()}
        set_model_state_dict(self._root, sd, options=StateDictOptions(full_state_dict=True, strict=False))
        if self._opt_state is not None:
            self._opt_state.apply()


class _OwnedOutputs(PolicyForward):
    """The training forward returning tensors that own their memory: FSDP2 hooks its pre-backward on the root's
    outputs, and a view (a slice of the hidden states) would let an in-place op drop that hook."""

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        out = super().forward(*args, **kwargs)
        return tuple(x.clone() if isinstance(x, torch.Tensor) and x._base is not None else x for x in out)


class _FullOptimizerState:
    """An FSDP2 optimizer's state as one unsharded dict keyed by parameter name (what `get_optimizer_state_dict`
    gathers), so a checkpoint holds it whole; loading shards it again."""

    def __init__(self, root: nn.Module, optimizer: torch.optim.Optimizer) -> None:
        self.root, self.optimizer = root, optimizer
        self.pending: dict[str, Any] | None = None

    def state_dict(self) -> dict[str, Any]:
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_optimizer_state_dict

        return get_optimizer_state_dict(self.root, self.optimizer, options=StateDictOptions(full_state_dict=True))

    def load_state_dict(self, sd: dict[str, Any]) -> None:
        """Kept until `apply` (sharding it is collective, and rank 0 may read a checkpoint before the others)."""
        self.pending = sd

    def apply(self) -> None:
        from torch.distributed.checkpoint.state_dict import StateDictOptions, set_optimizer_state_dict

        if self.pending is not None:
            opts = StateDictOptions(full_state_dict=True)
            set_optimizer_state_dict(self.root, self.optimizer, self.pending, options=opts)
            self.pending = None


def _decoder_layers(model: nn.Module) -> list[nn.Module]:
    """The transformer blocks (the `ModuleList` of the decoder, e.g. `model.model.layers`), each an FSDP unit."""
    lists = [m for m in model.modules() if isinstance(m, nn.ModuleList) and len(m) > 0]
    if not lists:
        raise ValueError(f"train.sharding=fsdp2: no list of decoder layers found in {type(model).__name__}")
    return list(max(lists, key=len))


def make_sharding(name: str, policy: nn.Module, info: DistInfo) -> Sharding:
    """The strategy `train.sharding` names (a single process needs none)."""
    if name not in SHARDINGS:
        raise ValueError(f"train.sharding={name!r} is not one of {sorted(SHARDINGS)}")
    return SHARDINGS[name](policy, info) if info.world > 1 else Sharding(policy, info)
