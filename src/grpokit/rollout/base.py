"""Rollout engine interface. An engine turns prompt token ids into G sampled completions per prompt, with the
sampler's own log-probs (for TIS/MIS, docs/math.md §10) and EOS/truncation flags (docs/math.md §1.1).

Engines: `hf` (grpokit's shared-prefix sampler, default, `hf.py`), `hf-generate` (transformers `generate`,
`hf_generate.py`) and, later, `vllm`; they register
in `ENGINES` and the trainer only talks to this interface.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import torch

from ..common.registry import Registry


@dataclass
class SamplingParams:
    """How to sample: n completions per prompt, up to max_new_tokens, with temperature / top-p / top-k."""

    n: int = 8
    max_new_tokens: int = 48
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    min_new_tokens: int = 0  # EOS is suppressed before this many new tokens (TRL/transformers min_new_tokens)


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
    # multi-turn engines (grpokit/agents/engine.py): each sample's episode record; completion_mask then has holes
    # where the environment's tokens are, and texts are the final policy messages
    episodes: list[dict[str, Any]] | None = None

    @property
    def lengths(self) -> torch.Tensor:
        """Policy tokens per sample."""
        return self.completion_mask.sum(1)

    @property
    def spans(self) -> torch.Tensor:
        """Tokens after the prompt per sample: the policy's, and in an episode the environment's between them."""
        if self.episodes is None:
            return self.lengths
        return torch.tensor([int(e["span"]) for e in self.episodes], dtype=torch.long)


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


def left_pad(seqs: list[list[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Left-pad token id lists to [B, P] with an attention mask."""
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for i, s in enumerate(seqs):
        if s:
            ids[i, width - len(s) :] = torch.tensor(s, dtype=torch.long)
            mask[i, width - len(s) :] = 1
    return ids, mask


def completion_mask_from_ids(ids: torch.Tensor, eos_ids: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """Mask up to and including the first EOS; returns (mask [N,T], has_eos [N])."""
    is_eos = torch.zeros_like(ids, dtype=torch.bool)
    for e in eos_ids:
        is_eos |= ids == e
    has_eos = is_eos.any(1)
    first = torch.where(has_eos, is_eos.float().argmax(1), torch.full_like(has_eos, ids.shape[1], dtype=torch.long))
    t = torch.arange(ids.shape[1])[None, :]
    return (t <= first[:, None]).long() * (t < ids.shape[1]).long(), has_eos


class SharedModelEngine:
    """Base of the in-process engines: they sample with the learner's own model object, so weight sync is free."""

    @classmethod
    def from_session(cls, session: object) -> SharedModelEngine:
        """The engine for a session (see `grpokit.training.session`): the learner's model, tokenizer and autocast."""
        return cls(session.model, session.tokenizer, autocast=session.autocast)  # type: ignore[attr-defined]

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

    def output(
        self, prompts: list[list[int]], index: torch.Tensor, comp: torch.Tensor, samp: torch.Tensor, t0: float
    ) -> RolloutOutput:
        """The RolloutOutput of sampled `comp` [N,T] for the N (expanded) `prompts`: the response mask runs up to
        and including the first EOS; a response without EOS is truncated; sampler log-probs are masked."""
        cmask, has_eos = completion_mask_from_ids(comp, self.eos_ids)
        return assemble_output(self.tokenizer, self.pad_id, prompts, index, comp, samp, cmask, has_eos, t0)


def assemble_output(
    tokenizer: object,
    pad_id: int,
    prompts: list[list[int]],
    index: torch.Tensor,
    comp: torch.Tensor,
    samp: torch.Tensor,
    cmask: torch.Tensor,
    has_eos: torch.Tensor,
    t0: float,
    *,
    texts: list[str] | None = None,
    episodes: list[dict[str, Any]] | None = None,
) -> RolloutOutput:
    """The RolloutOutput of completions `comp` [N,T] with response mask `cmask` [N,T] and EOS flags `has_eos` [N],
    for the N (expanded) `prompts` of `index`: prompts left-padded with `pad_id`, sampler log-probs `samp` masked,
    a row without EOS truncated. Single-turn: `cmask` is a prefix of each row and the texts are decoded from it.
    Multi-turn (grpokit/agents): `cmask` has holes (the environment's tokens), and the episodes' final answers and
    records are given as `texts` and `episodes`."""
    if texts is None:
        lengths = cmask.sum(1)
        texts = [
            tokenizer.decode(comp[i, : int(lengths[i])].tolist(), skip_special_tokens=True) for i in range(len(prompts))
        ]
    pids, pmask = left_pad(prompts, pad_id)
    return RolloutOutput(
        prompt_ids=pids,
        prompt_mask=pmask,
        completion_ids=comp,
        completion_mask=cmask,
        sampler_logp=samp * cmask,
        eos=has_eos,
        truncated=~has_eos,
        prompt_index=index,
        texts=texts,
        gen_tokens=int(cmask.sum()),
        seconds=time.perf_counter() - t0,
        episodes=episodes,
    )


ENGINES = Registry("rollout engine")


def engine_class(name: str) -> Callable[..., RolloutEngine]:
    if name not in ENGINES:
        raise ValueError(f"rollout.engine={name!r} is not available; choose one of {sorted(ENGINES)}")
    return ENGINES[name]


def make_engine(name: str, **kwargs: object) -> RolloutEngine:
    return engine_class(name)(**kwargs)


def build_engine(name: str, session: object) -> RolloutEngine:
    """The registered engine `name` built from a session (each engine reads the keys it needs)."""
    return engine_class(name).from_session(session)  # type: ignore[attr-defined]


def check_engine(name: str) -> None:
    """Fail early (before any model loads) when the engine cannot run here, e.g. vLLM is not installed."""
    check = getattr(engine_class(name), "check_available", None)
    if check is not None:
        check()
