"""The batch that flows through a training step: rollout tensors plus per-sample fields each stage adds."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import torch

from ..rollout.base import RolloutOutput


@dataclass
class Batch:
    """N samples. [N,P] prompt tensors (left-padded), [N,T] completion tensors (right-padded), [N] per-sample."""

    prompt_ids: torch.Tensor
    prompt_mask: torch.Tensor
    completion_ids: torch.Tensor
    raw_mask: torch.Tensor  # generated tokens (EOS included), before any filtering
    mask: torch.Tensor  # loss mask: raw_mask minus overlong-filtered and unscorable samples
    sampler_logp: torch.Tensor
    eos: torch.Tensor
    truncated: torch.Tensor
    group_ids: torch.Tensor
    rewards: torch.Tensor  # shaped rewards; NaN where scoring failed
    accuracy: torch.Tensor
    texts: list[str]
    example_index: list[int]
    old_logp: torch.Tensor | None = None
    ref_logp: torch.Tensor | None = None
    init_logp: torch.Tensor | None = None
    entropy: torch.Tensor | None = None
    values: torch.Tensor | None = None
    advantages: torch.Tensor | None = None
    returns: torch.Tensor | None = None
    keep: torch.Tensor | None = None
    scores: torch.Tensor | None = None  # the reward functions' weighted sum before shaping (what the verifier said)
    episodes: list[dict[str, Any]] | None = None  # multi-turn runs: each sample's episode record (grpokit/agents)
    extras: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return int(self.completion_ids.shape[0])

    @property
    def valid(self) -> torch.Tensor:
        return torch.isfinite(self.rewards)

    @property
    def lengths(self) -> torch.Tensor:
        return self.raw_mask.sum(1)

    def select(self, idx: torch.Tensor | list[int]) -> Batch:
        """Rows `idx` of every per-sample field."""
        idx_t = torch.as_tensor(idx, dtype=torch.long)
        idx_l = idx_t.tolist()
        kw: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if isinstance(v, torch.Tensor):
                kw[f.name] = v[idx_t]
            elif isinstance(v, list):
                kw[f.name] = [v[i] for i in idx_l]
            else:
                kw[f.name] = v
        return Batch(**kw)

    @staticmethod
    def concat(batches: list[Batch]) -> Batch:
        """Concatenate batches, padding prompt (left) and completion (right) widths."""
        p = max(b.prompt_ids.shape[1] for b in batches)
        t = max(b.completion_ids.shape[1] for b in batches)
        kw: dict[str, Any] = {}
        for f in dataclasses.fields(Batch):
            vals = [getattr(b, f.name) for b in batches]
            if f.name in ("prompt_ids", "prompt_mask"):
                pad = batches[0].extras.get("pad_id", 0) if f.name == "prompt_ids" else 0
                kw[f.name] = torch.cat([_lpad(v, p, pad) for v in vals])
            elif all(isinstance(v, torch.Tensor) for v in vals):
                if vals[0].dim() == 2:
                    kw[f.name] = torch.cat([_rpad(v, t, 0) for v in vals])
                else:
                    kw[f.name] = torch.cat(vals)
            elif all(isinstance(v, list) for v in vals):
                kw[f.name] = [x for v in vals for x in v]
            elif f.name == "extras":
                kw[f.name] = dict(batches[0].extras)
            else:
                kw[f.name] = None
        return Batch(**kw)


def _lpad(x: torch.Tensor, width: int, value: int) -> torch.Tensor:
    if x.shape[1] == width:
        return x
    return torch.cat([torch.full((x.shape[0], width - x.shape[1]), value, dtype=x.dtype), x], 1)


def _rpad(x: torch.Tensor, width: int, value: float) -> torch.Tensor:
    if x.shape[1] == width:
        return x
    return torch.cat([x, torch.full((x.shape[0], width - x.shape[1]), value, dtype=x.dtype)], 1)


def from_rollout(
    out: RolloutOutput,
    rewards: torch.Tensor,
    accuracy: torch.Tensor,
    group_offset: int,
    example_index: list[int],
    pad_id: int,
) -> Batch:
    """A Batch from a rollout and its (shaped) rewards; group ids are globally unique via `group_offset`."""
    mask = out.completion_mask.clone().float()
    return Batch(
        prompt_ids=out.prompt_ids,
        prompt_mask=out.prompt_mask,
        completion_ids=out.completion_ids,
        raw_mask=out.completion_mask.float(),
        mask=mask,
        sampler_logp=out.sampler_logp,
        eos=out.eos,
        truncated=out.truncated,
        group_ids=out.prompt_index + group_offset,
        rewards=rewards.float(),
        accuracy=accuracy.float(),
        texts=list(out.texts),
        example_index=[example_index[int(i)] for i in out.prompt_index],
        extras={"pad_id": pad_id},
        episodes=None if out.episodes is None else list(out.episodes),
    )
