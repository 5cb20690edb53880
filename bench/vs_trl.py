"""grpokit against TRL's GRPOTrainer on the identical config, in one invocation, with the ratio measured in that run.

Config: SmolLM2-135M-Instruct (the embedded model), the add1 prompts, dapo loss, 4 prompts x 8 samples x 48 new
tokens forced with `rollout.min_new_tokens` (TRL: `generation_kwargs` min_new_tokens / vLLM min_tokens), dynamic
sampling off, one optimizer step per batch, seed 0. Each variant runs in its own subprocess (so each framework's
peak RSS is its own, read with os.wait4), one warm-up step then `--steps` measured steps; variants alternate A/B
over `--rounds` rounds (order reversed every other round) and each cell is the median (min-max) over all measured
steps of all rounds.

    .venv/bin/python bench/vs_trl.py --lock /tmp/torch.lock                      # grpokit hf vs TRL bf16, 2 rounds
    .venv/bin/python bench/vs_trl.py --variants grpokit:hf,grpokit:vllm,trl:bf16,trl:fp32 --steps 2 --rounds 2
    .venv/bin/python bench/vs_trl.py --steps 1 --rounds 1                        # smoke run
    .venv/bin/python bench/vs_trl.py --variants grpokit:hf,grpokit:hf-stale1,trl:fp32   # CPUs without bf16

`grpokit:hf-stale1` is `hf` with `rollout.max_staleness=1`: step k+1's batch is sampled during step k's update
(one step off-policy, corrected by the recipe's importance weights); the other variants are synchronous, as TRL's
GRPOTrainer is.

`--lock PATH` runs every worker under `flock PATH` (exclusive timings on a shared machine; the lock is free
between workers). Phases: grpokit's own step timers (generate, score + log-prob passes, forward, backward,
optimizer); TRL's by timing its `_generate`, `_generate_and_score_completions` and `training_step`
(bench/trl_worker.py).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
COLUMNS = ["step", "generate", "score", "fwd+bwd", "forward", "backward", "optimizer", "rest"]
SAMPLES_PER_STEP = 32
GRPOKIT_PRECISIONS = ("auto", "fp32", "bf16-autocast", "bf16")


@dataclass(frozen=True)
class Variant:
    """One side of the race: which framework and its setting."""

    framework: str  # grpokit | trl
    setting: str  # grpokit: rollout.engine[/model.precision]; trl: bf16 | fp32 | vllm-bf16 | vllm-fp32

    @property
    def name(self) -> str:
        return f"{self.framework}:{self.setting}"


def parse_variant(text: str) -> Variant:
    fw, _, setting = text.partition(":")
    ok = {"grpokit": ("hf", "hf-generate", "vllm", "hf-stale1"), "trl": ("bf16", "fp32", "vllm-bf16", "vllm-fp32")}
    base, _, precision = setting.partition("/")
    if fw not in ok or base not in ok[fw] or (precision and (fw != "grpokit" or precision not in GRPOKIT_PRECISIONS)):
        choices = ", ".join(f"{f}:{s}" for f, ss in ok.items() for s in ss)
        raise argparse.ArgumentTypeError(
            f"--variants: {text!r} is not one of {choices} (grpokit ones may add /PRECISION, one of "
            f"{', '.join(GRPOKIT_PRECISIONS)}, e.g. grpokit:hf/bf16-autocast)"
        )
    return Variant(fw, setting)


# ----------------------------------------------------------------------------------------------- workers


def grpokit_rows(args: argparse.Namespace, setting: str) -> tuple[list[dict[str, float]], dict[str, Any]]:
    """grpokit's measured steps in the table's phases (bench/step_throughput.py does the run)."""
    from step_throughput import run_engine

    import grpokit

    ns = argparse.Namespace(
        steps=args.steps,
        min_new_tokens=args.min_new_tokens,
        recipe="dapo",
        model=args.model,
        task="add1",
        set=["algo.group_filter=all", f"rollout.max_new_tokens={args.max_new_tokens}", *args.set],
    )
    if args.reward == "parity":  # random weights: a reward that varies in every group (bench/race_reward.py)
        ns.set.append(f"reward.functions=[{HERE / 'race_reward.py'}:parity]")
    engine, _, precision = setting.partition("/")
    if precision:
        ns.set.append(f"model.precision={precision}")
    if engine == "hf-stale1":  # generation overlapped with learning; train.steps large so every measured step overlaps
        engine = "hf"
        ns.set += ["rollout.max_staleness=1", "train.steps=100"]
    rows, facts = run_engine(ns, engine)
    out = []
    for m in rows:
        t = {k.removeprefix("time/"): float(v) for k, v in m.items() if k.startswith("time/")}
        row = {
            "step": t["step"],
            "generate": t.get("generate", 0.0),
            "score": t.get("score", 0.0) + t.get("logprobs", 0.0),
            "forward": t.get("forward", 0.0),
            "backward": t.get("backward", 0.0),
            "optimizer": t.get("optimizer", 0.0),
            "tokens": SAMPLES_PER_STEP * float(m["length/mean"]),
        }
        row["fwd+bwd"] = row["forward"] + row["backward"]
        row["rest"] = row["step"] - row["generate"] - row["score"] - row["fwd+bwd"] - row["optimizer"]
        out.append(row)
    facts["train_tokens"] = statistics.median(SAMPLES_PER_STEP * prompt_tokens(args.model) + r["tokens"] for r in out)
    return out, {**facts, "framework": f"grpokit {getattr(grpokit, '__version__', '')}".strip()}


def prompt_tokens(model: str) -> float:
    """Mean prompt tokens of the race's add1 prompts (chat template), for the update's token count."""
    from decode_table import prompts
    from transformers import AutoTokenizer

    from grpokit.models import ensure_embedded_model

    path = ensure_embedded_model() if model == "smollm2-135m-instruct" else model
    ps = prompts(AutoTokenizer.from_pretrained(path, local_files_only=True), SAMPLES_PER_STEP)
    return sum(map(len, ps)) / len(ps)


def run_worker(args: argparse.Namespace) -> None:
    """In the worker subprocess: run one variant and write its rows and facts to `args.result` as JSON."""
    v = parse_variant(args.worker)
    sys.path.insert(0, str(HERE))
    if v.framework == "grpokit":
        from grpokit.cli.main import _quiet_libraries

        _quiet_libraries()
        rows, facts = grpokit_rows(args, v.setting)
    else:
        from trl_worker import run_trl

        vllm = v.setting.startswith("vllm-")
        rows, facts = run_trl(
            args.steps + 1,
            v.setting.removeprefix("vllm-"),
            vllm=vllm,
            min_new=args.min_new_tokens,
            max_new=args.max_new_tokens,
            model_path=None if args.model == "smollm2-135m-instruct" else args.model,
            reward_kind=args.reward,
        )
    import torch

    facts["threads"] = torch.get_num_threads()
    Path(args.result).write_text(json.dumps({"rows": rows, "facts": facts}))


def spawn(v: Variant, args: argparse.Namespace) -> dict[str, Any]:
    """Run one variant in a subprocess; its rows, facts, peak RSS (MiB, os.wait4) and exit status."""
    with tempfile.TemporaryDirectory() as tmp:
        result = Path(tmp) / "result.json"
        cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", v.name, "--result", str(result)]
        cmd += ["--steps", str(args.steps), "--min-new-tokens", str(args.min_new_tokens)]
        cmd += ["--max-new-tokens", str(args.max_new_tokens), "--model", args.model, "--reward", args.reward]
        cmd += [f"--set={s}" for s in args.set]
        if args.lock:
            cmd = ["flock", args.lock, *cmd]
        env = {**os.environ, "HF_HUB_OFFLINE": os.environ.get("HF_HUB_OFFLINE", "1")}
        print(f"--- {v.name}: {' '.join(cmd)}", file=sys.stderr, flush=True)
        proc = subprocess.Popen(cmd, env=env, stdout=sys.stderr)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        out: dict[str, Any] = {"rss_mib": usage.ru_maxrss / 1024, "rc": proc.returncode}
        if result.exists():
            out.update(json.loads(result.read_text()))
        return out


# ------------------------------------------------------------------------------------------------ table


def cell(values: list[float]) -> str:
    """'median (min-max)' in seconds, or '' when the phase was not measured."""
    if not values:
        return ""
    med = statistics.median(values)
    return f"{med:.2f} ({min(values):.2f}-{max(values):.2f})" if len(values) > 1 else f"{med:.2f}"


def summarize(rows: list[dict[str, float]]) -> dict[str, float]:
    """Medians of every column plus tokens/s (completion tokens of a step / its seconds, median over steps)."""
    med = {c: statistics.median(r[c] for r in rows) for c in COLUMNS if all(c in r for r in rows)}
    med["tokens_per_s"] = statistics.median(r["tokens"] / r["step"] for r in rows)
    return med


def best_trl(results: dict[str, dict[str, Any]]) -> str | None:
    """The TRL variant with the lowest median s/step (the ratio's denominator), None when none ran."""
    trl = {k: summarize(v["rows"])["step"] for k, v in results.items() if k.startswith("trl:") and v["rows"]}
    return min(trl, key=trl.__getitem__) if trl else None


def table(results: dict[str, dict[str, Any]]) -> str:
    """A markdown table: per variant, median (min-max) seconds per phase, tokens/s, peak RSS, TRL-best / it."""
    ref = best_trl(results)
    ref_step = summarize(results[ref]["rows"])["step"] if ref else None
    head = ["variant", "precision", *[f"{c} s" for c in COLUMNS], "tokens/s", "peak RSS MiB", "start-up s"]
    head.append(f"speed-up vs {ref}" if ref else "speed-up")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, res in results.items():
        rows = res["rows"]
        if not rows:
            lines.append(f"| {name} | failed (exit {res['rc']}) |" + " |" * (len(head) - 2))
            continue
        s = summarize(rows)
        cells = [cell([r[c] for r in rows]) if c in s else "" for c in COLUMNS]
        ratio = f"{ref_step / s['step']:.2f}x" if ref_step else ""
        facts = res["facts"]
        lines.append(
            f"| {name} | {facts.get('precision', '')} | " + " | ".join(cells) + f" | {s['tokens_per_s']:.0f} | "
            f"{max(res['rss_mib']):.0f} | {statistics.median(res['setup_s']):.0f} | {ratio} |"
        )
    return "\n".join(lines)


def merge(acc: dict[str, dict[str, Any]], name: str, one: dict[str, Any]) -> None:
    """Add one round's worker result to the variant's rows, RSS and start-up times."""
    r = acc.setdefault(name, {"rows": [], "rss_mib": [], "setup_s": [], "facts": {}, "rc": 0})
    r["rows"] += one.get("rows", [])
    r["rss_mib"].append(one["rss_mib"])
    r["rc"] = r["rc"] or one["rc"]
    if "facts" in one:
        r["facts"] = one["facts"]
        r["setup_s"].append(one["facts"].get("setup_s", float("nan")))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--variants", default="grpokit:hf,trl:bf16", help="comma-separated framework:setting list")
    ap.add_argument("--steps", type=int, default=2, help="measured steps per variant and round (after a warm-up)")
    ap.add_argument("--rounds", type=int, default=2, help="A/B rounds (order reversed every other round)")
    ap.add_argument("--min-new-tokens", type=int, default=48, help="forced completion length (rollout.min_new_tokens)")
    ap.add_argument("--max-new-tokens", type=int, default=48)
    ap.add_argument("--model", default="smollm2-135m-instruct", help="the embedded model, or a local model directory")
    ap.add_argument("--reward", default="exact", choices=["exact", "parity"], help="parity: for random weights")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="extra grpokit config override")
    ap.add_argument("--lock", default=None, help="run each worker under `flock LOCK` (exclusive timings)")
    ap.add_argument("--json", default=None, help="also write the raw per-step results here")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--result", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        return run_worker(args)
    variants = [parse_variant(t) for t in args.variants.split(",") if t]
    results: dict[str, dict[str, Any]] = {}  # first round in the order given
    for rnd in range(args.rounds):
        for v in variants if rnd % 2 == 0 else variants[::-1]:
            merge(results, v.name, spawn(v, args))
    print(
        f"config: dapo, SmolLM2-135M-Instruct, 4 prompts x 8 samples x {args.max_new_tokens} new tokens "
        f"(min {args.min_new_tokens}), dynamic sampling off; {args.rounds} round(s) x {args.steps} measured step(s)"
    )
    print(table(results))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
