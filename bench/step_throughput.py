"""Seconds per training step by phase on a fixed config (SmolLM2-135M, 4 prompts x 8 samples x 48 new tokens,
dapo), tokens per second and peak RSS. A benchmark, not a test: it prints figures.

    .venv/bin/python bench/step_throughput.py --steps 4
    .venv/bin/python bench/step_throughput.py --steps 4 --set algo.group_filter=all --min-new-tokens 48
    .venv/bin/python bench/step_throughput.py --steps 4 --set rollout.engine=vllm --set algo.group_filter=all

With `--set rollout.engine=X` (X other than the default `hf`) the same config also runs on the default engine,
one after the other in this process, and the table compares the two: every ratio is measured in the same run.
`--min-new-tokens 48` (= `rollout.min_new_tokens`) forces every completion to the full 48 tokens.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

PHASES = ["generate", "weight_sync", "score", "logprobs", "forward", "backward", "optimizer"]
DEFAULT_ENGINE = "hf"


def run_engine(args: argparse.Namespace, engine: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Warm-up step + `args.steps` measured steps on `engine`; returns the measured rows and run facts."""
    import time

    from grpokit.config import build_config
    from grpokit.training.trainer import Trainer

    overrides = [
        "rollout.prompts_per_step=4",
        "rollout.group_size=8",
        "rollout.max_new_tokens=48",
        f"rollout.min_new_tokens={args.min_new_tokens}",
        f"train.steps={args.steps + 1}",
        "train.eval_every=0",
        "train.save_every=0",
        *[s for s in args.set if not s.startswith("rollout.engine=")],
        f"rollout.engine={engine}",
    ]
    cfg = build_config(args.recipe, overrides=overrides, **{"model.name": args.model, "data.task": args.task})
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        trainer = Trainer(cfg, Path(tmp))
        setup = time.perf_counter() - t0
        rows = []
        for i in range(args.steps + 1):
            m = trainer.train_step().metrics
            trainer.step += 1
            if i > 0:
                rows.append(m)
            print(
                f"[{engine}] step {i}{' (warm-up)' if i == 0 else ''}: {m['time/step']:.2f} s, "
                f"{m.get('sampling/rounds', 1):.0f} generation round(s), mean length {m['length/mean']:.1f}",
                file=sys.stderr,
            )
        facts = {"precision": trainer.precision.name, "setup_s": setup}
        model = getattr(trainer, "model", None)
        if model is not None:  # for the update's MFU (bench/gpu_check.py)
            facts["params"] = sum(p.numel() for p in model.parameters())
        trainer.rewards.close()
    return rows, facts


def summarize(rows: list[dict[str, Any]]) -> dict[str, float]:
    med = {p: statistics.median(r.get(f"time/{p}", 0.0) for r in rows) for p in PHASES}
    med["step"] = statistics.median(r["time/step"] for r in rows)
    med["tokens_per_s"] = statistics.median(r["perf/tokens_per_s"] for r in rows)
    med["gen_tokens_per_s"] = statistics.median(r["perf/gen_tokens_per_s"] for r in rows)
    med["length"] = statistics.median(r["length/mean"] for r in rows)
    return med


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=4, help="measured steps (after one warm-up step)")
    ap.add_argument("--model", default="smollm2-135m-instruct")
    ap.add_argument("--recipe", default="dapo")
    ap.add_argument("--task", default="add1")
    ap.add_argument("--min-new-tokens", type=int, default=0, help="rollout.min_new_tokens: force this length")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    args = ap.parse_args()

    import torch

    from grpokit.cli.main import _quiet_libraries

    _quiet_libraries()
    if args.threads:
        torch.set_num_threads(args.threads)
    chosen = next((s.split("=", 1)[1] for s in args.set if s.startswith("rollout.engine=")), DEFAULT_ENGINE)
    engines = [DEFAULT_ENGINE] + ([chosen] if chosen != DEFAULT_ENGINE else [])
    results = {}
    for e in engines:
        rows, facts = run_engine(args, e)
        results[e] = (summarize(rows), facts, len(rows))
    print(
        f"config: {args.recipe}, {args.model}, 4 prompts x 8 samples x 48 max new tokens "
        f"(min {args.min_new_tokens}), torch threads {torch.get_num_threads()}, {args.steps} measured steps each"
    )
    print(f"{'median seconds':<22}" + "".join(f"{e:>14}" for e in engines))
    for key in ["step", *PHASES]:
        print(f"  {key:<20}" + "".join(f"{results[e][0][key]:14.2f}" for e in engines))
    for key, label in [
        ("gen_tokens_per_s", "generated tokens/s"),
        ("tokens_per_s", "tokens/s (step)"),
        ("length", "mean length"),
    ]:
        print(f"  {label:<20}" + "".join(f"{results[e][0][key]:14.1f}" for e in engines))
    print(f"  {'set-up (s)':<20}" + "".join(f"{results[e][1]['setup_s']:14.1f}" for e in engines))
    print(f"  {'precision':<20}" + "".join(f"{results[e][1]['precision']:>14}" for e in engines))
    if len(engines) == 2:
        a, b = (results[e][0] for e in engines)
        print(
            f"{chosen} vs {DEFAULT_ENGINE}, same run: generate phase {a['generate'] / b['generate']:.2f}x faster, "
            f"generated tokens/s {b['gen_tokens_per_s'] / a['gen_tokens_per_s']:.2f}x, "
            f"whole step {a['step'] / b['step']:.2f}x"
        )
    print(f"peak RSS (whole process): {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
