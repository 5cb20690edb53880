"""Peak memory and time of chunked vs naive log-probs + entropy (forward + backward), spec §1.6.

Compares, on bf16 inputs:

* ``naive``       — ``torch.log_softmax(logits.float(), -1)``, gather the chosen token, entropy ``-(p * logp).sum(-1)``
* ``chunked``     — ``grpokit.algos.logprobs_and_entropy(logits, tokens, chunk_size=...)``
* ``naive_head``  — ``logits = lm_head(hidden)`` then the naive computation (the usual HF path)
* ``chunked_head``— ``logprobs_and_entropy(hidden, tokens, head=lm_head)``: never builds the [N, T, V] logits

Each variant runs in a fresh subprocess; its peak memory is that process's ``ru_maxrss`` (resident set
high-water mark, CPU). ``extra`` is the peak minus the high-water mark right after the inputs were built, i.e.
what the computation itself added. Run from the repository root:

    .venv/bin/python bench/logits_memory.py                     # default size, runs in < 2 min on 2 cores
    .venv/bin/python bench/logits_memory.py --n 64 --t 512 --v 49152   # the full-size case (needs far more RAM)
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

VARIANTS = ("naive", "chunked", "naive_head", "chunked_head")


def _maxrss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: KiB


def _worker(args: argparse.Namespace) -> dict:
    import torch

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    from grpokit.algos import logprobs_and_entropy

    n, t, v, d = args.n, args.t, args.v, args.d
    dtype = torch.bfloat16
    tokens = torch.randint(0, v, (n, t))
    head_variant = args.worker.endswith("_head")
    if head_variant:
        x = (torch.randn(n, t, d) / d**0.5).to(dtype).requires_grad_(True)
        head = torch.nn.Linear(d, v, bias=False).to(dtype)
    else:
        x = torch.empty(n, t, v, dtype=dtype)
        for i in range(n):  # fill row by row: no full-size float32 temporary in the baseline
            x[i] = torch.randn(t, v) * 3
        x.requires_grad_(True)
        head = None
    base = _maxrss_mib()

    t0 = time.perf_counter()
    if args.worker in ("naive", "naive_head"):
        logits = head(x) if head is not None else x
        logp_all = torch.log_softmax(logits.float(), dim=-1)
        logp = logp_all.gather(-1, tokens[..., None]).squeeze(-1)
        ent = -(logp_all.exp() * logp_all).sum(-1)
    else:
        logp, ent = logprobs_and_entropy(x, tokens, head=head, chunk_size=args.chunk_size)
    loss = logp.sum() + 0.01 * ent.sum()
    t1 = time.perf_counter()
    loss.backward()
    t2 = time.perf_counter()
    return {
        "variant": args.worker,
        "peak_mib": _maxrss_mib(),
        "base_mib": base,
        "extra_mib": _maxrss_mib() - base,
        "fwd_s": t1 - t0,
        "bwd_s": t2 - t1,
        "checksum": float(loss.detach()),
    }


def _run_variant(variant: str, args: argparse.Namespace) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", variant]
    cmd += ["--n", str(args.n), "--t", str(args.t), "--v", str(args.v), "--d", str(args.d)]
    cmd += ["--chunk-size", str(args.chunk_size), "--threads", str(args.threads)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        reason = "killed (out of memory?)" if proc.returncode < 0 else proc.stderr.strip().splitlines()[-1:]
        return {"variant": variant, "error": f"rc={proc.returncode} {reason}"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=4, help="sequences (default 4)")
    p.add_argument("--t", type=int, default=512, help="tokens per sequence (default 512)")
    p.add_argument("--v", type=int, default=49152, help="vocabulary size (default 49152, SmolLM2)")
    p.add_argument("--d", type=int, default=576, help="hidden size for the head variants (default 576)")
    p.add_argument("--chunk-size", type=int, default=1024, help="rows per chunk of logprobs_and_entropy")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    p.add_argument("--variants", default=",".join(VARIANTS), help=f"comma list out of {','.join(VARIANTS)}")
    p.add_argument("--worker", choices=VARIANTS, help=argparse.SUPPRESS)
    args = p.parse_args()

    if args.worker:
        print(json.dumps(_worker(args)))
        return

    n, t, v, d = args.n, args.t, args.v, args.d
    gib = n * t * v * 2 / 2**30
    print(f"N={n} T={t} V={v} D={d} chunk={args.chunk_size} threads={args.threads}: bf16 logits {gib:.2f} GiB")
    print(f"{'variant':<14}{'peak MiB':>10}{'extra MiB':>11}{'fwd s':>8}{'bwd s':>8}{'total s':>9}")
    results = {}
    for variant in args.variants.split(","):
        r = _run_variant(variant, args)
        results[variant] = r
        if "error" in r:
            print(f"{variant:<14}{r['error']}")
            continue
        total = r["fwd_s"] + r["bwd_s"]
        print(f"{variant:<14}{r['peak_mib']:>10.0f}{r['extra_mib']:>11.0f}{r['fwd_s']:>8.2f}{r['bwd_s']:>8.2f}"
              f"{total:>9.2f}")
    for a, b in (("naive", "chunked"), ("naive_head", "chunked_head")):
        ra, rb = results.get(a), results.get(b)
        if ra and rb and "error" not in ra and "error" not in rb:
            print(
                f"ratio {a}/{b}: peak {ra['peak_mib'] / rb['peak_mib']:.2f}x, "
                f"extra {ra['extra_mib'] / max(rb['extra_mib'], 1.0):.2f}x, "
                f"time {(ra['fwd_s'] + ra['bwd_s']) / (rb['fwd_s'] + rb['bwd_s']):.2f}x"
            )


if __name__ == "__main__":
    main()
