"""Loss aggregation with explicit global denominators (docs/math.md §1.5).

`aggregate(loss, mask, mode, **denominators)`: when the denominators are omitted they are computed from this
batch; pass the *mini-batch-global* values (summed over micro-batches and data-parallel ranks, see
`denominators`) so that gradient accumulation never changes the gradient (§1.5 rule 2). An empty denominator
gives loss 0 and zero gradient, never NaN (rule 1).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .masked import masked_sum
from .registry import AGGREGATIONS


@dataclass
class Denominators:
    """Global denominators of one optimizer mini-batch: valid tokens, non-empty sequences, all sequences."""

    tokens: float
    nonempty_seqs: float
    seqs: float

    @classmethod
    def from_mask(cls, mask: torch.Tensor) -> Denominators:
        return cls(float(mask.sum()), float((mask.sum(1) > 0).sum()), float(mask.shape[0]))

    def __add__(self, other: Denominators) -> Denominators:
        return Denominators(
            self.tokens + other.tokens, self.nonempty_seqs + other.nonempty_seqs, self.seqs + other.seqs
        )

    def __radd__(self, other: int | Denominators) -> Denominators:
        """`0 + d` is `d`, so `sum(Denominators.from_mask(m) for m in micro_masks)` adds micro-batches up."""
        if isinstance(other, int) and other == 0:
            return self
        if isinstance(other, Denominators):
            return other + self
        return NotImplemented


def _safe_div(num: torch.Tensor, den: float) -> torch.Tensor:
    return num / den if den > 0 else num * 0.0


@AGGREGATIONS.register("token-mean")
def token_mean(loss: torch.Tensor, mask: torch.Tensor, *, denominators: Denominators | None = None) -> torch.Tensor:
    """sum_{i,t} m l / sum_{i,t} m over the mini-batch (DAPO, CISPO, VAPO, GPG; §1.5)."""
    den = denominators.tokens if denominators else float(mask.sum())
    return _safe_div(masked_sum(loss, mask), den)


@AGGREGATIONS.register("seq-mean-token-mean")
def seq_mean_token_mean(
    loss: torch.Tensor, mask: torch.Tensor, *, denominators: Denominators | None = None
) -> torch.Tensor:
    """(1/|B+|) sum_{i in B+} (1/L_i) sum_t m l  (original GRPO, GSPO, GMPO; fully-masked rows excluded, §1.5)."""
    length = mask.sum(1)
    per_seq = masked_sum(loss, mask, dim=1) / length.clamp(min=1)
    den = denominators.nonempty_seqs if denominators else float((length > 0).sum())
    return _safe_div(per_seq.sum(), den)


@AGGREGATIONS.register("seq-mean-token-sum")
def seq_mean_token_sum(
    loss: torch.Tensor, mask: torch.Tensor, *, denominators: Denominators | None = None
) -> torch.Tensor:
    """(1/|B+|) sum_{i in B+} sum_t m l (§1.5)."""
    den = denominators.nonempty_seqs if denominators else float((mask.sum(1) > 0).sum())
    return _safe_div(masked_sum(loss, mask), den)


@AGGREGATIONS.register("constant-norm")
def constant_norm(
    loss: torch.Tensor, mask: torch.Tensor, *, denominators: Denominators | None = None, l_norm: float
) -> torch.Tensor:
    """Dr. GRPO: sum_{i,t} m l / (|B| L_norm), |B| counting ALL sequences, L_norm a fixed constant (§4).

    `l_norm` is required (no paper default: the paper uses its generate_max_length, 3000); a recipe resolved by
    `grpokit.config` fills it with rollout.max_new_tokens when unset."""
    if not l_norm or l_norm <= 0:
        raise ValueError(
            f"constant-norm aggregation needs a positive fixed l_norm (got {l_norm!r}); "
            "set algo.l_norm to the generation cap (max_new_tokens)"
        )
    den = denominators.seqs if denominators else float(mask.shape[0])
    return _safe_div(masked_sum(loss, mask), den * l_norm)


def aggregate(
    loss: torch.Tensor,
    mask: torch.Tensor,
    mode: str = "token-mean",
    *,
    denominators: Denominators | None = None,
    l_norm: float | None = None,
) -> torch.Tensor:
    """Aggregate per-token losses [N,T] into a scalar with `mode` (§1.5), using global `denominators` if given.
    `l_norm` reaches the modes that declare it (constant-norm, §4) and is ignored by the others."""
    fn = AGGREGATIONS.get(mode)
    kw = {"l_norm": l_norm} if "l_norm" in AGGREGATIONS.params(mode) else {}
    return fn(loss, mask, denominators=denominators, **kw)
