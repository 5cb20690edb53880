"""Seconds per training step by phase on a fixed config (SmolLM2-135M, 4 prompts x 8 samples x 48 new tokens,
dapo), tokens per second and peak RSS. A benchmark, not a test: it prints figures.

    .venv/bin/python bench/step_throughput.py --steps 4
    .venv/bin/python bench/step_throughput.py --steps 4 --set algo.dynamic_sampling=false --min-new-tokens 48

`--min-new-tokens 48` forces every completion to the full 48 tokens (the worst case, and the shape of the TRL
comparison in the trainer issue: TRL's GRPOTrainer takes about 30 s per step for this config on this CPU).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

PHASES = ["generate", "score", "logprobs", "forward", "backward", "optimizer"]
# TRL 1.16.0 GRPOTrainer on this CPU, same config, measured with bench/trl_compare.py: 26.0 s/step with completions
# forced to 48 tokens (--min-new-tokens 48), 26.9 s/step with natural lengths (about 22 tokens)
TRL_SECONDS_PER_STEP = 26.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=4, help="measured steps (after one warm-up step)")
    ap.add_argument("--model", default="smollm2-135m-instruct")
    ap.add_argument("--recipe", default="dapo")
    ap.add_argument("--task", default="add1")
    ap.add_argument("--min-new-tokens", type=int, default=0, help="force completions to at least this length")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    args = ap.parse_args()

    import torch

    from grpokit.cli import _quiet_libraries
    from grpokit.config import build_config
    from grpokit.trainer import Trainer

    _quiet_libraries()
    if args.threads:
        torch.set_num_threads(args.threads)
    overrides = [
        "rollout.prompts_per_step=4",
        "rollout.group_size=8",
        "rollout.max_new_tokens=48",
        f"train.steps={args.steps + 1}",
        "train.eval_every=0",
        "train.save_every=0",
        *args.set,
    ]
    cfg = build_config(args.recipe, overrides=overrides, **{"model.name": args.model, "data.task": args.task})
    with tempfile.TemporaryDirectory() as tmp:
        trainer = Trainer(cfg, Path(tmp))
        if args.min_new_tokens:
            trainer.engine.min_new_tokens = args.min_new_tokens
        rows = []
        for i in range(args.steps + 1):
            m = trainer.train_step()
            trainer.step += 1
            if i > 0:
                rows.append(m)
            print(
                f"step {i}{' (warm-up)' if i == 0 else ''}: {m['time/step']:.2f} s, "
                f"{m.get('sampling/rounds', 1):.0f} generation round(s), mean length {m['length/mean']:.1f}",
                file=sys.stderr,
            )
    med = {p: statistics.median(r.get(f"time/{p}", 0.0) for r in rows) for p in PHASES}
    step = statistics.median(r["time/step"] for r in rows)
    print(
        f"config: {args.recipe}, {args.model}, 4 prompts x 8 samples x 48 max new tokens, precision "
        f"{trainer.precision.name}, torch threads {torch.get_num_threads()}"
    )
    print(f"median seconds per step: {step:.2f}  (over {len(rows)} steps)")
    for p in PHASES:
        print(f"  {p:<10} {med[p]:7.2f} s  {med[p] / step:6.1%}")
    other = step - sum(med.values())
    print(f"  {'other':<10} {other:7.2f} s  {other / step:6.1%}")
    tps = statistics.median(r["perf/tokens_per_s"] for r in rows)
    print(f"tokens per second (prompt + completion, whole step): {tps:.1f}")
    print(
        f"generated tokens per second (generate phase): "
        f"{statistics.median(r['perf/gen_tokens_per_s'] for r in rows):.1f}"
    )
    print(f"mean completion length: {statistics.median(r['length/mean'] for r in rows):.1f} tokens")
    print(f"peak RSS: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")
    print(
        f"vs TRL 1.16 GRPOTrainer's {TRL_SECONDS_PER_STEP:.1f} s/step measured on this CPU (48 forced tokens): "
        f"{TRL_SECONDS_PER_STEP / step:.2f}x"
    )


if __name__ == "__main__":
    main()
