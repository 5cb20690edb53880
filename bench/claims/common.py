"""Shared by the claim scripts (`bench/claims/c*.py`, issue 14): launch `grpokit` runs as subprocesses, one at a
time (2 cores: parallel torch jobs slow each other by up to 27x; `--lock FILE` waits on a shared flock first), read
their `metrics.jsonl`, summarise figures across seeds, and call `grpokit compare`.

Every claim script takes `--out DIR` (default `runs/claims/<claim>`), `--seeds`, `--lock`, and writes
`<out>/result.md`: the setting, the command, a table of figures (mean and spread across seeds) and a verdict, the
block `docs/results.md` holds."""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import statistics
import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
# the claims' common batch: 4 prompts x 8 samples x 32 tokens, dynamic sampling off, held-out eval every 8 steps
SMALL_BATCH = [
    "rollout.prompts_per_step=4",
    "rollout.group_size=8",
    "rollout.max_new_tokens=32",
    "algo.group_filter=all",
    "train.eval_every=8",
]


def parser(claim: str, doc: str | None) -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(ROOT / "runs" / "claims" / claim), help="where runs and result.md go")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1], help="seeds per arm")
    ap.add_argument("--lock", default=None, help="flock this file around each run (shared CPU)")
    ap.add_argument("--model", default="smollm2-135m-instruct")
    return ap


@contextmanager
def locked(path: str | None) -> Iterator[None]:
    if path is None:
        yield
        return
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def grpokit(args: Sequence[str], lock: str | None) -> subprocess.CompletedProcess:
    """`python -m grpokit ARGS` (offline, like the tests), failing loudly with the tail of its stderr."""
    env = {**os.environ, "HF_HUB_OFFLINE": os.environ.get("HF_HUB_OFFLINE", "1")}
    cmd = [sys.executable, "-m", "grpokit", *args]
    print("$", " ".join(cmd[1:]), flush=True)
    with locked(lock):
        p = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
    if p.returncode != 0:
        raise SystemExit(f"failed ({p.returncode}): {' '.join(args)}\n{p.stderr[-3000:]}")
    return p


def train(
    run_dir: Path,
    recipe: str,
    sets: Sequence[str],
    *,
    steps: int,
    seed: int,
    model: str,
    lock: str | None,
    task: str = "add1",
    extra: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """One training run into `run_dir` (reused when it already finished those `steps`: the scripts can be re-run to
    resume, and a longer budget re-trains)."""
    if not finished(run_dir, steps):
        if run_dir.exists():
            import shutil

            shutil.rmtree(run_dir)
        args = ["train", "--recipe", recipe, "--task", task, "--model", model, "--steps", str(steps)]
        args += ["--seed", str(seed), "--output-dir", str(run_dir), *extra]
        grpokit([*args, *[x for s in sets for x in ("--set", s)]], lock)
    return read_rows(run_dir)


def finished(run_dir: Path, steps: int) -> bool:
    """Whether `run_dir` holds a finished run of exactly `steps` steps."""
    if not (run_dir / "final").exists():
        return False
    return max((int(r["step"]) for r in step_rows(read_rows(run_dir))), default=0) == steps


def run_arms(
    out: Path,
    arm_sets: dict[str, tuple[str, str, int, list[str]]],
    seeds: Sequence[int],
    *,
    model: str,
    lock: str | None,
    task: str = "add1",
) -> tuple[dict[str, list[list[dict[str, Any]]]], list[Path]]:
    """Train every arm (label -> (directory stem, recipe, steps, overrides)) under every seed into
    `out/<stem>_s<seed>`; returns (label -> each seed's rows, the run directories in order)."""
    arms: dict[str, list[list[dict[str, Any]]]] = {}
    dirs: list[Path] = []
    for label, (stem, recipe, steps, sets) in arm_sets.items():
        for seed in seeds:
            d = out / f"{stem}_s{seed}"
            rows = train(d, recipe, sets, steps=steps, seed=seed, model=model, lock=lock, task=task)
            arms.setdefault(label, []).append(rows)
            dirs.append(d)
    return arms, dirs


def read_rows(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines() if x.strip()]


def step_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The training steps' rows (eval-only rows have no generate time)."""
    return [r for r in rows if "time/generate" in r]


def spread(values: Sequence[float]) -> str:
    """'mean (min-max)' across seeds, or the one value."""
    vals = [float(v) for v in values]
    if len(vals) == 1:
        return f"{vals[0]:.3f}"
    return f"{statistics.fmean(vals):.3f} ({min(vals):.3f}-{max(vals):.3f})"


def compare(runs: Sequence[Path], out: Path, x: str, lock: str | None) -> None:
    grpokit(["compare", *map(str, runs), "--x", x, "--out", str(out)], lock)


def write_result(out: Path, title: str, lines: Sequence[str]) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    path = out / "result.md"
    text = "\n".join([f"### {title}", "", *lines, ""]).replace(f"{ROOT}/", "")  # paths as a reader's checkout has them
    path.write_text(text)
    print(path.read_text())
    return path


def last_mean(rows: list[dict[str, Any]], key: str, n: int) -> float:
    """Mean of `key` over the last `n` rows that have it (NaN when none)."""
    vals = [float(r[key]) for r in rows if r.get(key) is not None][-n:]
    return statistics.fmean(vals) if vals else float("nan")


def final(rows: list[dict[str, Any]], key: str) -> float:
    vals = [float(r[key]) for r in rows if r.get(key) is not None]
    return vals[-1] if vals else float("nan")


def arms_table(arms: dict[str, list[list[dict[str, Any]]]], figures: dict[str, Any]) -> list[str]:
    """Markdown rows: one per arm, one column per figure (`figures`: label -> f(rows) -> float), mean (min-max)
    across the arm's seeds."""
    head = "| arm | " + " | ".join(figures) + " |"
    lines = [head, "|---" * (len(figures) + 1) + "|"]
    for arm, runs in arms.items():
        cells = [spread([f(rows) for rows in runs]) for f in figures.values()]
        lines.append(f"| {arm} | " + " | ".join(cells) + " |")
    return lines


def arm_means(arms: dict[str, list[list[dict[str, Any]]]], f: Any) -> dict[str, float]:
    return {arm: statistics.fmean(f(rows) for rows in runs) for arm, runs in arms.items()}
