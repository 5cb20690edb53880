"""Top-k / top-p truncation of a next-token distribution, shared by the sampler and the learner (docs/math.md §10).

A sampler that draws from the truncated distribution q~(v) = q(v) 1[v in K] / sum_{u in K} q(u) reports log q~ of
each token it drew; a learner that scores the same token under its full distribution p gets log p, so the
importance ratio p / q~ of two identical models is sum_{u in K} q(u) < 1, not 1 (about 0.9 at top-p 0.8 on a 1.5B
model, TRL issue 6789). TIS/MIS and the mismatch signal compare like with like only when the learner applies the
same truncation: log p~(v) = z_v - logsumexp_{u in K_p} z_u over its own kept set K_p. The sampled token is always
kept on the learner's side, so a kernel-order difference at the nucleus boundary can never give log p~ = -inf.
"""

from __future__ import annotations

import torch


def truncate_logits(
    z: torch.Tensor, top_k: int = 0, top_p: float = 1.0, keep: torch.Tensor | None = None
) -> torch.Tensor:
    """`z` [..., V] (already divided by the temperature) with the tokens outside the top-k, then outside the
    nucleus, set to -inf (transformers' and vLLM's order: top-k, then top-p on what is left).

    top-k keeps the k largest logits (ties at the k-th value kept); top-p keeps the smallest prefix of the sorted
    distribution whose mass reaches `top_p` (the most likely token always). `keep` [...] (token ids), when given,
    is never removed. top_k <= 0 or >= V and top_p >= 1 leave `z` unchanged (the same tensor is returned).
    """
    if not (0 < top_k < z.shape[-1]) and top_p >= 1.0:
        return z
    remove = torch.zeros_like(z, dtype=torch.bool)
    if 0 < top_k < z.shape[-1]:
        kth = torch.topk(z, top_k, dim=-1).values[..., -1:]
        remove |= z < kth
    if top_p < 1.0:
        sorted_z, order = torch.sort(z.masked_fill(remove, float("-inf")), descending=True, dim=-1)
        probs = torch.softmax(sorted_z, -1)
        drop = probs.cumsum(-1) - probs > top_p  # mass before this token already reaches top_p
        drop[..., 0] = False
        remove |= drop.scatter(-1, order, drop)
    if keep is not None:
        remove.scatter_(-1, keep.unsqueeze(-1), False)
    return z.masked_fill(remove, float("-inf"))


def truncates(top_k: int, top_p: float) -> bool:
    """Whether sampling with these settings draws from a truncated distribution."""
    return top_k > 0 or top_p < 1.0
