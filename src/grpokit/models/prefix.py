"""Shared-prompt computation: the G samples of a group share one prompt, so its transformer pass is computed
once and its key/value cache is expanded to the group (in sampling and in the learner's forward/backward).

In the learner the expansion is an index into the prompt's keys/values, so gradients from all G completions flow
back into the one shared prompt computation: the same gradient as G separate forward passes, with the prompt
computed once instead of G times (verified against the plain forward in tests/models/test_prefix.py).
"""

from __future__ import annotations

import torch
from torch import nn
from transformers import DynamicCache

from .cache_arg import cache_arg


def decoder_and_head(model: nn.Module) -> tuple[nn.Module, nn.Module]:
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return base.get_decoder(), base.get_output_embeddings()


def unique_rows(ids: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Unique (left-padded) prompt rows: (ids [U,P], mask [U,P], inverse [n]) with ids[inverse] == input."""
    key = ids * 2 + mask  # padding positions differ from real tokens even when the pad id is a real token
    uniq, inverse = torch.unique(key, dim=0, return_inverse=True)
    return uniq // 2, uniq % 2, inverse


def positions(mask: torch.Tensor) -> torch.Tensor:
    """Position ids that follow the attention mask (as `generate` does), so left padding shifts nothing."""
    return (mask.long().cumsum(-1) - 1).clamp(min=0)


def prefill(
    decoder: nn.Module, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor
) -> tuple[DynamicCache, torch.Tensor]:
    """Run the prompts once; returns (cache, hidden state at each prompt's last position [U, D])."""
    cache = DynamicCache()
    out = decoder(
        input_ids=prompt_ids,
        attention_mask=prompt_mask,
        position_ids=positions(prompt_mask),
        use_cache=True,
        **cache_arg(decoder, cache),
    )
    return cache, out.last_hidden_state[:, -1]


def shared_prefix_hidden(
    model: nn.Module,
    prompt_ids: torch.Tensor,
    prompt_mask: torch.Tensor,
    completion_ids: torch.Tensor,
) -> torch.Tensor:
    """Hidden states [n, T, D] that predict each completion token (position P-1+t of the full sequence), with each
    distinct prompt computed once. Differentiable."""
    decoder, _ = decoder_and_head(model)
    u_ids, u_mask, inverse = unique_rows(prompt_ids, prompt_mask)
    cache, h_last = prefill(decoder, u_ids, u_mask)
    cache.batch_select_indices(inverse)
    n, t = completion_ids.shape
    attn = torch.cat([prompt_mask, torch.ones(n, t, dtype=prompt_mask.dtype, device=prompt_mask.device)], 1)
    pos = prompt_mask.sum(1, keepdim=True) + torch.arange(t, device=prompt_mask.device)[None, :]
    out = decoder(
        input_ids=completion_ids, attention_mask=attn, position_ids=pos, use_cache=True, **cache_arg(decoder, cache)
    )
    return torch.cat([h_last[inverse][:, None], out.last_hidden_state[:, :-1]], 1)
