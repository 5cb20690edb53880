"""Multi-process training under `torchrun`: process group set-up (gloo on CPU, NCCL on GPU), the policy wrapped in
torch DDP, and the few collectives a step needs (loss denominators, "does any rank have work", metrics).

How a step is split (docs/math.md §1.5 rule 2: every rank divides by the *global* token/sequence counts, so the sum of
the ranks' gradients is the gradient of the whole batch):
- prompts: rank r reads positions r, r+W, r+2W, ... of the seeded epoch permutation (`PromptStream`), so ranks
  never share a prompt within an epoch; each rank's position is checkpointed;
- rollout, scoring, the group filter and advantages run per rank on whole groups (group statistics need no
  communication);
- update: DDP sums gradients over ranks once per optimizer step (micro-batches before the last run under
  `no_sync`); the sum hook replaces DDP's mean because the loss already carries the global denominator;
- metrics: every rank ends the step with the same globally reduced row, so detectors and autopilot decide the
  same thing everywhere; rank 0 alone writes logs and checkpoints.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch import nn


@dataclass
class DistInfo:
    """This process's place in the job (rank 0 of 1 without torchrun)."""

    rank: int = 0
    world: int = 1
    local_rank: int = 0

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @classmethod
    def detect(cls) -> DistInfo:
        if dist.is_available() and dist.is_initialized():
            return cls(dist.get_rank(), dist.get_world_size(), int(os.environ.get("LOCAL_RANK", dist.get_rank())))
        return cls()


def init_distributed(device: str) -> DistInfo:
    """Join the torchrun job when WORLD_SIZE > 1: NCCL when training on CUDA, gloo otherwise."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world > 1 and dist.is_available() and not dist.is_initialized():
        local = int(os.environ.get("LOCAL_RANK", "0"))
        cuda = device.startswith("cuda") and torch.cuda.is_available()
        if cuda:
            torch.cuda.set_device(local)
        dist.init_process_group("nccl" if cuda else "gloo")
    return DistInfo.detect()


def shutdown_distributed() -> None:
    """Leave the torchrun job (after the last collective)."""
    if dist.is_available() and dist.is_initialized():
        dist.barrier()
        if "vllm" not in sys.modules:  # a colocated vLLM tears its groups and the default one down at exit itself
            dist.destroy_process_group()


def device_for_rank(device: str, info: DistInfo) -> str:
    """`cuda` means this rank's own GPU under torchrun."""
    return f"cuda:{info.local_rank}" if device == "cuda" and info.world > 1 else device


def local_prompt_count(global_prompts: int, info: DistInfo) -> int:
    """Prompts each rank draws per step: `rollout.prompts_per_step` is the global count, split evenly."""
    if global_prompts % info.world:
        raise ValueError(
            f"rollout.prompts_per_step={global_prompts} does not split over {info.world} processes: "
            f"use a multiple of {info.world} (the count is global, as verl's train_batch_size)"
        )
    return global_prompts // info.world


def comm_device() -> torch.device:
    """Where collective tensors must live: the GPU for NCCL (it rejects CPU tensors), the CPU for gloo."""
    if dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def all_reduce_sum(values: list[float], info: DistInfo) -> list[float]:
    """Element-wise sum over ranks (float64 on the communication device)."""
    if info.world == 1:
        return list(values)
    t = torch.tensor(values, dtype=torch.float64, device=comm_device())
    dist.all_reduce(t)
    return t.cpu().tolist()


def any_rank(flag: bool, info: DistInfo) -> bool:
    """True when `flag` holds on at least one rank (every rank gets the same answer)."""
    return all_reduce_sum([float(flag)], info)[0] > 0


def all_gather_objects(obj: Any, info: DistInfo) -> list[Any]:
    """Every rank's `obj`, in rank order, on every rank."""
    if info.world == 1:
        return [obj]
    out: list[Any] = [None] * info.world
    dist.all_gather_object(out, obj)
    return out


def broadcast_object(obj: Any, info: DistInfo) -> Any:
    """Rank 0's `obj` on every rank."""
    if info.world == 1:
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def barrier(info: DistInfo) -> None:
    if info.world > 1:
        dist.barrier()


# metrics whose global value is the sum over ranks (counts and throughputs); time/* takes the slowest rank;
# everything else is the mean over the ranks that report it (equal-sized shards: the global mean)
_SUMMED = ("perf/gen_tokens", "perf/tokens_per_s", "perf/gen_tokens_per_s", "train/batch_size")


def reduce_metrics(rows: list[dict[str, float]]) -> dict[str, float]:
    """One global metrics row from every rank's row."""
    keys = sorted({k for r in rows for k in r})
    out: dict[str, float] = {}
    for k in keys:
        vals = [float(r[k]) for r in rows if k in r and isinstance(r[k], (int, float))]
        if not vals:
            continue
        if k in _SUMMED:
            out[k] = sum(vals)
        elif k.startswith("time/"):
            out[k] = max(vals)
        else:
            finite = [v for v in vals if v == v]
            out[k] = sum(finite) / len(finite) if finite else float("nan")
    return out


def global_metrics(metrics: dict[str, float], info: DistInfo) -> dict[str, float]:
    """The step's metrics reduced over ranks, identical on every rank."""
    if info.world == 1:
        return metrics
    return reduce_metrics(all_gather_objects(metrics, info))


# ---------------------------------------------------------------------------------------------- DDP


class PolicyForward(nn.Module):
    """The learner's training forward as a module, so torch DDP can wrap it: DDP prepares its gradient reduction
    in `forward`, and grpokit's forward (shared-prefix hidden states, LM head in chunks) is not `model.forward`."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        from ..models.forward import completion_forward

        return completion_forward(self.model, *args, **kwargs)


def _sum_hook(_state, bucket):  # noqa: ANN001, ANN202  (DDP checks the annotations: a string one is refused)
    """DDP communication hook: all-reduce SUM (DDP's default divides by the world size)."""
    fut = dist.all_reduce(bucket.buffer(), async_op=True).get_future()
    return fut.then(lambda f: f.value()[0])


def wrap_ddp(model: nn.Module, info: DistInfo) -> nn.Module:
    """DDP over the policy's training forward, gradients summed over ranks."""
    import inspect

    from torch.nn.parallel import DistributedDataParallel as DDP

    dev = next(model.parameters()).device
    # buffers (rotary tables) are identical on every rank: no per-forward buffer broadcast
    no_buffer_sync = (
        {"forward_sync_buffers": False}
        if "forward_sync_buffers" in inspect.signature(DDP.__init__).parameters
        else {"broadcast_buffers": False}
    )
    ddp = DDP(
        PolicyForward(model),
        device_ids=[dev.index] if dev.type == "cuda" else None,
        find_unused_parameters=False,
        **no_buffer_sync,
    )
    ddp.register_comm_hook(None, _sum_hook)
    return ddp


def all_reduce_grads(params: list[torch.Tensor], info: DistInfo) -> None:
    """Sum the gradients of parameters outside DDP (the critic) over ranks, as one flat tensor."""
    if info.world == 1:
        return
    grads = [p.grad for p in params if p.grad is not None]
    if not grads:
        return
    flat = torch.cat([g.reshape(-1) for g in grads]).to(comm_device())
    dist.all_reduce(flat)
    flat = flat.to(grads[0].device)
    i = 0
    for g in grads:
        g.copy_(flat[i : i + g.numel()].view_as(g))
        i += g.numel()
