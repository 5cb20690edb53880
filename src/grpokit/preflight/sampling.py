"""Preflight sampling in training-shaped rounds: `rollout.prompts_per_step` prompts x G per engine call, as one
generation round of a training step, so the per-round seconds it measures are what a step pays per round; a
progress line after each round; the rounds' outputs joined into one `RolloutOutput`."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch

from ..rollout.base import RolloutOutput

Progress = Callable[[str], None]


def _pad(t: torch.Tensor, width: int, value: float, left: bool) -> torch.Tensor:
    extra = width - t.shape[1]
    if extra <= 0:
        return t
    pad = torch.full((t.shape[0], extra), value, dtype=t.dtype, device=t.device)
    return torch.cat([pad, t] if left else [t, pad], dim=1)


def join_outputs(outs: list[RolloutOutput], pad_id: int) -> RolloutOutput:
    """One output from several rounds: prompts left-padded, completions right-padded to the widest, prompt
    indices offset so they index the concatenated prompt list."""
    p = max(o.prompt_ids.shape[1] for o in outs)
    t = max(o.completion_ids.shape[1] for o in outs)
    offsets, total = [], 0
    for o in outs:
        offsets.append(total)
        total += int(o.prompt_index.max()) + 1 if o.prompt_index.numel() else 0
    return RolloutOutput(
        prompt_ids=torch.cat([_pad(o.prompt_ids, p, pad_id, True) for o in outs]),
        prompt_mask=torch.cat([_pad(o.prompt_mask, p, 0, True) for o in outs]),
        completion_ids=torch.cat([_pad(o.completion_ids, t, pad_id, False) for o in outs]),
        completion_mask=torch.cat([_pad(o.completion_mask, t, 0, False) for o in outs]),
        sampler_logp=torch.cat([_pad(o.sampler_logp, t, 0.0, False) for o in outs]),
        eos=torch.cat([o.eos for o in outs]),
        truncated=torch.cat([o.truncated for o in outs]),
        prompt_index=torch.cat([o.prompt_index + off for o, off in zip(outs, offsets)]),
        texts=[x for o in outs for x in o.texts],
        gen_tokens=sum(int(o.gen_tokens) for o in outs),
        seconds=sum(float(o.seconds) for o in outs),
    )


def sample_in_rounds(
    session: Any, idx: list[int], progress: Progress | None = None
) -> tuple[RolloutOutput, list[float]]:
    """G completions for each prompt of `idx`, `rollout.prompts_per_step` prompts per engine call; returns the
    joined output and each round's generation seconds."""
    k = max(1, int(session.cfg.rollout.prompts_per_step))
    g = session.cfg.rollout.group_size
    params = session.sampling_params()
    outs, seconds = [], []
    t_start = time.perf_counter()
    for start in range(0, len(idx), k):
        chunk = idx[start : start + k]
        t0 = time.perf_counter()
        outs.append(session.engine.generate([session.data.train_tokens[i] for i in chunk], params))
        seconds.append(time.perf_counter() - t0)
        if progress is not None:
            done = start + len(chunk)
            progress(
                f"sampling: {done}/{len(idx)} prompts x G={g} ({len(seconds)} rounds of {k} prompts, "
                f"{seconds[-1]:.1f} s this round, {time.perf_counter() - t_start:.0f} s so far)"
            )
    pad_id = int(getattr(session.engine, "pad_id", 0) or 0)
    return join_outputs(outs, pad_id), seconds
