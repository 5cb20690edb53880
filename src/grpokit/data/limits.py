"""Prompt length limits: a rendered prompt must leave room for `rollout.max_new_tokens` in the model's context
and fit `data.max_prompt_tokens` when that is set. Too long: skipped, counted and logged
(`data.on_long_prompt=skip`, the default) or one error naming the example (`error`).

Memory is bounded by one example's limit, not by its size: a prompt longer than `limit x CHARS_PER_TOKEN_CAP`
characters is too long without being tokenized (tokenizing a 10 MB prompt alone takes ~2 GB and 15 s), and
shorter ones are tokenized once, as they would be anyway.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .example import Example

log = logging.getLogger(__name__)

# no tokenizer we know averages more characters per token over a whole prompt (English BPE: ~4)
CHARS_PER_TOKEN_CAP = 32


@dataclass
class PromptLimit:
    """The longest prompt a run accepts, where that number comes from, and what was skipped for it."""

    tokens: int
    source: str  # e.g. "data.max_prompt_tokens=512" or "model context 2048 - rollout.max_new_tokens 48"
    on_long: str = "skip"  # skip | error
    skipped: dict[str, list[str]] = field(default_factory=dict)  # split -> ids of skipped examples
    first: str = ""  # the first skipped example, as `Example.where` names it (its file and line)

    def summary(self) -> str | None:
        """One line counting the skipped prompts, or None when none were skipped."""
        if not any(self.skipped.values()):
            return None
        parts = [f"{len(ids)} {split}" for split, ids in self.skipped.items() if ids]
        first = self.first or next(ids[0] for ids in self.skipped.values() if ids)
        return (
            f"data: skipped {' and '.join(parts)} prompts longer than {self.tokens} tokens ({self.source}; first: "
            f"{first}); set data.on_long_prompt=error to stop instead"
        )


def prompt_limit(data_cfg: Any, context: int | None, max_new_tokens: int) -> PromptLimit | None:
    """The limit for a run: the model context minus the response budget, capped by `data.max_prompt_tokens`.
    A context that leaves no room for a prompt is a ValueError naming `rollout.max_new_tokens`."""
    options = []
    if context:
        room = context - max_new_tokens
        if room < 1:
            raise ValueError(
                f"rollout.max_new_tokens={max_new_tokens} leaves no room for a prompt in the model's context of "
                f"{context} tokens: use rollout.max_new_tokens below {context}"
            )
        options.append((room, f"model context {context} - rollout.max_new_tokens {max_new_tokens}"))
    cap = getattr(data_cfg, "max_prompt_tokens", None)
    if cap:
        options.append((int(cap), f"data.max_prompt_tokens={cap}"))
    if not options:
        return None
    tokens, source = min(options)
    return PromptLimit(tokens, source, getattr(data_cfg, "on_long_prompt", "skip"))


def model_context(model: Any) -> int | None:
    """The model's context length (max_position_embeddings or its aliases), None when the config has none."""
    cfg = getattr(model, "config", None)
    for key in ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length"):
        v = getattr(cfg, key, None)
        if isinstance(v, int) and v > 0:
            return v
    return None


def encode_prompts(
    examples: list[Example],
    render: Callable[[Example], str],
    tokenizer: Any,
    limit: PromptLimit | None,
    split: str,
) -> tuple[list[Example], list[list[int]]]:
    """Render and tokenize each example's prompt; drop (or refuse) those over `limit`. Returns kept examples and
    their token ids, in order."""
    kept: list[Example] = []
    ids_out: list[list[int]] = []
    skipped: list[str] = []
    first = ""  # the first prompt skipped: where it is and how long
    for ex in examples:
        text = render(ex)
        size = _too_long(text, tokenizer, limit)
        if isinstance(size, str):
            assert limit is not None
            if limit.on_long == "error":
                raise ValueError(
                    f"{ex.origin + ': ' if ex.origin else ''}{split} example {ex.id}: the prompt has {size}, over the "
                    f"limit of {limit.tokens} ({limit.source}); shorten it, raise data.max_prompt_tokens, or set "
                    "data.on_long_prompt=skip to drop such prompts"
                )
            first = first or f"{ex.where}: {size}"
            skipped.append(ex.id)
            continue
        kept.append(ex)
        ids_out.append(size)
    if limit is not None:
        limit.skipped[split] = skipped
        limit.first = limit.first or first
        if skipped:
            log.warning(
                "skipped %d %s prompts over %d tokens (%s; first: %s)",
                len(skipped),
                split,
                limit.tokens,
                limit.source,
                first,
            )
    if examples and not kept:
        assert limit is not None
        raise ValueError(
            f"every {split} prompt ({len(examples)}) is longer than {limit.tokens} tokens ({limit.source}); the "
            f"first: {first}. Shorten the prompts, raise data.max_prompt_tokens, or lower rollout.max_new_tokens"
        )
    return kept, ids_out


def _too_long(text: str, tokenizer: Any, limit: PromptLimit | None) -> list[int] | str:
    """The prompt's token ids, or (too long) a description of its size."""
    if limit is not None and len(text) > limit.tokens * CHARS_PER_TOKEN_CAP:
        return f"{len(text)} characters (more than {limit.tokens * CHARS_PER_TOKEN_CAP}, not tokenized)"
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    if limit is not None and len(ids) > limit.tokens:
        return f"{len(ids)} tokens"
    return ids
