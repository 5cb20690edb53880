"""Decode on a static key/value cache: every decode step has the same shapes (rows x one token against a cache of
max_len positions), so on CUDA the step (the model's forward, the head and the draw) is captured as a CUDA graph
and replayed without a host round-trip per token. On CPU the same code runs eagerly (`rollout.decode=static`),
which is what the tests check against the eager loop of `hf.py`.

- `static` (no graphs): rows live in buckets (the batch, then powers of two below it): when the rows still
  running fit a smaller bucket, they move to it (the cache rows copied), so early exit still shrinks the batch.
  A bucket's spare rows write to a scratch output row. That pays on CPU, where a step's cost follows its rows.
- graphed (`graphs`, `graphs-inductor`): one shape per run (`one_shape.py`): the run's rows and a cache length
  fixed per run, finished rows masked, temperature a device tensor, so training and evaluation replay one graph.
  On a GPU a step reads every weight whatever its rows, so smaller buckets buy little and each costs a capture.
- Finished rows are checked every `check_every` tokens, not every token; a row that has ended writes padding.
- The draw (`sampling.draw_step`) happens on the device inside the step, from uniforms drawn once per rollout,
  so for the same seed the tokens are those of the eager loop.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable

import torch
from transformers import DynamicCache, StaticCache

from ..common.safe_text import safe_text
from ..models.cache_arg import cache_kwarg
from .captured_step import CapturedStep
from .one_shape import LENGTH_QUANTUM, decode_one_shape
from .sampling import StepSettings, draw_step

log = logging.getLogger(__name__)


def buckets(n: int) -> list[int]:
    """Row buckets for a batch of n: n itself, then the powers of two below it, largest first."""
    out, b = [n], 1
    while b < n:
        out.append(b)
        b *= 2
    return sorted(set(out), reverse=True)


class DtypeProbe(DynamicCache):
    """A dynamic cache that keeps the first layer's key and value states as the model hands them over (a dynamic
    cache's own storage promotes bf16 values to its fp32 keys' dtype)."""

    first: tuple[torch.Tensor, torch.Tensor]

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, layer_idx: int, *args, **kwargs):
        if layer_idx == 0:
            self.first = (key_states, value_states)
        return super().update(key_states, value_states, layer_idx, *args, **kwargs)


def graph_backend(graphs: bool | str) -> str | None:
    """None (no graphs), `cudagraph` (torch.cuda.CUDAGraph, the default for True), `inductor` (torch.compile
    mode=reduce-overhead) or another torch.compile backend by name (the CPU tests trace with `aot_eager`)."""
    if graphs is True:
        return "cudagraph"
    return graphs or None


class StaticDecoder:
    """The static-cache decode loop for one model. `graphs` (`graph_backend`): capture the step, one shape per run
    (`one_shape.py`); without, caches are kept per (bucket rows, max_len) across rollouts. `min_len`: the cache
    length a graphed run reserves (the data's longest prompt + max_new_tokens), so no later rollout outgrows it."""

    def __init__(
        self,
        decoder: torch.nn.Module,
        head: torch.nn.Module,
        config: object,
        *,
        autocast: Callable[[], contextlib.AbstractContextManager],
        graphs: bool | str = False,
        check_every: int = 8,
        min_len: int = 0,
    ) -> None:
        self.decoder, self.head, self.config = decoder, head, config
        self.cache_name = cache_kwarg(decoder)  # "cache" or "past_key_values", read once (outside any graph)
        self.autocast = autocast
        self.check_every = check_every
        self.caches: dict[tuple[int, int], StaticCache] = {}  # (rows, length)
        self.backend = graph_backend(graphs)
        self.graphs = self.backend is not None
        self.shape: tuple[int, int] | None = None  # graphed: (rows, cache length), fixed at the first rollout
        self.min_len = min_len
        self.temperature: torch.Tensor | None = None  # graphed: the step's temperature, filled in place
        self.step_calls, self.warned_no_graph = 0, False
        self.step = self._step
        if self.backend == "cudagraph":
            self.step = CapturedStep(self._step)
        elif self.backend == "inductor":
            self.step = torch.compile(self._step, mode="reduce-overhead", dynamic=False)
        elif self.backend is not None:
            self.step = torch.compile(self._step, backend=self.backend, dynamic=False)
        self.graphs_before = recorded_graphs(self.step)

    def _step(
        self,
        cache: StaticCache,
        tok: torch.Tensor,
        attn: torch.Tensor,
        pos: torch.Tensor,
        u: torch.Tensor,
        ban_eos: torch.Tensor,
        s: StepSettings,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Feed `tok` [b, 1] at positions `pos` [b, 1] (mask `attn` [b, max_len]); draw the next token."""
        with self.autocast():
            h = self.decoder(
                input_ids=tok, attention_mask=attn, position_ids=pos, use_cache=True, **{self.cache_name: cache}
            ).last_hidden_state[:, -1]
            logits = self.head(h)
        return draw_step(logits, u, ban_eos, s.eos, s.temperature, s.top_k, s.top_p)

    def cache(self, rows: int, max_len: int, device: torch.device) -> StaticCache:
        """The bucket's cache, allocated once per shape, its keys and values in the dtypes a step writes, seen by
        one probe step (under autocast the values are bf16 while the rotary-embedded keys stay fp32; transformers'
        own lazy allocation gives both the keys' dtype). A prefix is cast as it is loaded."""
        key = (rows, max_len)
        if key not in self.caches:
            probe, seen = torch.zeros((1, 1), dtype=torch.long, device=device), DtypeProbe()
            with self.autocast():
                self.decoder(input_ids=probe, position_ids=probe, use_cache=True, **{self.cache_name: seen})
            c = StaticCache(config=self.config, max_cache_len=max_len)
            k, v = seen.first
            c.early_initialization(rows, k.shape[1], k.shape[3], k.dtype, device)
            for layer in c.layers:
                if layer.values.dtype != v.dtype:
                    layer.values = layer.values.to(v.dtype)
                    torch._dynamo.mark_static_address(layer.values)  # as transformers marks its own buffers
            self.caches[key] = c
        return self.caches[key]

    def load(self, dst: StaticCache, src_layers: list[tuple[torch.Tensor, torch.Tensor]], length: int) -> None:
        """dst's rows := src's keys/values (each [b, H, length or more, D]) over the first `length` positions."""
        for layer, (k, v) in zip(dst.layers, src_layers, strict=True):
            layer.keys.zero_()
            layer.values.zero_()
            layer.keys[: k.shape[0], :, :length].copy_(k[:, :, :length])
            layer.values[: v.shape[0], :, :length].copy_(v[:, :, :length])
            layer.cumulative_length.fill_(length)

    def call_step(self, length: int, cache: StaticCache, *args: object) -> tuple[torch.Tensor, torch.Tensor]:
        """One step; graphed, a copy of its outputs (a replay overwrites the previous replay's). Where capture
        fails, the run goes on without graphs, said once, the cache put back at `length` positions first."""
        if not self.graphs:
            return self.step(cache, *args)
        if self.backend == "inductor":
            torch.compiler.cudagraph_mark_step_begin()
        try:
            new, lp = self.step(cache, *args)
            self.after_graphed_call()
        except Exception as e:  # noqa: BLE001  (torch.compile and graph capture raise many kinds)
            log.warning(
                "grpokit: rollout.decode=graphs could not capture the decode step (%s); decoding on without graphs, "
                "as rollout.decode=static does",
                safe_text(f"{type(e).__name__}: {e}", limit=300),
            )
            self.graphs, self.step = False, self._step
            for layer in cache.layers:
                layer.cumulative_length.fill_(length)
            return self._step(cache, *args)
        return new.clone(), lp.clone()

    def after_graphed_call(self) -> None:
        """Warn once when the step has recorded no graph after three calls, or inductor declined its CUDA graphs:
        neither raises, and both leave every token on the slow path."""
        self.step_calls += 1
        if self.warned_no_graph or self.step_calls < 3:
            return
        recorded = recorded_graphs(self.step) - self.graphs_before
        skips = dynamo_counts()[1] if self.backend == "inductor" else 0
        if recorded == 0 or skips:
            self.warned_no_graph = True
            log.warning(
                "grpokit: rollout.decode=graphs recorded %d graph(s) in %d decode steps (cudagraph skips: %d); "
                "the step runs without a graph. Run with TORCH_LOGS=recompiles,perf_hints to see why",
                recorded,
                self.step_calls,
                skips,
            )

    def move(self, src: StaticCache, rows: int, max_len: int, sel: torch.Tensor) -> StaticCache:
        """The bucket cache of `rows` rows holding src's rows `sel` [rows]."""
        dst = self.cache(rows, max_len, src.layers[0].keys.device)
        for d, s in zip(dst.layers, src.layers, strict=True):
            d.keys.copy_(s.keys.index_select(0, sel))
            d.values.copy_(s.values.index_select(0, sel))
            d.cumulative_length.copy_(s.cumulative_length)
        return dst

    def run(
        self,
        prefix: list[tuple[torch.Tensor, torch.Tensor]],
        logits: torch.Tensor,
        attn: torch.Tensor,
        pos: torch.Tensor,
        uniforms: torch.Tensor,
        params: object,
        eos: torch.Tensor,
        pad_id: int,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Sample params.max_new_tokens tokens after a prefill: `prefix` the prompt's keys/values per layer [N, H,
        L0, D], `logits` [N, V] at its last position, `attn` [N, L0] its mask, `pos` [N, 1] its last position ids,
        `uniforms` [T, N, 1] (`sampling.row_uniforms`). Returns (ids [N, T], log-probs [N, T]) on the CPU, padding
        and 0 after each row's EOS, as the eager loop of `hf.py` writes them."""
        if self.graphs:
            return decode_one_shape(self, prefix, logits, attn, pos, uniforms, params, eos, pad_id)
        n, width = attn.shape
        steps, device = params.max_new_tokens, logits.device
        max_len = -(-(width + steps) // LENGTH_QUANTUM) * LENGTH_QUANTUM  # few distinct shapes, few captures
        s = StepSettings(eos, params.temperature, params.top_k, params.top_p)
        out_ids = torch.full((n + 1, steps), pad_id, dtype=torch.long, device=device)  # row n: spare rows' scratch
        out_lp = torch.zeros((n + 1, steps), dtype=torch.float32, device=device)
        ban = torch.tensor(params.min_new_tokens > 0, device=device)
        tok, lp = draw_step(logits, uniforms[0], ban, eos, s.temperature, s.top_k, s.top_p)
        out_ids[:n, 0], out_lp[:n, 0] = tok, lp
        finished = torch.isin(tok, eos)
        cache = self.cache(n, max_len, device)
        if any(getattr(layer, "is_sliding", False) for layer in cache.layers):
            raise ValueError("rollout.decode=static: the model has sliding-window layers; set rollout.decode=eager")
        self.load(cache, prefix, width)
        mask = torch.zeros((n, max_len), dtype=attn.dtype, device=device)
        mask[:, :width] = attn
        rows, pos, sizes = torch.arange(n, device=device), pos.clone(), buckets(n)
        for t in range(1, steps):
            if t % self.check_every == 0:
                live = int((~finished).sum())
                if live == 0:
                    break
                fit = min(b for b in sizes if b >= live)
                if fit < rows.shape[0]:
                    keep = torch.nonzero(~finished).squeeze(1)
                    sel = torch.cat([keep, keep[:1].expand(fit - live)])
                    cache = self.move(cache, fit, max_len, sel)
                    rows = torch.cat([rows[keep], torch.full((fit - live,), n, device=device)])
                    finished = torch.arange(fit, device=device) >= live
                    tok, mask, pos = tok[sel], mask[sel], pos[sel]
            mask[:, width + t - 1] = 1
            pos = pos + 1
            ban.fill_(t < params.min_new_tokens)
            u = uniforms[t].index_select(0, rows.clamp(max=n - 1))
            new, lp = self.call_step(width + t - 1, cache, tok[:, None], mask, pos, u, ban, s)
            out_ids[rows, t] = torch.where(finished, pad_id, new)
            out_lp[rows, t] = torch.where(finished, 0.0, lp)
            finished = finished | torch.isin(new, eos)
            tok = new
        return out_ids[:n].cpu(), out_lp[:n].cpu()


def dynamo_counts() -> tuple[int, int]:
    """(Dynamo's unique graphs, inductor's cudagraph skips) so far in this process."""
    from torch._dynamo.utils import counters

    return counters["stats"]["unique_graphs"], counters["inductor"]["cudagraph_skips"]


def recorded_graphs(step: object) -> int:
    """Graphs recorded so far: a CapturedStep's own count, else Dynamo's (compared before and after by the caller)."""
    return step.graphs if isinstance(step, CapturedStep) else dynamo_counts()[0]
