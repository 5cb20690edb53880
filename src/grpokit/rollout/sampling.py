"""One decode step's draw, shared by the eager and the static-cache decode loops (`hf.py`, `static_decode.py`):
temperature, top-k, top-p, EOS banned before `min_new_tokens`, then one token per row by inverse CDF from a
uniform given in advance, with the log-prob of the token under the distribution actually drawn from
(docs/math.md §10: the sampler's log q~ that TIS/MIS and the mismatch signal compare with the learner's).

The uniforms of a rollout are drawn once, one per (step, row) of the whole batch (`row_uniforms`), and each row
reads its own: a row's tokens do not depend on which other rows are still in the batch, so compaction (eager) and
row buckets (static) draw the same tokens from the same logits.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..algos.truncation import truncate_logits


def process_logits(logits: torch.Tensor, temperature: float, top_k: int, top_p: float) -> torch.Tensor:
    """Temperature, then top-k, then top-p (nucleus) filtering, as transformers' logits warpers order them; the
    learner applies the same truncation to its log-probs (`grpokit.algos.truncation`)."""
    return truncate_logits(logits.float() / temperature, top_k, top_p)


def inverse_cdf(logp: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """One token per row of exp(logp) [B, V]: the first index whose float64 running sum reaches u * total, for
    u [B, 1] uniform on (0, 1]; a token of probability 0 is never drawn."""
    c = logp.double().exp().cumsum(-1)
    return torch.searchsorted(c, u * c[:, -1:]).squeeze(1).clamp_(max=logp.shape[1] - 1)


def sample_tokens(logp: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """One token per row drawn from exp(logp) [B, V] by inverse CDF (`inverse_cdf`) with fresh uniforms.

    Same distribution as `torch.multinomial(logp.exp(), 1)`, which on CPU draws V random numbers per row
    (54 ms per decode step for [32, 49152] on a 2-core Xeon against 2.2 ms here: ~2.5 s of a 48-token rollout).
    Its draws match the distribution (tests/rollout/test_rollout.py). `generator`: a random stream of its own;
    None: torch's default one.
    """
    u = 1.0 - torch.rand(logp.shape[0], 1, dtype=torch.float64, device=logp.device, generator=generator)
    return inverse_cdf(logp, u)


def multinomial_tokens(logp: torch.Tensor) -> torch.Tensor:
    """`torch.multinomial`'s draw: the same random stream as transformers `generate` (tests compare the two)."""
    return torch.multinomial(logp.exp(), 1).squeeze(1)


def row_uniforms(steps: int, rows: int, device: torch.device, generator: torch.Generator | None = None) -> torch.Tensor:
    """[steps, rows, 1] uniforms on (0, 1], drawn at once: step t of output row r reads [t, r]."""
    return 1.0 - torch.rand(steps, rows, 1, dtype=torch.float64, device=device, generator=generator)


def draw_step(
    logits: torch.Tensor,
    u: torch.Tensor,
    ban_eos: torch.Tensor,
    eos: torch.Tensor,
    temperature: float,
    top_k: int,
    top_p: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(tokens [B], their log-probs [B]) drawn from `logits` [B, V] with uniforms `u` [B, 1]; `ban_eos` a 0-d bool
    tensor (step < min_new_tokens) sets the EOS ids `eos` to -inf before the softmax. No host synchronisation, so
    the step can be captured in a CUDA graph."""
    z = process_logits(logits, temperature, top_k, top_p)
    z[:, eos] = torch.where(ban_eos, torch.full_like(z[:, eos], float("-inf")), z[:, eos])
    logp = torch.log_softmax(z, -1)
    tok = inverse_cdf(logp, u)
    return tok, logp.gather(1, tok[:, None]).squeeze(1)


@dataclass(frozen=True)
class StepSettings:
    """What a step draws with: the EOS ids (on the device) and the sampling settings. Graphed, the temperature is a
    0-d device tensor filled in place, so an evaluation at another temperature replays the same graph."""

    eos: torch.Tensor
    temperature: float | torch.Tensor
    top_k: int
    top_p: float
