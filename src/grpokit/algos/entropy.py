"""Token entropy and chosen-token log-probs from logits, computed in chunks (docs/math.md §1.6, §12, §14.2).

`logprobs_and_entropy` never materialises a float32 copy of the full [N, T, V] logits: it works on row chunks
and, when gradients are needed, wraps each chunk in activation checkpointing so the float32 softmax of a chunk
is recomputed in the backward pass instead of being kept alive. With `head` it also avoids the [N, T, V]
logits themselves: hidden states [N, T, D] are projected to the vocabulary one chunk at a time.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch.utils.checkpoint import checkpoint

from .truncation import truncate_logits, truncates


def _expected_logit(z: torch.Tensor) -> torch.Tensor:
    """sum_v softmax(z)_v z_v, with -inf (vocabulary-padding) entries contributing 0 instead of 0 * -inf = NaN."""
    z_finite = torch.nan_to_num(z, nan=float("nan"), posinf=float("inf"), neginf=0.0)  # only -inf -> 0, one pass
    return (torch.softmax(z, dim=-1) * z_finite).sum(-1)


def entropy_from_logits(logits: torch.Tensor) -> torch.Tensor:
    """H = logsumexp(z) - sum_v softmax(z)_v z_v in nats (docs/math.md §1.6); computed in float32; -inf entries
    allowed."""
    z = logits.float()
    lse = torch.logsumexp(z, dim=-1)
    return lse - _expected_logit(z)


def _chunk_fn(temperature: float, head: Callable | None, with_entropy: bool, top_k: int = 0, top_p: float = 1.0):
    def fn(x: torch.Tensor, tok: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        z = (head(x) if head is not None else x).float()
        if temperature != 1.0:
            z = z / temperature
        lse = torch.logsumexp(z, dim=-1)
        if truncates(top_k, top_p):  # the distribution the sampler drew from (docs/math.md §10)
            zt = truncate_logits(z, top_k, top_p, keep=tok)
            logp = zt.gather(-1, tok[:, None]).squeeze(-1) - torch.logsumexp(zt, dim=-1)
        else:
            logp = z.gather(-1, tok[:, None]).squeeze(-1) - lse
        if with_entropy:
            ent = lse - _expected_logit(z)
        else:
            ent = torch.zeros_like(logp)
        return logp, ent

    return fn


def logprobs_and_entropy(
    logits_or_hidden: torch.Tensor,
    tokens: torch.Tensor,
    *,
    temperature: float = 1.0,
    head: Callable[[torch.Tensor], torch.Tensor] | None = None,
    chunk_size: int = 1024,
    with_entropy: bool = True,
    top_k: int = 0,
    top_p: float = 1.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Chosen-token log-probs and full-distribution entropies [N,T] (float32) of logits / temperature.

    With `top_k` > 0 or `top_p` < 1 the log-probs are those of the truncated distribution the sampler drew from
    (`grpokit.algos.truncation`, docs/math.md §10); the entropy stays that of the full distribution (§1.6, §17.2).

    `logits_or_hidden` is [N,T,V] logits, or [N,T,D] hidden states when `head` (e.g. the lm_head) is given.
    Both outputs carry gradients when the input does (use `.detach()` on the entropy unless it feeds a bonus).
    """
    shape = tokens.shape
    x = logits_or_hidden.reshape(-1, logits_or_hidden.shape[-1])
    tok = tokens.reshape(-1)
    fn = _chunk_fn(temperature, head, with_entropy, top_k, top_p)
    needs_grad = torch.is_grad_enabled() and (
        x.requires_grad or (head is not None and any(p.requires_grad for p in getattr(head, "parameters", list)()))
    )
    lps, ents = [], []
    # `split` (one backward node that concatenates the chunk gradients) rather than `x[s:e]` slices: each slice's
    # backward would allocate and accumulate a zero-filled gradient of the FULL [N*T, V] input per chunk.
    for xs, ts in zip(x.split(chunk_size), tok.split(chunk_size)):
        if needs_grad:
            lp, en = checkpoint(fn, xs, ts, use_reentrant=False)
        else:
            lp, en = fn(xs, ts)
        lps.append(lp)
        ents.append(en)
    if not lps:
        empty = torch.zeros(shape, dtype=torch.float32, device=tokens.device)
        return empty, empty.clone()
    return torch.cat(lps).view(shape), torch.cat(ents).view(shape)


@dataclass
class EntropyCoef:
    """Entropy-bonus coefficient (T1, docs/math.md §12 [X]). Fixed when `target` is None; otherwise adaptive:
    coef <- clip(coef + lr * (target - H), 0, max_coef) after each step (raise it when entropy is below target)."""

    value: float = 0.0
    target: float | None = None
    lr: float = 1e-3
    max_coef: float = 0.1

    def update(self, entropy: float) -> float:
        if self.target is not None and entropy == entropy:
            self.value = min(max(self.value + self.lr * (self.target - entropy), 0.0), self.max_coef)
        return self.value
