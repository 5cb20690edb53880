"""grpokit's own sampling loop on any transformers causal LM: each distinct prompt is prefilled once and its
key/value cache expanded to the G samples of its group; finished sequences are dropped from the batch as they
end; generation stops when every sequence has ended. Returns the sampler's own log-probs (after temperature,
top-k and top-p: the distribution actually sampled from)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable

import torch

from ..config.sections import DECODE_MODES
from ..models.cache_arg import cache_arg
from ..models.prefix import decoder_and_head, positions, prefill
from .base import ENGINES, RolloutOutput, SamplingParams, SharedModelEngine, left_pad
from .sampling import draw_step, multinomial_tokens, process_logits, row_uniforms, sample_tokens
from .static_decode import StaticDecoder

__all__ = ["SharedPrefixSampler", "decode_mode", "multinomial_tokens", "process_logits", "sample_tokens"]


def decode_mode(name: str, device: torch.device) -> str:
    """The decode mode `name` resolves to on `device` (auto: graphs on CUDA, eager elsewhere)."""
    if name not in DECODE_MODES:
        modes = "; ".join(f"{k}: {v}" for k, v in DECODE_MODES.items())
        raise ValueError(f"rollout.decode={name!r} is not a decode mode; choose one of {modes}")
    if name == "auto":
        return "graphs" if device.type == "cuda" else "eager"
    if name.startswith("graphs") and device.type != "cuda":
        raise ValueError(f"rollout.decode={name} needs CUDA (the model is on {device.type}); use static or eager")
    return name


def reserved_length(session: object) -> int:
    """The cache positions a run's rollouts can need: its longest prompt (training or held-out) + max_new_tokens."""
    data, rollout = getattr(session, "data", None), getattr(getattr(session, "cfg", None), "rollout", None)
    if data is None or rollout is None:
        return 0
    prompts = [*getattr(data, "train_tokens", []), *getattr(data, "held_out_tokens", [])]
    return max((len(p) for p in prompts), default=0) + int(rollout.max_new_tokens)


@ENGINES.register("hf")
class SharedPrefixSampler(SharedModelEngine):
    """The default engine: shared-prompt prefill, KV cache, early-exit compaction. Shares the learner's model.

    `decode` (`DECODE_MODES`): eager, or a static cache (`static_decode.py`), graphed on CUDA. Tokens are drawn by
    inverse CDF from uniforms drawn once per rollout, one per (step, row), from `generator` (None: torch's default
    stream), so every mode draws the same tokens from the same logits. `draw` replaces that draw in the eager loop
    (`multinomial_tokens`: transformers generate's random stream, for tests)."""

    @classmethod
    def from_session(cls, session: object) -> SharedPrefixSampler:
        decode = getattr(getattr(session.cfg, "rollout", None), "decode", "auto")  # type: ignore[attr-defined]
        engine = cls(session.model, session.tokenizer, autocast=session.autocast, decode=decode)  # type: ignore
        engine.min_len = reserved_length(session)
        return engine

    def __init__(
        self,
        model: torch.nn.Module,
        tokenizer: object,
        *,
        autocast: Callable[[], contextlib.AbstractContextManager] | None = None,
        compact_below: float = 0.75,
        draw: Callable[[torch.Tensor], torch.Tensor] | None = None,
        generator: torch.Generator | None = None,
        decode: str = "eager",
    ) -> None:
        super().__init__(model, tokenizer, autocast=autocast)
        self.compact_below = compact_below
        self.draw = draw
        self.generator = generator
        self.decode = decode_mode(decode, next(model.parameters()).device)
        if draw is not None and self.decode != "eager":
            raise ValueError(f"rollout.decode={self.decode}: a custom draw runs only in the eager loop")
        self.static: StaticDecoder | None = None
        self.min_len = 0  # the cache length a graphed run reserves (from_session: the data's longest + max_new_tokens)

    def sync_weights(self, model: torch.nn.Module) -> None:
        if model is not self.model:
            self.static = None  # its compiled steps belong to the old model object
        super().sync_weights(model)

    def static_decoder(self) -> StaticDecoder:
        if self.static is None:
            decoder, head = decoder_and_head(self.model)
            graphs = {"graphs": "cudagraph", "graphs-inductor": "inductor"}.get(self.decode, False)
            self.static = StaticDecoder(
                decoder, head, self.model.config, autocast=self.autocast, graphs=graphs, min_len=self.min_len
            )
        return self.static

    @torch.no_grad()
    def generate(self, prompts: list[list[int]], params: SamplingParams) -> RolloutOutput:
        t0 = time.perf_counter()
        was_training = self.model.training
        self.model.eval()
        try:
            comp, samp = self._sample(prompts, params)
        finally:
            self.model.train(was_training)
        index = torch.arange(len(prompts)).repeat_interleave(params.n)
        return self.output([p for p in prompts for _ in range(params.n)], index, comp, samp, t0)

    def _sample(self, prompts: list[list[int]], params: SamplingParams) -> tuple[torch.Tensor, torch.Tensor]:
        device = next(self.model.parameters()).device
        decoder, head = decoder_and_head(self.model)
        ids, mask = left_pad(prompts, self.pad_id)
        ids, mask = ids.to(device), mask.to(device)
        with self.autocast():
            cache, h_last = prefill(decoder, ids, mask)
            cache.batch_repeat_interleave(params.n)
            logits = head(h_last).repeat_interleave(params.n, 0)
        attn = mask.repeat_interleave(params.n, 0)
        return self._decode(cache, logits, attn, positions(attn)[:, -1:], params)

    @torch.no_grad()
    def continue_rows(
        self, prompts: list[list[int]], index: list[int], tails: list[list[int]], params: SamplingParams
    ) -> RolloutOutput:
        """One sample (params.n is ignored) continuing each row r = prompts[index[r]] + tails[r]: each distinct
        prompt is prefilled once and its cache shared by its rows, then only the tails are prefilled (multi-turn
        episodes, grpokit/agents/engine.py: the prompt's cache carried across turns). The tails are right-aligned
        after the prompt, the gap masked, positions continuing each row's own prompt; the sampled distribution is
        that of the whole row prefilled at once. Returns the sampled continuations as `generate` does."""
        t0 = time.perf_counter()
        was_training = self.model.training
        self.model.eval()
        try:
            device = next(self.model.parameters()).device
            decoder, head = decoder_and_head(self.model)
            ids, mask = left_pad(prompts, self.pad_id)
            rows = torch.tensor(index, dtype=torch.long)
            width = max(len(t) for t in tails)
            tail_ids = torch.full((len(tails), width), self.pad_id, dtype=torch.long)
            tail_mask = torch.zeros((len(tails), width), dtype=torch.long)
            for r, t in enumerate(tails):
                tail_ids[r, width - len(t) :] = torch.tensor(t, dtype=torch.long)
                tail_mask[r, width - len(t) :] = 1
            attn = torch.cat([mask[rows], tail_mask], 1).to(device)
            with self.autocast():
                cache, _ = prefill(decoder, ids.to(device), mask.to(device))
                cache.batch_select_indices(rows.to(device))
                h = decoder(
                    input_ids=tail_ids.to(device),
                    attention_mask=attn,
                    position_ids=positions(attn)[:, -width:],
                    use_cache=True,
                    **cache_arg(decoder, cache),
                ).last_hidden_state[:, -1]
                logits = head(h)
            comp, samp = self._decode(cache, logits, attn, positions(attn)[:, -1:], params)
        finally:
            self.model.train(was_training)
        full = [prompts[i] + t for i, t in zip(index, tails)]
        return self.output(full, torch.arange(len(tails)), comp, samp, t0)

    def _decode(
        self,
        cache: object,
        logits: torch.Tensor,
        attn: torch.Tensor,
        pos: torch.Tensor,
        params: SamplingParams,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The decode loop from a prefilled `cache` whose last position gave `logits` [N, V]; `attn` [N, L] is the
        attention mask so far and `pos` [N, 1] the last position id of each row."""
        device = logits.device
        eos = torch.tensor(self.eos_ids, device=device)
        uniforms = None  # a custom draw takes its own random numbers
        if self.draw is None:
            uniforms = row_uniforms(params.max_new_tokens, logits.shape[0], device, self.generator)
        if self.decode != "eager":
            prefix = [(layer.keys, layer.values) for layer in cache.layers]  # type: ignore[attr-defined]
            return self.static_decoder().run(prefix, logits, attn, pos, uniforms, params, eos, self.pad_id)
        return self._eager(cache, logits, attn, pos, uniforms, params, eos)

    def _eager(
        self,
        cache: object,
        logits: torch.Tensor,
        attn: torch.Tensor,
        pos: torch.Tensor,
        uniforms: torch.Tensor | None,
        params: SamplingParams,
        eos: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The eager loop: a dynamic cache; finished rows dropped once fewer than `compact_below` still run."""
        decoder, head = decoder_and_head(self.model)
        cache_kw = cache_arg(decoder, cache)
        n_total = logits.shape[0]
        out_ids = torch.full((n_total, params.max_new_tokens), self.pad_id, dtype=torch.long)
        out_lp = torch.zeros((n_total, params.max_new_tokens), dtype=torch.float32)
        rows = torch.arange(n_total, device=logits.device)  # which output row each active batch row writes to
        # rows that have emitted an EOS; they stay in the batch (writing nothing) until compaction drops them
        finished = torch.zeros(n_total, dtype=torch.bool, device=logits.device)
        ban = torch.tensor(False, device=logits.device)
        for t in range(params.max_new_tokens):
            ban.fill_(t < params.min_new_tokens)
            if uniforms is not None:
                u = uniforms[t].index_select(0, rows)
                tok, lp = draw_step(logits, u, ban, eos, params.temperature, params.top_k, params.top_p)
            else:
                z = process_logits(logits, params.temperature, params.top_k, params.top_p)
                if t < params.min_new_tokens:
                    z[:, eos] = float("-inf")
                logp = torch.log_softmax(z, -1)
                tok = self.draw(logp)
                lp = logp.gather(1, tok[:, None]).squeeze(1)
            live = ~finished
            out_ids[rows[live].cpu(), t] = tok[live].cpu()
            out_lp[rows[live].cpu(), t] = lp[live].cpu()
            finished = finished | torch.isin(tok, eos)
            if bool(finished.all()) or t == params.max_new_tokens - 1:
                break
            active = ~finished
            if float(active.float().mean()) < self.compact_below:
                keep = torch.nonzero(active).squeeze(1)
                cache.batch_select_indices(keep)  # type: ignore[attr-defined]
                rows, tok, attn, pos = rows[keep], tok[keep], attn[keep], pos[keep]
                finished = finished[keep]
            attn = torch.cat([attn, torch.ones_like(attn[:, :1])], 1)
            pos = pos + 1
            with self.autocast():
                h = decoder(
                    input_ids=tok[:, None], attention_mask=attn, position_ids=pos, use_cache=True, **cache_kw
                ).last_hidden_state[:, -1]
                logits = head(h)
        return out_ids, out_lp
