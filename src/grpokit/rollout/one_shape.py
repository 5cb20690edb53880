"""The graphed decode's one shape per run (`rollout.decode=graphs`): every rollout of a run, training and
evaluation alike, replays one captured step (../shared/reviews/gpu-decode-review.md, item 1).

- Rows: the run's row count R is the first rollout's; a rollout of N rows runs in ceil(N / R) chunks of R rows,
  the last one filled with copies of its first row whose outputs are dropped. Finished rows are masked (they
  write padding), not moved, and the loop stops once every row has ended (checked every `check_every` tokens).
- Cache length: fixed per run, the largest of the decoder's `min_len` (the data's longest prompt +
  max_new_tokens, rounded up to LENGTH_QUANTUM) and the first rollout's need; a rollout that needs more grows it
  once, said in one line (a new capture).
- Temperature: a 0-d device tensor filled in place (`StaticDecoder.temperature`), so an evaluation at another
  temperature replays the same graph. top-k and top-p stay fixed settings of the step.

Each row reads its own uniforms (`sampling.row_uniforms`), so the tokens are those of the eager loop and of
`rollout.decode=static` for the same seed.
"""

from __future__ import annotations

import logging
from typing import Protocol

import torch

from .captured_step import CapturedStep
from .sampling import StepSettings, draw_step

log = logging.getLogger(__name__)

LENGTH_QUANTUM = 128  # cache lengths are rounded up to a multiple of this, so prompts of any width share graphs


class GraphedDecoder(Protocol):
    """What the one-shape loop reads and sets of `static_decode.StaticDecoder`."""

    shape: tuple[int, int] | None
    min_len: int
    check_every: int
    temperature: torch.Tensor | None
    step: object

    def cache(self, rows: int, max_len: int, device: torch.device) -> object: ...

    def load(self, dst: object, src_layers: list[tuple[torch.Tensor, torch.Tensor]], length: int) -> None: ...

    def call_step(self, length: int, cache: object, *args: object) -> tuple[torch.Tensor, torch.Tensor]: ...


def run_shape(dec: GraphedDecoder, rows: int, need: int) -> tuple[int, int]:
    """(rows, cache length) of the run: fixed at the first rollout, the length grown once where `need` exceeds it."""
    length = -(-max(need, dec.min_len) // LENGTH_QUANTUM) * LENGTH_QUANTUM
    if dec.shape is None:
        dec.shape = (rows, length)
    elif need > dec.shape[1]:
        log.info(
            "grpokit: rollout.decode=graphs: a rollout needs %d cache positions, more than the run's %d; the step is "
            "captured again at %d",
            need,
            dec.shape[1],
            length,
        )
        dec.shape = (dec.shape[0], length)
        if isinstance(dec.step, CapturedStep):  # its graph holds the old cache's addresses
            dec.step = CapturedStep(dec.step.fn)
    return dec.shape


def decode_one_shape(
    dec: GraphedDecoder,
    prefix: list[tuple[torch.Tensor, torch.Tensor]],
    logits: torch.Tensor,
    attn: torch.Tensor,
    pos: torch.Tensor,
    uniforms: torch.Tensor,
    params: object,
    eos: torch.Tensor,
    pad_id: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """`StaticDecoder.run`'s contract (ids [N, T], log-probs [N, T] on the CPU) in chunks of the run's rows."""
    n, width = attn.shape
    rows, max_len = run_shape(dec, n, width + params.max_new_tokens)
    if dec.temperature is None:
        dec.temperature = torch.ones((), dtype=torch.float32, device=logits.device)
    dec.temperature.fill_(params.temperature)
    ids, lps = [], []
    for c0 in range(0, n, rows):
        real = torch.arange(c0, min(c0 + rows, n), device=logits.device)
        sel = torch.cat([real, real[:1].expand(rows - len(real))])
        chunk = [(k.index_select(0, sel), v.index_select(0, sel)) for k, v in prefix]
        out = decode_chunk(dec, chunk, logits[sel], attn[sel], pos[sel], uniforms[:, sel], params, eos, pad_id, max_len)
        ids.append(out[0][: len(real)])
        lps.append(out[1][: len(real)])
    return torch.cat(ids).cpu(), torch.cat(lps).cpu()


def decode_chunk(
    dec: GraphedDecoder,
    prefix: list[tuple[torch.Tensor, torch.Tensor]],
    logits: torch.Tensor,
    attn: torch.Tensor,
    pos: torch.Tensor,
    uniforms: torch.Tensor,
    params: object,
    eos: torch.Tensor,
    pad_id: int,
    max_len: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One chunk of the run's rows on the run's cache: the loop of `StaticDecoder.run` without buckets."""
    rows, width = attn.shape
    steps, device = params.max_new_tokens, logits.device
    s = StepSettings(eos, dec.temperature, params.top_k, params.top_p)
    out_ids = torch.full((rows, steps), pad_id, dtype=torch.long, device=device)
    out_lp = torch.zeros((rows, steps), dtype=torch.float32, device=device)
    ban = torch.tensor(params.min_new_tokens > 0, device=device)
    tok, lp = draw_step(logits, uniforms[0], ban, eos, s.temperature, s.top_k, s.top_p)
    out_ids[:, 0], out_lp[:, 0] = tok, lp
    finished = torch.isin(tok, eos)
    cache = dec.cache(rows, max_len, device)
    if any(getattr(layer, "is_sliding", False) for layer in cache.layers):
        raise ValueError("rollout.decode=graphs: the model has sliding-window layers; set rollout.decode=eager")
    dec.load(cache, prefix, width)
    mask = torch.zeros((rows, max_len), dtype=attn.dtype, device=device)
    mask[:, :width] = attn
    for t in range(1, steps):
        if t % dec.check_every == 0 and bool(finished.all()):
            break
        mask[:, width + t - 1] = 1
        pos = pos + 1
        ban.fill_(t < params.min_new_tokens)
        new, lp = dec.call_step(width + t - 1, cache, tok[:, None], mask, pos, uniforms[t], ban, s)
        out_ids[:, t] = torch.where(finished, pad_id, new)
        out_lp[:, t] = torch.where(finished, 0.0, lp)
        finished = finished | torch.isin(new, eos)
        tok = new
    return out_ids, out_lp
