"""Rollout engine interface. An engine turns prompt token ids into G sampled completions per prompt, with the
sampler's own log-probs (for TIS/MIS, spec §10) and EOS/truncation flags (spec §1.1).

Engines: `hf` (grpokit's shared-prefix sampler, default, `hf.py`), `hf-generate` (transformers `generate`,
`hf_generate.py`) and, later, `vllm`; they register
in `ENGINES` and the trainer only talks to this interface.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import torch


@dataclass
class SamplingParams:
    """How to sample: n completions per prompt, up to max_new_tokens, with temperature / top-p / top-k."""

    n: int = 8
    max_new_tokens: int = 48
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0


@dataclass
class RolloutOutput:
    """N = len(prompts) * n completions, prompt-major (the n samples of prompt 0 first).

    prompt_ids [N, P] left-padded with prompt_mask; completion_ids [N, T] right-padded with completion_mask
    (1 for generated tokens, the EOS included); sampler_logp [N, T] log-probs of the chosen tokens under the
    distribution actually sampled from (after temperature/top-p/top-k); eos / truncated [N] bools;
    prompt_index [N] the index of each sample's prompt in the input list.
    """

    prompt_ids: torch.Tensor
    prompt_mask: torch.Tensor
    completion_ids: torch.Tensor
    completion_mask: torch.Tensor
    sampler_logp: torch.Tensor
    eos: torch.Tensor
    truncated: torch.Tensor
    prompt_index: torch.Tensor
    texts: list[str]
    gen_tokens: int = 0
    seconds: float = 0.0

    @property
    def lengths(self) -> torch.Tensor:
        return self.completion_mask.sum(1)


class RolloutEngine(Protocol):
    """What the trainer needs from an inference engine."""

    def generate(self, prompts: list[list[int]], params: SamplingParams) -> RolloutOutput: ...

    def sync_weights(self, model: torch.nn.Module) -> None:
        """Load the learner's current weights (no-op when the engine shares the learner's model)."""
        ...


def special_ids(model: torch.nn.Module, tokenizer: object) -> tuple[int, list[int]]:
    """(pad id, every EOS id): the tokenizer's EOS plus the model's generation_config EOS ids; pad falls back to EOS."""
    pad = tokenizer.pad_token_id
    eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    eos_ids = set([eos] if isinstance(eos, int) else list(eos or []))
    if tokenizer.eos_token_id is not None:
        eos_ids.add(int(tokenizer.eos_token_id))
    return int(pad if pad is not None else tokenizer.eos_token_id), sorted(eos_ids)


class SharedModelEngine:
    """Base of the in-process engines: they sample with the learner's own model object, so weight sync is free."""

    def __init__(
        self,
        model: torch.nn.Module,
        tokenizer: object,
        *,
        autocast: Callable[[], contextlib.AbstractContextManager] | None = None,
    ) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.autocast = autocast or contextlib.nullcontext
        self.pad_id, self.eos_ids = special_ids(model, tokenizer)

    def sync_weights(self, model: torch.nn.Module) -> None:
        self.model = model


ENGINES: dict[str, Callable[..., RolloutEngine]] = {}


def register_engine(name: str) -> Callable:
    def deco(cls: Callable) -> Callable:
        ENGINES[name] = cls
        return cls

    return deco


def make_engine(name: str, **kwargs: object) -> RolloutEngine:
    if name not in ENGINES:
        raise ValueError(f"rollout.engine={name!r} is not available; choose one of {sorted(ENGINES)}")
    return ENGINES[name](**kwargs)
