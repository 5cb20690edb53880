"""The floor: how far the race configuration's decode step and learner forward+backward are from what this machine's
memory bandwidth and fp32 matmul rate allow. A benchmark, not a test: it prints figures.

    flock /tmp/torch.lock .venv/bin/python bench/floor.py            # ~ a few minutes on 2 CPU cores

It measures, with torch's threads as the trainer uses them (torch's default unless `--threads`):

* memory bandwidth, median of `--repeats` runs over a `--gib` GiB fp32 tensor:
  read  BW = bytes(x) / t(x.sum())           (read-bound reduction)
  copy  BW = 2 bytes(x) / t(y.copy_(x))      (one read + one write per element; write-allocate traffic not counted)
* the fp32 matmul rate at the GEMM shapes the model runs (read from the model's config: hidden D, intermediate I,
  L layers, H heads / KV heads of head_dim d, vocab V), y = x W^T as `nn.Linear` computes it, for M rows:
  rate(M) = sum_g 2 M K_g N_g / sum_g t_g  over one decoder layer's GEMMs (q: D->Hd, k, v: D->KVd, o: Hd->D,
  gate, up: D->I, down: I->D) times L, plus the LM head D->V; M = 32 (one decode step of 4 x 8 rows) and
  M = the learner's completion tokens (n T).

then runs the race configuration of bench/step_throughput.py (dapo, 4 prompts x 8 samples x 48 forced new tokens,
`--min-new-tokens 48 --set algo.group_filter=all`) through its `run_engine`, a warm-up + `--steps` measured steps,
timing the rollout's prefill and recording the shapes the learner sees, and prints the floor table:

* decode step, measured = generate-phase seconds / T (T = 48 new tokens; prefill's share included); prefill and
  (generate - prefill) / (T - 1) decoder calls are reported apart.
  Floor (bandwidth) = (weight bytes + KV bytes at the mean context) / read BW, where weight bytes = 4 x every
  parameter (the tied embedding counted once, as the LM head: a decode step reads only n of its rows as an
  embedding) and KV bytes = n x L x 2 x KV x d x 4 x (P + (T - 1) / 2 + 1/2), P the padded prompt width the cache
  holds (the cache after prefill is expanded to the n rows; decoder call t = 1..T-1 attends to P + t positions).
  Floor (compute) = (2 n (L W_layer + D V) + 4 n L H d (P + T/2)) / rate(32), W_layer the matmul parameters of a
  layer; the decode step is below whichever floor is higher.
* learner forward+backward, measured = time/forward + time/backward of the update.
  FLOPs (docs/math.md §1.6: the LM head only over completion positions; models/prefix.py: each distinct prompt
  computed once) = 3 x [2 (N_p + n T) L W_layer + 2 n T D V + 4 L H d (sum_prompt-tokens c + sum_completion c)],
  N_p the real tokens of the distinct prompts, c each token's causal context (prompt token j: j; completion token
  t of a row with prompt length p: p + t); x 3 = forward + backward (backward ~ 2 x forward: input and weight
  gradients). Floor = FLOPs / rate(n T). Elementwise work (norms, softmax, log-softmax, entropy, AdamW) is not
  counted: the floor is the matmuls alone.

ratio = measured / floor: 1.0 would be the machine's limit for that work.
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))

GIB = 1 << 30


def timed(fn: Callable[[], Any], repeats: int) -> float:
    """Median seconds of `repeats` calls of `fn` after one warm-up call."""
    fn()
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def bandwidth(gib: float, repeats: int) -> dict[str, float]:
    """Read and copy bandwidth in GB/s (1e9 bytes) over a `gib` GiB fp32 tensor."""
    import torch

    n = int(gib * GIB) // 4
    x = torch.ones(n, dtype=torch.float32)
    y = torch.empty_like(x)
    nbytes = x.numel() * 4
    t_read = timed(lambda: x.sum(), repeats)
    t_copy = timed(lambda: y.copy_(x), repeats)
    return {"read": nbytes / t_read / 1e9, "copy": 2 * nbytes / t_copy / 1e9}


def model_shape(name: str) -> dict[str, Any]:
    """D, I, L, H, KV, d, V and tied embeddings from the model's config."""
    from transformers import AutoConfig

    from grpokit.models.embedded import EMBEDDED_MODELS, ensure_embedded_model

    src = ensure_embedded_model(name) if name in EMBEDDED_MODELS else name
    c = AutoConfig.from_pretrained(src)
    h = c.num_attention_heads
    return {
        "D": c.hidden_size,
        "I": c.intermediate_size,
        "L": c.num_hidden_layers,
        "H": h,
        "KV": getattr(c, "num_key_value_heads", None) or h,
        "d": getattr(c, "head_dim", None) or c.hidden_size // h,
        "V": c.vocab_size,
        "tied": bool(getattr(c, "tie_word_embeddings", True)),
    }


def layer_gemms(s: dict[str, Any]) -> list[tuple[int, int]]:
    """(K, N) of one decoder layer's linear maps: q, k, v, o, gate, up, down."""
    D, Hd, KVd, I = s["D"], s["H"] * s["d"], s["KV"] * s["d"], s["I"]
    return [(D, Hd), (D, KVd), (D, KVd), (Hd, D), (D, I), (D, I), (I, D)]


def matmul_rate(s: dict[str, Any], m: int, repeats: int) -> dict[str, float]:
    """fp32 GFLOP/s of y = x W^T at M = m rows: per GEMM shape, and over a forward's mix (L layers + LM head)."""
    import torch

    out: dict[str, float] = {}
    flops_total = t_total = 0.0
    shapes = [(k, nn, s["L"]) for k, nn in layer_gemms(s)] + [(s["D"], s["V"], 1)]
    for k, nn, count in shapes:
        x, w = torch.randn(m, k), torch.randn(nn, k)
        t = timed(lambda x=x, w=w: torch.mm(x, w.t()), repeats)
        f = 2.0 * m * k * nn
        out[f"{m}x{k}x{nn}"] = f / t / 1e9
        flops_total += count * f
        t_total += count * t
    out["mix"] = flops_total / t_total / 1e9
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=2, help="measured steps (after one warm-up step)")
    ap.add_argument("--model", default="smollm2-135m-instruct")
    ap.add_argument("--gib", type=float, default=1.0, help="size of the bandwidth tensor")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default, as the trainer)")
    args = ap.parse_args()

    import torch
    from step_throughput import run_engine, summarize

    import grpokit.models.forward as learner_forward
    import grpokit.rollout.hf as hf
    from grpokit.cli.main import _quiet_libraries
    from grpokit.models.prefix import unique_rows

    _quiet_libraries()
    if args.threads:
        torch.set_num_threads(args.threads)
    s = model_shape(args.model)
    bw = bandwidth(args.gib, args.repeats)
    print(f"threads {torch.get_num_threads()}; read {bw['read']:.1f} GB/s, copy {bw['copy']:.1f} GB/s", file=sys.stderr)

    # the race configuration, with the rollout's prefill timed and the learner's shapes recorded
    prefills: list[tuple[float, int, int]] = []  # (seconds, unique prompts, padded width)
    learner: list[dict[str, Any]] = []
    orig_prefill, orig_sph = hf.prefill, learner_forward.shared_prefix_hidden

    def timed_prefill(decoder: Any, ids: torch.Tensor, mask: torch.Tensor) -> Any:
        t0 = time.perf_counter()
        out = orig_prefill(decoder, ids, mask)
        prefills.append((time.perf_counter() - t0, int(ids.shape[0]), int(ids.shape[1])))
        return out

    def recorded_sph(model: Any, p_ids: torch.Tensor, p_mask: torch.Tensor, c_ids: torch.Tensor) -> Any:
        _, u_mask, _ = unique_rows(p_ids, p_mask)
        learner.append({"prompt_lens": u_mask.sum(1).tolist(), "row_lens": p_mask.sum(1).tolist(), "T": c_ids.shape[1]})
        return orig_sph(model, p_ids, p_mask, c_ids)

    hf.prefill, learner_forward.shared_prefix_hidden = timed_prefill, recorded_sph
    ns = argparse.Namespace(
        steps=args.steps,
        min_new_tokens=48,
        set=["algo.group_filter=all"],
        recipe="dapo",
        model=args.model,
        task="add1",
    )
    rows, facts = run_engine(ns, "hf")
    hf.prefill, learner_forward.shared_prefix_hidden = orig_prefill, orig_sph
    med = summarize(rows)
    if len(prefills) != args.steps + 1:
        raise RuntimeError(f"expected one generation round per step, got {len(prefills)} prefills")
    t_prefill = statistics.median(p[0] for p in prefills[1:])
    _, u, p_width = prefills[-1]
    # learner shapes of the last step (one micro-batch per step at micro_batch_size 32)
    last = [r for r in learner if r["T"] > 0][-1:]
    n_new, n_rows = 48, 4 * 8
    L, D, V, H, d, KV = s["L"], s["D"], s["V"], s["H"], s["d"], s["KV"]
    w_layer = sum(k * nn for k, nn in layer_gemms(s))
    rate_dec = matmul_rate(s, n_rows, args.repeats)
    n_tok = sum(len(r["row_lens"]) * r["T"] for r in last)
    rate_lrn = matmul_rate(s, n_tok, max(3, args.repeats // 2))

    # decode step floor
    n_params = L * (w_layer + 2 * D) + D + V * D  # layers (+2 RMSNorms), final norm, LM head (tied: the embedding)
    weight_bytes = 4 * n_params
    ctx = p_width + (n_new - 1) / 2 + 0.5  # mean attended width over decoder calls t = 1..T-1
    kv_bytes = n_rows * L * 2 * KV * d * 4 * ctx
    floor_dec_bw = (weight_bytes + kv_bytes) / (bw["read"] * 1e9)
    dec_flops = 2 * n_rows * (L * w_layer + D * V) + 4 * n_rows * L * H * d * (p_width + n_new / 2)
    floor_dec_fl = dec_flops / (rate_dec["mix"] * 1e9)
    dec = med["generate"] / n_new
    dec_only = (med["generate"] - t_prefill) / (n_new - 1)

    # learner forward+backward floor
    fl = 0.0
    for r in last:
        n_p = sum(r["prompt_lens"])
        ctx_p = sum(p * (p + 1) / 2 for p in r["prompt_lens"])
        ctx_c = sum(p * r["T"] + r["T"] * (r["T"] + 1) / 2 for p in r["row_lens"])
        fl += 2 * (n_p + len(r["row_lens"]) * r["T"]) * L * w_layer + 2 * len(r["row_lens"]) * r["T"] * D * V
        fl += 4 * L * H * d * (ctx_p + ctx_c)
    lrn_flops = 3 * fl
    floor_lrn = lrn_flops / (rate_lrn["mix"] * 1e9)
    lrn = med["forward"] + med["backward"]

    print(
        f"machine: torch {torch.__version__}, {torch.get_num_threads()} threads, precision {facts['precision']}, "
        f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d}"
    )
    print(
        f"model: D {D}, I {s['I']}, L {L}, H {H} / KV {KV} x d {d}, V {V}, tied {s['tied']}; "
        f"{n_params / 1e6:.1f} M parameters read per decode step ({weight_bytes / 1e6:.0f} MB fp32)"
    )
    print(
        f"bandwidth: read {bw['read']:.1f} GB/s, copy {bw['copy']:.1f} GB/s "
        f"({args.gib:g} GiB fp32, median of {args.repeats})"
    )
    for m, rate in ((n_rows, rate_dec), (n_tok, rate_lrn)):
        per = ", ".join(f"{k} {v:.0f}" for k, v in rate.items() if k != "mix")
        print(f"fp32 matmul GFLOP/s at M={m}: mix {rate['mix']:.0f} ({per})")
    print(
        f"race: {len(rows)} measured steps, generate {med['generate']:.2f} s (prefill {t_prefill:.3f} s of "
        f"{u} prompts x {p_width} padded tokens), fwd+bwd {lrn:.2f} s, step {med['step']:.2f} s; "
        f"KV at mean context {ctx:.1f}: {kv_bytes / 1e6:.0f} MB; learner {n_tok} completion tokens"
    )
    print()
    print("| work | floor formula | floor s | measured s | measured / floor |")
    print("|---|---|---|---|---|")
    print(
        f"| decode step, bandwidth | ({weight_bytes / 1e6:.0f} MB weights + {kv_bytes / 1e6:.0f} MB KV) / "
        f"{bw['read']:.1f} GB/s | {floor_dec_bw:.4f} | {dec:.4f} | {dec / floor_dec_bw:.1f}x |"
    )
    print(
        f"| decode step, compute | {dec_flops / 1e9:.2f} GFLOP / {rate_dec['mix']:.0f} GFLOP/s (M={n_rows}) | "
        f"{floor_dec_fl:.4f} | {dec:.4f} | {dec / floor_dec_fl:.1f}x |"
    )
    print(
        f"| decode step, prefill excluded ((generate - prefill) / {n_new - 1}) | max of the two above | "
        f"{max(floor_dec_bw, floor_dec_fl):.4f} | {dec_only:.4f} | {dec_only / max(floor_dec_bw, floor_dec_fl):.1f}x |"
    )
    print(f"| prefill (rollout, {u} x {p_width}) | — | — | {t_prefill:.4f} | — |")
    print(
        f"| learner forward+backward | 3 x {lrn_flops / 3e12:.3f} TFLOP / {rate_lrn['mix']:.0f} GFLOP/s "
        f"(M={n_tok}) | {floor_lrn:.2f} | {lrn:.2f} | {lrn / floor_lrn:.1f}x |"
    )


if __name__ == "__main__":
    main()
