"""Peak memory and time of chunked vs naive log-probs + entropy (forward + backward), docs/math.md §1.6.

Variants, all on bf16 inputs, loss = sum(logp) + 0.01 * sum(entropy), then backward:

* ``naive``        ``torch.log_softmax(logits.float(), -1)``, gather the chosen token, entropy ``-(p * logp).sum(-1)``
* ``chunked``      ``grpokit.algos.logprobs_and_entropy(logits, tokens, chunk_size=...)`` (checkpointed chunks)
* ``prealloc``     reference only (defined in this file, not in grpokit): a custom autograd Function that writes each
                   chunk's analytic gradient into ONE preallocated [N*T, V] buffer — the floor for the no-head case
* ``naive_head``   ``logits = lm_head(hidden)`` then the naive computation (the usual Hugging Face path)
* ``chunked_head`` ``logprobs_and_entropy(hidden, tokens, head=lm_head)``: never builds the [N, T, V] logits

Each variant runs in a fresh subprocess. On CPU its peak memory is the process's ``ru_maxrss`` (resident-set
high-water mark) and ``extra`` is that peak minus the high-water mark right after the inputs were built, i.e. what
the computation itself added. With ``--device cuda`` the numbers are ``torch.cuda.max_memory_allocated`` (peak) and
that peak minus the memory allocated once the inputs exist (extra). Every variant first runs once on a tiny slice
(warm-up), so first-call overheads are not timed.
Run from the repository root:

    .venv/bin/python bench/logits_memory.py                               # default size: < 2 min on 2 CPU cores
    .venv/bin/python bench/logits_memory.py --n 64 --t 512 --v 49152 --device cuda   # the full-size case on a GPU
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

VARIANTS = ("naive", "chunked", "prealloc", "naive_head", "chunked_head")
SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")


def _prealloc_fn():
    """Reference implementation of the memory floor (no head): forward under no_grad chunk by chunk, backward
    recomputes each chunk and writes d/dz of (logp, entropy) analytically into one preallocated gradient buffer.
    d logp_tok/dz = onehot - p;  dH/dz = -p (log p + H)."""
    import torch

    class _Fn(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, tok, chunk):
            lps, ents = [], []
            for xs, ts in zip(x.split(chunk), tok.split(chunk)):
                z = xs.float()
                lse = torch.logsumexp(z, -1)
                lps.append(z.gather(-1, ts[:, None]).squeeze(-1) - lse)
                z_fin = torch.nan_to_num(z, nan=float("nan"), posinf=float("inf"), neginf=0.0)
                ents.append(lse - (torch.softmax(z, -1) * z_fin).sum(-1))
            ctx.save_for_backward(x, tok)
            ctx.chunk = chunk
            return torch.cat(lps), torch.cat(ents)

        @staticmethod
        def backward(ctx, g_lp, g_ent):
            x, tok = ctx.saved_tensors
            grad = torch.empty_like(x)
            for s in range(0, x.shape[0], ctx.chunk):
                e = s + ctx.chunk
                logp = torch.log_softmax(x[s:e].float(), -1)
                p = logp.exp()
                logp = torch.nan_to_num_(logp, nan=float("nan"), posinf=float("inf"), neginf=0.0)
                ent = -(p * logp).sum(-1, keepdim=True)
                gz = logp.add_(ent).mul_(g_ent[s:e, None]).add_(g_lp[s:e, None]).mul_(p).neg_()
                gz.scatter_add_(-1, tok[s:e, None], g_lp[s:e, None])
                grad[s:e] = gz
            return grad, None, None

    def fn(logits, tokens, chunk_size):
        lp, ent = _Fn.apply(logits.reshape(-1, logits.shape[-1]), tokens.reshape(-1), chunk_size)
        return lp.view(tokens.shape), ent.view(tokens.shape)

    return fn


def _maxrss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: KiB


def _worker(args: argparse.Namespace) -> dict:
    import torch

    sys.path.insert(0, SRC)
    from grpokit.algos import logprobs_and_entropy

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    dev = torch.device(args.device)
    cuda = dev.type == "cuda"

    n, t, v, d = args.n, args.t, args.v, args.d
    dtype = torch.bfloat16
    tokens = torch.randint(0, v, (n, t), device=dev)
    head = None
    if args.worker.endswith("_head"):
        x = (torch.randn(n, t, d, device=dev) / d**0.5).to(dtype).requires_grad_(True)
        head = torch.nn.Linear(d, v, bias=False, device=dev, dtype=dtype)
    else:
        x = torch.empty(n, t, v, dtype=dtype, device=dev)
        for i in range(n):  # row by row: no full-size float32 temporary in the baseline
            x[i] = torch.randn(t, v, device=dev) * 3
        x.requires_grad_(True)
    prealloc = _prealloc_fn()

    def step(x, tokens):
        if args.worker in ("naive", "naive_head"):
            logits = head(x) if head is not None else x
            logp_all = torch.log_softmax(logits.float(), dim=-1)
            logp = logp_all.gather(-1, tokens[..., None]).squeeze(-1)
            ent = -(logp_all.exp() * logp_all).sum(-1)
        elif args.worker == "prealloc":
            logp, ent = prealloc(x, tokens, args.chunk_size)
        else:
            logp, ent = logprobs_and_entropy(x, tokens, head=head, chunk_size=args.chunk_size)
        return logp.sum() + 0.01 * ent.sum()

    def sync():
        if cuda:
            torch.cuda.synchronize()

    # warm-up on a tiny slice (first-call overheads of checkpoint, kernels, allocator) without raising the peak
    step(x[:1, :8].detach().clone().requires_grad_(True), tokens[:1, :8]).backward()
    if head is not None:
        head.weight.grad = None
    sync()
    if cuda:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated() / 2**20
    else:
        base = _maxrss_mib()

    t0 = time.perf_counter()
    loss = step(x, tokens)
    sync()
    t1 = time.perf_counter()
    loss.backward()
    sync()
    t2 = time.perf_counter()
    peak = torch.cuda.max_memory_allocated() / 2**20 if cuda else _maxrss_mib()
    return {
        "variant": args.worker,
        "peak_mib": peak,
        "base_mib": base,
        "extra_mib": peak - base,
        "fwd_s": t1 - t0,
        "bwd_s": t2 - t1,
        "loss": float(loss.detach()),
        "grad_abs_sum": float(x.grad.float().abs().sum()),
    }


def _run_variant(variant: str, args: argparse.Namespace) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", variant, "--device", args.device]
    cmd += ["--n", str(args.n), "--t", str(args.t), "--v", str(args.v), "--d", str(args.d)]
    cmd += ["--chunk-size", str(args.chunk_size), "--threads", str(args.threads)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = proc.stderr.strip().splitlines()[-1:] or [""]
        reason = "killed (out of memory?)" if proc.returncode < 0 else tail[0][-200:]
        return {"variant": variant, "error": f"rc={proc.returncode} {reason}"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=4, help="sequences (default 4)")
    p.add_argument("--t", type=int, default=512, help="tokens per sequence (default 512)")
    p.add_argument("--v", type=int, default=49152, help="vocabulary size (default 49152, SmolLM2)")
    p.add_argument("--d", type=int, default=576, help="hidden size of the head variants (default 576, SmolLM2-135M)")
    p.add_argument("--chunk-size", type=int, default=256, help="rows per chunk (default 256)")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="torch CPU threads")
    p.add_argument("--device", default="cpu", help="cpu (RSS) or cuda (allocator peak)")
    p.add_argument("--variants", default=",".join(VARIANTS), help=f"comma list out of {','.join(VARIANTS)}")
    p.add_argument("--json", help="also write the results to this file")
    p.add_argument("--worker", choices=VARIANTS, help=argparse.SUPPRESS)
    args = p.parse_args()

    if args.worker:
        print(json.dumps(_worker(args)))
        return

    n, t, v, d = args.n, args.t, args.v, args.d
    gib = n * t * v * 2 / 2**30
    print(
        f"device={args.device} N={n} T={t} V={v} D={d} chunk={args.chunk_size} threads={args.threads}: "
        f"bf16 logits {gib:.2f} GiB, float32 copy {2 * gib:.2f} GiB"
    )
    print(f"{'variant':<14}{'peak MiB':>10}{'extra MiB':>11}{'fwd s':>9}{'bwd s':>9}{'total s':>9}")
    results = {}
    for variant in args.variants.split(","):
        r = _run_variant(variant, args)
        results[variant] = r
        if "error" in r:
            print(f"{variant:<14}{r['error']}")
            continue
        total = r["fwd_s"] + r["bwd_s"]
        print(
            f"{variant:<14}{r['peak_mib']:>10.0f}{r['extra_mib']:>11.0f}{r['fwd_s']:>9.3f}{r['bwd_s']:>9.3f}"
            f"{total:>9.3f}"
        )
    for a, b in (("naive", "chunked"), ("naive", "prealloc"), ("chunked", "prealloc"), ("naive_head", "chunked_head")):
        ra, rb = results.get(a), results.get(b)
        if ra and rb and "error" not in ra and "error" not in rb:
            print(
                f"ratio {a}/{b}: peak {ra['peak_mib'] / rb['peak_mib']:.2f}x, "
                f"extra {ra['extra_mib'] / max(rb['extra_mib'], 1.0):.2f}x, "
                f"time {(ra['fwd_s'] + ra['bwd_s']) / (rb['fwd_s'] + rb['bwd_s']):.2f}x"
            )
    for a, b in (("naive", "chunked"), ("naive", "prealloc"), ("naive_head", "chunked_head")):
        ra, rb = results.get(a), results.get(b)
        if ra and rb and "error" not in ra and "error" not in rb:
            rel = abs(ra["grad_abs_sum"] - rb["grad_abs_sum"]) / max(abs(ra["grad_abs_sum"]), 1e-30)
            print(f"check {a} vs {b}: loss {ra['loss']:.6g} vs {rb['loss']:.6g}, |grad| sum rel. diff {rel:.1e}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
