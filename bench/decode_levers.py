"""Decode-step levers, each measured on and off in the same process: which of them brings the sampler's decode step
closer to its floor (bench/floor.py) while keeping the sampled distribution exact. A benchmark, not a test.

    flock /tmp/torch.lock .venv/bin/python bench/decode_levers.py      # base,static,manual,fused,gqa,eager_attn,bf16
    flock /tmp/torch.lock .venv/bin/python bench/decode_levers.py --variants base,static,static_compile
    flock /tmp/torch.lock .venv/bin/python bench/decode_levers.py --variants batch

Configuration (the race configuration of bench/step_throughput.py): SmolLM2-135M-Instruct in fp32, `--prompts` (4)
distinct add1 prompts through the chat template, `--samples` (8) samples each = 32 rows, `--new-tokens` (48) new
tokens forced (min_new_tokens = max_new_tokens: EOS never ends a row, so no row leaves the batch), temperature 1,
torch's default threads. Variants (`--variants`, comma-separated):

* base: grpokit's `SharedPrefixSampler` (rollout/hf.py) as the trainer builds it: prefill each distinct prompt
  once into a `DynamicCache`, expand it to n rows, one decoder call per token (the cache under the keyword
  `cache_arg` names, the 2-D mask grown by one column, transformers building the 4-D mask each call), LM head,
  inverse-CDF draw.
* static: the same loop (below, `StepSampler`) on a transformers `StaticCache` preallocated for P + T positions
  (P the padded prompt width; the prefilled dynamic cache copied in once), the 4-D boolean mask [N, 1, 1, P + T]
  kept by the loop and updated in place (transformers returns a 4-D mask as is), eager.
* static_compile: static, with the one-token decode step (decoder + LM head) under
  `torch.compile(dynamic=False, fullgraph=True)` (fullgraph=False if that fails); `--compile-mode` picks the mode.
  Compile seconds = warm-up generate seconds - the fastest measured generate's seconds; capped by
  `--compile-cap` seconds.
* manual: fewer ops per token, part 1: the decode step written out (embedding, rotary, per layer: RMSNorm, q/k/v,
  rotary, cache update, transformers' sdpa attention function, o, RMSNorm, gate/up/SiLU/down; final norm, head)
  on the same DynamicCache and a 4-D mask: the per-call work of transformers' module and mask machinery removed.
* fused: manual with q/k/v fused into one matmul ([H d + 2 KV d, D], the weights concatenated once) and gate/up
  into one ([2 I, D]); the rest as manual.
* gqa: manual with `scaled_dot_product_attention(enable_gqa=True)` instead of transformers' path, which repeats
  the KV heads H / KV times (a copy of the whole cache per layer per step) whenever a padding mask is given.
  The add1 prompts all have 44 tokens: base's mask is then all ones, transformers passes none and SDPA already
  runs with enable_gqa; the loop's own variants (manual, fused, static*) always pass a mask, so they repeat the KV
  heads unless gqa is on.
* best: static + fused + gqa + compile (run it apart: it compiles); best_nofuse: the same without the fusion.
* eager_attn: base with `model.set_attn_implementation("eager")` (the default is what the model loads with: on
  CPU `sdpa_gqa`, grpokit's kept form of the gqa lever (models/attention.py); on add1's unpadded prompts it
  computes exactly what transformers' `sdpa` does, the tables in docs/benchmarks.md were measured with `sdpa`).
* bf16: base on a bfloat16 copy of the weights, `--bf16-tokens` (8) steps, one run (this CPU has bf16 arithmetic
  only if /proc/cpuinfo lists avx512_bf16 or amx_bf16; otherwise this shows the cost of emulated bf16).
* batch: base at `--batch-rows` rows (prompts = rows / samples), a separate table.

Per variant: a warm-up generate, then `--rounds` rounds, variants alternating within each round (same-run ratios).
Every generate starts from `torch.manual_seed(--seed)`. The draw (inverse CDF, grpokit's `sample_tokens`) is
wrapped to time-stamp each step:

  ms per decode step = median over t of (time of draw t+1 - time of draw t)   (one decoder call + head + sampling)
  tokens/s           = rows / (ms per decode step / 1000)
  generate s         = median wall seconds of `generate` (prefill + T - 1 decode steps + T draws)

Exactness, against the reference (base's warm-up generate, seed `--seed`): even rounds feed the reference's drawn
tokens (teacher forcing) and record max |logp - logp_ref| over the first `--exact-steps` steps' log-probabilities
(log-softmax of the logits after temperature: the logits up to a per-row constant) and the share of rows whose
argmax agrees; odd rounds draw freely from the same seed and count the drawn tokens equal to the reference's.
"""

from __future__ import annotations

import argparse
import copy
import os
import signal
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402  (after HF_HUB_OFFLINE)
import torch.nn.functional as F  # noqa: E402

from grpokit.data.arithmetic import ADD1  # noqa: E402
from grpokit.data.chat import render_prompt  # noqa: E402
from grpokit.models.cache_arg import cache_arg  # noqa: E402
from grpokit.models.prefix import decoder_and_head, positions, prefill  # noqa: E402
from grpokit.rollout.base import SamplingParams, left_pad  # noqa: E402
from grpokit.rollout.hf import SharedPrefixSampler, process_logits, sample_tokens  # noqa: E402

Step = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, Any], torch.Tensor]


class Recorder:
    """The sampler's `draw`: grpokit's inverse-CDF draw, time-stamped; keeps the first `keep` steps' log-probs and
    every drawn token. With `forced` [N, T] it returns those tokens instead (after drawing, so the work is equal)."""

    def __init__(self, forced: torch.Tensor | None, keep: int) -> None:
        self.forced, self.keep = forced, keep
        self.times: list[float] = []
        self.logps: list[torch.Tensor] = []
        self.tokens: list[torch.Tensor] = []

    def __call__(self, logp: torch.Tensor) -> torch.Tensor:
        self.times.append(time.perf_counter())
        t = len(self.times) - 1
        tok = sample_tokens(logp)
        if self.forced is not None:
            tok = self.forced[:, t].to(tok.device).contiguous()  # a column view would make a compiled step recompile
        if t < self.keep:
            self.logps.append(logp.detach().float().clone())
        self.tokens.append(tok.clone())
        return tok

    def step_ms(self) -> float:
        d = [b - a for a, b in zip(self.times, self.times[1:])]
        return 1000 * statistics.median(d) if d else float("nan")


def hf_step(model: torch.nn.Module) -> Step:
    """One decoder call + LM head through transformers' modules (the mask passed as given)."""
    decoder, head = decoder_and_head(model)

    def step(tok: torch.Tensor, pos: torch.Tensor, mask: torch.Tensor, cache: Any) -> torch.Tensor:
        out = decoder(input_ids=tok, attention_mask=mask, position_ids=pos, use_cache=True, **cache_arg(decoder, cache))
        return head(out.last_hidden_state[:, -1])

    return step


def manual_step(model: torch.nn.Module, fused: bool, gqa: bool) -> Step:
    """The Llama decode step written out; `fused`: q/k/v and gate/up each one matmul (weights concatenated here,
    once); `gqa`: SDPA with enable_gqa instead of transformers' attention function (which repeats the KV heads)."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    decoder, head = decoder_and_head(model)
    layers = list(decoder.layers)
    cfg = model.config
    a0 = layers[0].self_attn
    n_h, n_kv, d = cfg.num_attention_heads, cfg.num_key_value_heads, a0.head_dim
    sizes = [n_h * d, n_kv * d, n_kv * d]
    w_qkv: list[torch.Tensor] = []
    w_gu: list[torch.Tensor] = []
    if fused:
        with torch.no_grad():
            for x in layers:
                at, mlp = x.self_attn, x.mlp
                w_qkv.append(torch.cat([at.q_proj.weight, at.k_proj.weight, at.v_proj.weight]))
                w_gu.append(torch.cat([mlp.gate_proj.weight, mlp.up_proj.weight]))

    def step(tok: torch.Tensor, pos: torch.Tensor, mask: torch.Tensor, cache: Any) -> torch.Tensor:
        x = decoder.embed_tokens(tok)
        cos, sin = decoder.rotary_emb(x, position_ids=pos)
        n = x.shape[0]
        for i, layer in enumerate(layers):
            at, mlp = layer.self_attn, layer.mlp
            h = layer.input_layernorm(x)
            if fused:
                q, k, v = F.linear(h, w_qkv[i]).split(sizes, -1)
            else:
                q, k, v = at.q_proj(h), at.k_proj(h), at.v_proj(h)
            q = q.reshape(n, 1, n_h, d).transpose(1, 2)
            k = k.reshape(n, 1, n_kv, d).transpose(1, 2)
            v = v.reshape(n, 1, n_kv, d).transpose(1, 2)
            q, k = apply_rotary_pos_emb(q, k, cos, sin)
            k, v = cache.update(k, v, i)
            if gqa:
                o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=at.scaling, enable_gqa=True)
                o = o.transpose(1, 2)
            else:
                o, _ = sdpa_attention_forward(at, q, k, v, mask, dropout=0.0, scaling=at.scaling)
            x = x + at.o_proj(o.reshape(n, 1, n_h * d))
            h = layer.post_attention_layernorm(x)
            if fused:
                g, u = F.linear(h, w_gu[i]).chunk(2, -1)
            else:
                g, u = mlp.gate_proj(h), mlp.up_proj(h)
            x = x + mlp.down_proj(mlp.act_fn(g) * u)
        return head(decoder.norm(x)[:, -1])

    return step


class StepSampler(SharedPrefixSampler):
    """SharedPrefixSampler's prefill and decode loop (no compaction: the benchmark forces every row to full length)
    with a given one-token `step` and a dynamic or static cache; the mask is kept by the loop as [N, 1, 1, S] bool."""

    def __init__(self, model: torch.nn.Module, tokenizer: object, step: Step, static: bool) -> None:
        super().__init__(model, tokenizer)
        self.step, self.static = step, static
        self._caches: dict[tuple[int, int], Any] = {}

    def _static_cache(self, dyn: Any, n: int, total: int, width: int) -> Any:
        """A StaticCache for n rows x `total` positions (kept across generates: the compiled step sees the same
        tensors), holding the prefilled `dyn` in its first `width` positions."""
        from transformers import StaticCache

        cfg = self.model.config
        cache = self._caches.get((n, total))
        if cache is None:
            cache = StaticCache(config=cfg, max_cache_len=total)
            k0 = dyn.layers[0].keys
            cache.early_initialization(n, k0.shape[1], k0.shape[3], k0.dtype, k0.device)
            self._caches[(n, total)] = cache
        for s, dl in zip(cache.layers, dyn.layers):
            s.keys.zero_()
            s.values.zero_()
            s.keys[:, :, :width].copy_(dl.keys)
            s.values[:, :, :width].copy_(dl.values)
            s.cumulative_length.fill_(width)
        return cache

    def _sample(self, prompts: list[list[int]], params: SamplingParams) -> tuple[torch.Tensor, torch.Tensor]:
        decoder, head = decoder_and_head(self.model)
        ids, mask = left_pad(prompts, self.pad_id)
        cache, h_last = prefill(decoder, ids, mask)
        cache.batch_repeat_interleave(params.n)
        logits = head(h_last).repeat_interleave(params.n, 0)
        attn = mask.repeat_interleave(params.n, 0)
        n, width = attn.shape
        total = width + params.max_new_tokens
        if self.static:
            cache = self._static_cache(cache, n, total, width)
            kv = torch.zeros(n, 1, 1, total, dtype=torch.bool)
            kv[:, 0, 0, :width] = attn.bool()
        else:
            kv = attn.bool()[:, None, None, :]
        pos = positions(attn)[:, -1:]
        out_ids = torch.full((n, params.max_new_tokens), self.pad_id, dtype=torch.long)
        out_lp = torch.zeros((n, params.max_new_tokens), dtype=torch.float32)
        eos = torch.tensor(self.eos_ids)
        finished = torch.zeros(n, dtype=torch.bool)
        for t in range(params.max_new_tokens):
            z = process_logits(logits, params.temperature, params.top_k, params.top_p)
            if t < params.min_new_tokens:
                z[:, eos] = float("-inf")
            logp = torch.log_softmax(z, -1)
            tok = self.draw(logp)
            out_ids[:, t] = tok
            out_lp[:, t] = logp.gather(1, tok[:, None]).squeeze(1)
            finished = finished | torch.isin(tok, eos)
            if bool(finished.all()) or t == params.max_new_tokens - 1:
                break
            if self.static:
                kv[:, :, :, width + t] = True
            else:
                kv = torch.cat([kv, torch.ones_like(kv[..., :1])], -1)
            pos = pos + 1
            logits = self.step(tok[:, None], pos, kv, cache)
        return out_ids, out_lp


def add1_prompts(tokenizer: Any, k: int) -> list[list[int]]:
    """k distinct add1 train prompts, rendered with the chat template as the trainer does (no system prompt)."""
    exs = ADD1.examples("train", n=k, seed=0)
    return [tokenizer(render_prompt(tokenizer, ex), add_special_tokens=False)["input_ids"] for ex in exs]


class Bench:
    """The model, its samplers by variant, the reference run and every measured run."""

    def __init__(self, args: argparse.Namespace) -> None:
        from grpokit.models.loading import load_model_and_tokenizer

        self.args = args
        self.model, self.tok = load_model_and_tokenizer(args.model, dtype="float32")
        self.model.eval()
        self.default_attn = self.model.config._attn_implementation
        self.prompts = add1_prompts(self.tok, max([args.prompts, *[r // args.samples for r in args.batch_rows]]))
        self.samplers: dict[str, SharedPrefixSampler] = {}
        self.runs: dict[str, list[dict[str, float]]] = {}
        self.notes: dict[str, str] = {}
        self.ref: Recorder | None = None
        self.warm_s: dict[str, float] = {}
        self.bf16_model: torch.nn.Module | None = None

    def params(self, tokens: int | None = None) -> SamplingParams:
        t = tokens or self.args.new_tokens
        return SamplingParams(n=self.args.samples, max_new_tokens=t, temperature=1.0, min_new_tokens=t)

    def sampler(self, v: str) -> SharedPrefixSampler:
        if v not in self.samplers:
            m = self.model
            if v in ("base", "eager_attn") or v.startswith("batch"):
                s: SharedPrefixSampler = SharedPrefixSampler(m, self.tok)
            elif v == "bf16":
                self.bf16_model = copy.deepcopy(m).to(torch.bfloat16).eval()
                s = SharedPrefixSampler(self.bf16_model, self.tok)
            elif v == "static":
                s = StepSampler(m, self.tok, hf_step(m), static=True)
            elif v in ("manual", "fused", "gqa"):
                s = StepSampler(m, self.tok, manual_step(m, fused=v == "fused", gqa=v == "gqa"), static=False)
            elif v in ("static_compile", "best", "best_nofuse"):
                step = hf_step(m) if v == "static_compile" else manual_step(m, fused=v == "best", gqa=True)
                s = StepSampler(m, self.tok, self.compiled(step, v), static=True)
            else:
                raise SystemExit(f"unknown variant {v!r}")
            if isinstance(s, StepSampler) and self.default_attn != "sdpa":
                raise SystemExit(
                    f"{v}: the loop's boolean 4-D mask needs sdpa attention, the model has {self.default_attn}"
                )
            self.samplers[v] = s
        return self.samplers[v]

    def compiled(self, step: Step, v: str) -> Step:
        """torch.compile(step), fullgraph when it traces whole, else with graph breaks (noted)."""
        kw: dict[str, Any] = {"dynamic": False}
        if self.args.compile_mode:
            kw["mode"] = self.args.compile_mode
        full = torch.compile(step, fullgraph=True, **kw)
        state = {"fn": full}

        def run(*a: Any) -> torch.Tensor:
            try:
                return state["fn"](*a)
            except Exception as e:  # noqa: BLE001  (a fullgraph failure: fall back to graph breaks, say so)
                if state["fn"] is not full:
                    raise
                self.notes[v] = f"fullgraph failed ({type(e).__name__}: {str(e).splitlines()[0][:80]}); graph breaks"
                state["fn"] = torch.compile(step, fullgraph=False, **kw)
                return state["fn"](*a)

        return run

    def generate(self, v: str, forced: torch.Tensor | None, tokens: int | None = None) -> dict[str, Any]:
        """One generate of variant `v` from seed `--seed`; its timings and recorder."""
        a = self.args
        s = self.sampler(v)
        rows = int(v[5:]) if v.startswith("batch") else a.prompts * a.samples
        prompts = self.prompts[: rows // a.samples]
        rec = Recorder(forced, a.exact_steps)
        s.draw = rec
        if v == "eager_attn":
            self.model.set_attn_implementation("eager")
        try:
            torch.manual_seed(a.seed)
            t0 = time.perf_counter()
            s.generate(prompts, self.params(tokens))
            gen = time.perf_counter() - t0
        finally:
            if v == "eager_attn":
                self.model.set_attn_implementation(self.default_attn)
        return {"rec": rec, "gen_s": gen, "step_ms": rec.step_ms(), "rows": rows, "prefill_s": rec.times[0] - t0}

    def exactness(self, rec: Recorder, forced: bool) -> dict[str, float]:
        """Teacher-forced: max |logp - logp_ref| over the first steps and argmax agreement; free: token agreement."""
        assert self.ref is not None
        if forced:
            diff, agree, count = 0.0, 0, 0
            for lp, ref in zip(rec.logps, self.ref.logps):
                fin = torch.isfinite(ref) & torch.isfinite(lp)
                assert torch.equal(torch.isfinite(ref), torch.isfinite(lp)), "different -inf pattern"
                diff = max(diff, float((lp - ref)[fin].abs().max()))
                agree += int((lp.argmax(-1) == ref.argmax(-1)).sum())
                count += lp.shape[0]
            return {"max_dlogp": diff, "argmax_agree": agree / count}
        mine, ref_t = torch.stack(rec.tokens, 1), torch.stack(self.ref.tokens, 1)
        t = min(mine.shape[1], ref_t.shape[1])
        return {"tokens_agree": float((mine[:, :t] == ref_t[:, :t]).float().mean())}

    def warm(self, v: str) -> None:
        """Warm-up generate (compiles a compiled step: its seconds are reported as compile seconds)."""
        a = self.args
        tokens = a.bf16_tokens if v == "bf16" else None
        if v.startswith("batch"):
            tokens = 8
        cap = a.compile_cap if v in ("static_compile", "best", "best_nofuse") else 0
        old = signal.signal(signal.SIGALRM, _alarm)
        signal.alarm(cap)
        try:
            r = self.generate(v, None, tokens)
        except TimeoutError:
            self.notes[v] = f"compile over {cap} s: dropped"
            raise
        finally:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, old)
        self.warm_s[v] = r["gen_s"]
        print(f"[{v}] warm-up generate {r['gen_s']:.1f} s, step {r['step_ms']:.1f} ms", file=sys.stderr, flush=True)

    def measure(self, v: str, rnd: int) -> None:
        a = self.args
        forced = rnd % 2 == 0
        if v == "bf16":
            if rnd > 0:
                return
            assert self.ref is not None
            ref = torch.stack(self.ref.tokens, 1)
            r = self.generate(v, ref, a.bf16_tokens)
        else:
            teach = self.ref is not None and forced and not v.startswith("batch")
            r = self.generate(v, torch.stack(self.ref.tokens, 1) if teach and self.ref else None)
        if not v.startswith("batch"):
            r.update(self.exactness(r["rec"], forced or v == "bf16"))
        r.pop("rec")
        self.runs.setdefault(v, []).append(r)
        print(
            f"[{v}] round {rnd}: generate {r['gen_s']:.2f} s, step {r['step_ms']:.1f} ms", file=sys.stderr, flush=True
        )


def _alarm(signum: int, frame: Any) -> None:
    raise TimeoutError


def med(runs: list[dict[str, float]], key: str) -> float:
    vals = [r[key] for r in runs if key in r]
    return statistics.median(vals) if vals else float("nan")


def machine_line(bench: Bench) -> str:
    from grpokit.models.precision import NATIVE_BF16_FLAGS, cpu_description, cpu_flags

    cpu = cpu_description()
    bf16 = [f for f in NATIVE_BF16_FLAGS if f in cpu_flags()]
    return (
        f"machine: {cpu['cpu']}, {os.cpu_count()} CPUs, SIMD {cpu['instruction_sets']}, torch kernels "
        f"{cpu['torch_kernels']}, bf16 arithmetic: {'yes (' + ', '.join(bf16) + ')' if bf16 else 'no'}; torch "
        f"{torch.__version__}, {torch.get_num_threads()} threads; attention {bench.default_attn}"
    )


LEVERS = [
    ("static KV cache (eager)", "static", "base"),
    ("static KV cache + torch.compile", "static_compile", "static"),
    ("static + compile vs base", "static_compile", "base"),
    ("hand-written decode step", "manual", "base"),
    ("fused q/k/v + gate/up", "fused", "manual"),
    ("SDPA enable_gqa (no KV repeat)", "gqa", "manual"),
    ("best: static+fused+gqa+compile vs base", "best", "base"),
    ("static+gqa+compile, unfused, vs base", "best_nofuse", "base"),
    ("fusion under compile (best vs best_nofuse)", "best", "best_nofuse"),
    ("attention eager (vs default)", "eager_attn", "base"),
    ("bf16 weights", "bf16", "base"),
]


def exact_text(runs: list[dict[str, float]]) -> str:
    parts = []
    if any("max_dlogp" in r for r in runs):
        parts.append(f"max|dlogp| {max(r['max_dlogp'] for r in runs if 'max_dlogp' in r):.1e}")
        parts.append(f"argmax {min(r['argmax_agree'] for r in runs if 'argmax_agree' in r):.3f}")
    if any("tokens_agree" in r for r in runs):
        parts.append(f"tokens {min(r['tokens_agree'] for r in runs if 'tokens_agree' in r):.3f}")
    return ", ".join(parts) or "—"


def report(bench: Bench) -> None:
    a, runs = bench.args, bench.runs
    print(machine_line(bench))
    width = max(len(p) for p in bench.prompts[: a.prompts])
    print(
        f"config: {a.model} fp32, {a.prompts} prompts x {a.samples} samples = {a.prompts * a.samples} rows, "
        f"{a.new_tokens} new tokens forced, T=1, {a.rounds} rounds, prompt width {width}"
    )
    single = {v: rs for v, rs in runs.items() if not v.startswith("batch")}
    if single:
        print()
        print("| variant | ms/step | generate s | prefill s | warm-up s | exactness (vs base ref) | note |")
        print("|---|---|---|---|---|---|---|")
    for v, rs in single.items():
        print(
            f"| {v} | {med(rs, 'step_ms'):.1f} | {med(rs, 'gen_s'):.2f} | {med(rs, 'prefill_s'):.3f} | "
            f"{bench.warm_s.get(v, float('nan')):.1f} | {exact_text(rs)} | {bench.notes.get(v, '')} |"
        )
    rows = [(name, on, off) for name, on, off in LEVERS if on in runs and off in runs]
    if rows:
        print()
        print("| lever | on ms/step | off ms/step | ratio on/off | generate s (on) | exactness | note |")
        print("|---|---|---|---|---|---|---|")
        for name, on, off in rows:
            x, y = med(runs[on], "step_ms"), med(runs[off], "step_ms")
            note = bench.notes.get(on, "")
            if on in ("static_compile", "best", "best_nofuse"):
                comp = bench.warm_s.get(on, float("nan")) - min(r["gen_s"] for r in runs[on])
                note = f"compile ~{comp:.0f} s; {note}".rstrip("; ")
            if on == "bf16":
                note = f"{a.bf16_tokens} steps, one run; {note}".rstrip("; ")
            print(
                f"| {name} | {x:.1f} | {y:.1f} | {x / y:.2f} | {med(runs[on], 'gen_s'):.2f} | "
                f"{exact_text(runs[on])} | {note} |"
            )
    batch = [v for v in runs if v.startswith("batch")]
    if batch:
        b0 = med(runs[batch[0]], "step_ms")
        r0 = runs[batch[0]][0]["rows"]
        print()
        print("| rows (prompts x samples) | ms/step | tokens/s | tokens/s vs first | generate s |")
        print("|---|---|---|---|---|")
        for v in batch:
            ms, r = med(runs[v], "step_ms"), runs[v][0]["rows"]
            print(
                f"| {r} ({r // a.samples} x {a.samples}) | {ms:.1f} | {r / ms * 1000:.0f} | "
                f"{(r / ms) / (r0 / b0):.2f} | {med(runs[v], 'gen_s'):.2f} |"
            )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--variants", default="base,static,manual,fused,gqa,eager_attn,bf16")
    ap.add_argument("--model", default="smollm2-135m-instruct")
    ap.add_argument("--prompts", type=int, default=4)
    ap.add_argument("--samples", type=int, default=8)
    ap.add_argument("--new-tokens", type=int, default=48)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--exact-steps", type=int, default=8, help="teacher-forced steps compared for exactness")
    ap.add_argument("--bf16-tokens", type=int, default=8)
    ap.add_argument("--batch-rows", default="32,64,128,256", type=lambda s: [int(x) for x in s.split(",")])
    ap.add_argument("--compile-mode", default=None, help="torch.compile mode (e.g. max-autotune-no-cudagraphs)")
    ap.add_argument("--compile-cap", type=int, default=600, help="seconds allowed for the compiling warm-up")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default, as the trainer)")
    args = ap.parse_args()

    from grpokit.cli.main import _quiet_libraries

    _quiet_libraries()
    if args.threads:
        torch.set_num_threads(args.threads)
    variants = [v for v in args.variants.split(",") if v]
    if variants == ["batch"]:
        variants = [f"batch{r}" for r in args.batch_rows]
    elif "base" not in variants:
        variants.insert(0, "base")
    bench = Bench(args)
    print(machine_line(bench), file=sys.stderr, flush=True)
    with torch.no_grad():
        if not variants[0].startswith("batch"):
            ref = bench.generate("base", None)  # base's warm-up: the reference tokens and log-probs
            bench.ref, bench.warm_s["base"] = ref["rec"], ref["gen_s"]
            print(f"[base] reference (warm-up) {ref['gen_s']:.1f} s", file=sys.stderr, flush=True)
        dropped = []
        for v in variants:
            if v == "base":
                continue
            try:
                bench.warm(v)
            except TimeoutError:
                dropped.append(v)
        variants = [v for v in variants if v not in dropped]
        for rnd in range(args.rounds):
            for v in variants:
                bench.measure(v, rnd)
    report(bench)


if __name__ == "__main__":
    main()
