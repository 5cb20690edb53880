"""Learner forward pass: chosen-token log-probs, entropies and values of completions, computed from the last
hidden states with the LM head applied in chunks (no full [N, T, V] float32 logits, docs/math.md §1.6)."""

from __future__ import annotations

import torch
from torch import nn

from ..algos.entropy import logprobs_and_entropy
from .prefix import decoder_and_head, positions, shared_prefix_hidden


def used_width(completion_mask: torch.Tensor) -> int:
    """Columns up to the last one any row has a token in: a response's mask is a prefix of its row, an episode's
    has holes where the environment's tokens are (grpokit/agents), which must stay in the forward's context."""
    cols = torch.nonzero(completion_mask.sum(0)).flatten()
    return int(cols.max()) + 1 if cols.numel() else 0


def completion_forward(
    model: nn.Module,
    prompt_ids: torch.Tensor,
    prompt_mask: torch.Tensor,
    completion_ids: torch.Tensor,
    completion_mask: torch.Tensor,
    *,
    temperature: float = 1.0,
    top_k: int = 0,
    top_p: float = 1.0,
    with_entropy: bool = True,
    chunk_size: int = 1024,
    shared_prefix: bool = True,
    return_hidden: bool = False,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """(logp [n,T], entropy [n,T], hidden [n,T,D] or None) of the completion tokens, logits / temperature, the
    log-probs under the sampler's `top_k` / `top_p` truncation (docs/math.md §10), the entropy the full one's.

    With `return_hidden` the third element is the last hidden states that predict each completion token (what a
    critic head reads, `grpokit.training.critic`), else None.

    Common left padding of the prompts and right padding of the completions is trimmed first. Position ids
    follow the attention mask, as in `generate`, so left padding does not shift positions. With `shared_prefix`
    each distinct prompt is computed once and its keys/values shared by its group (same values and gradients).
    """
    device = next(model.parameters()).device
    n, t_full = completion_ids.shape
    lead = int((prompt_mask.sum(0) == 0).long().cumprod(0).sum())  # columns padded in every row
    t_used = max(used_width(completion_mask), 1)
    p_ids, p_mask = prompt_ids[:, lead:], prompt_mask[:, lead:]
    c_ids, c_mask = completion_ids[:, :t_used], completion_mask[:, :t_used]
    decoder, head = decoder_and_head(model)
    if shared_prefix:
        h = shared_prefix_hidden(model, p_ids.to(device), p_mask.to(device), c_ids.to(device))
    else:
        ids = torch.cat([p_ids, c_ids], 1).to(device)
        attn = torch.cat([p_mask, torch.ones_like(c_mask, dtype=p_mask.dtype)], 1).to(device)
        hidden = decoder(input_ids=ids, attention_mask=attn, position_ids=positions(attn)).last_hidden_state
        p = p_ids.shape[1]
        h = hidden[:, p - 1 : p - 1 + t_used]
    logp, ent = logprobs_and_entropy(
        h,
        c_ids.to(device),
        temperature=temperature,
        head=head,
        chunk_size=chunk_size,
        with_entropy=with_entropy,
        top_k=top_k,
        top_p=top_p,
    )
    third = h if return_hidden else None

    def pad(x: torch.Tensor | None) -> torch.Tensor | None:
        if x is None or t_used == t_full:
            return x
        return torch.cat([x, x.new_zeros((n, t_full - t_used, *x.shape[2:]))], 1)

    return pad(logp), pad(ent), pad(third)
