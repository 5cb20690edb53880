"""Healthy runs that look like failures (issue 47 item 4): real healthy corpus logs bent, in the trainer's own metric
names, into the shapes of healthy runs that got false criticals, then fed to the detectors as `grpokit watch` feeds
rows (`bench/latency.py`'s `feed`); and the false criticals on the whole corpus (`tests/fixtures/logs/real/`: every
critical alert whose mode the run's truth does not list).

The shapes, each spliced into `verl_grpo_opd_qwen2p5_3b_179_steps` (verl GRPO with a code tool, 179 steps; its own
rows kept, its signals bent from `K`):

- `converged`: a run that solved its prompts: from `K`, four steps in five have every group all-correct (score min =
  max = mean = 1, every advantage 0) and the fifth a score mean of 0.9 with its own advantages. The task is learned.
- `held-out rising`: verl's documented PPO reference run on GSM8K in shape: entropy falling linearly from 0.53 at step
  1 to 0.05 at the last step, the train score flat at 0.55 +- 0.02, and a held-out accuracy
  (`val-core/openai/gsm8k/acc/mean@1`) every 10 steps rising from 0.30 to 0.58.
- `one prompt per step`: a tool-calling run with one prompt per step and low entropy by design: entropy falling from
  0.20 to 0.015 over the run, and each step's one group either all-correct (score min = max = 1, advantages 0) or mixed
  (score mean 0.5), all-correct on a share of steps rising from 30% to 70%.
- `bursts`: every advantage exactly 0 on isolated steps B, B+2, B+6, B+7 (B = 101; verl's alternating pattern, steps
  423, 425, 429, 430 of an unseen run) among healthy rows; `bursts, a line cut`: the same with the row of step B+1
  cut before its advantages (as this run cuts its lines at steps 10, 20, ... at 4,096 characters), so B and B+2 are
  adjacent rows of the signal.
- `bursts, then a collapse that holds` (a failure, for contrast): the bursts, then every advantage 0 from B+30 on.

    .venv/bin/python bench/healthy_runs.py              # the table (markdown) on stdout

Reads logs only (no torch).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import latency  # noqa: E402

from grpokit.monitor.doctor.corpus import corpus_runs, diagnoses_by_key, read_source  # noqa: E402

BASE = "verl_grpo_opd_qwen2p5_3b_179_steps"
K = 100
B = 101  # the first burst: rows 101, 103, 107, 108 hold their advantages (110, 120, ... are lines cut short)
HELD_OUT = "val-core/openai/gsm8k/acc/mean@1"
SCORE = ("critic/score/mean", "critic/score/min", "critic/score/max")
ADV = ("critic/advantages/min", "critic/advantages/max", "critic/advantages/mean")
COMMAND = ".venv/bin/python bench/healthy_runs.py"


def _solved(row: dict[str, float]) -> None:
    """Every group of the step all-correct: every score 1, every advantage 0."""
    row.update(dict.fromkeys(SCORE, 1.0))
    row.update(dict.fromkeys(ADV, 0.0))


def _all_zero(row: dict[str, float]) -> None:
    """Every advantage of the step exactly 0 (every group's scores equal, at the step's own mean)."""
    row.update(dict.fromkeys(ADV, 0.0))
    row["critic/score/min"] = row["critic/score/max"] = row["critic/score/mean"]


def converged(raw: dict[int, dict[str, float]]) -> None:
    for s, row in raw.items():
        if s >= K:
            _solved(row) if (s - K) % 5 else row.update({"critic/score/mean": 0.9})


def held_out_rising(raw: dict[int, dict[str, float]]) -> None:
    first, last = min(raw), max(raw)
    for s, row in raw.items():
        t = (s - first) / (last - first)
        row["actor/entropy"] = 0.53 + (0.05 - 0.53) * t
        row["critic/score/mean"] = 0.55 + 0.02 * math.sin(s)
        if s % 10 == 0:
            row[HELD_OUT] = round(0.30 + (0.58 - 0.30) * t, 3)


def one_prompt_per_step(raw: dict[int, dict[str, float]]) -> None:
    first, last = min(raw), max(raw)
    for s, row in raw.items():
        t = (s - first) / (last - first)
        row["actor/entropy"] = 0.20 + (0.015 - 0.20) * t
        # all-correct on a share of steps rising from 30% to 70%, spread evenly (a low-discrepancy sequence)
        if (s * 0.618034) % 1.0 < 0.3 + 0.4 * t:
            _solved(row)
        else:
            row.update({"critic/score/mean": 0.5, "critic/score/min": 0.0, "critic/score/max": 1.0})


def bursts(raw: dict[int, dict[str, float]], cut: bool = False, holds: bool = False) -> None:
    for s in (B, B + 2, B + 6, B + 7):
        _all_zero(raw[s])
    if cut:
        for name in [n for n in raw[B + 1] if n.startswith(("critic/", "response_length/", "prompt_length/"))]:
            del raw[B + 1][name]
    if holds:
        for s in raw:
            if s >= B + 30 and "critic/score/mean" in raw[s]:
                _all_zero(raw[s])


SHAPES: dict[str, Callable[[dict[int, dict[str, float]]], None]] = {
    "converged": converged,
    "held-out rising": held_out_rising,
    "one prompt per step": one_prompt_per_step,
    "bursts": bursts,
    "bursts, a line cut": lambda raw: bursts(raw, cut=True),
    "bursts, then a collapse that holds": lambda raw: bursts(raw, holds=True),
}
FAILING = frozenset({"bursts, then a collapse that holds"})


def base() -> latency.Base:
    (b,) = latency.healthy_runs(latency.CORPUS, [BASE])
    return b


def shaped(name: str, b: latency.Base | None = None) -> tuple[latency.Base, dict[int, dict[str, float]]]:
    """The base and its rows bent into shape `name` (a copy)."""
    b = b or base()
    raw = {s: dict(r) for s, r in b.raw.items()}
    SHAPES[name](raw)
    return b, raw


def alerts(name: str, b: latency.Base | None = None) -> list[Any]:
    b, raw = shaped(name, b)
    return latency.feed(b, raw)


def corpus_false_criticals(root: Path = latency.CORPUS) -> list[str]:
    """Every critical alert on the corpus whose mode the run's truth does not list: '<run> <key>: <mode> at <step>'."""
    out = []
    for name in corpus_runs(root):
        truth = read_source(root / name)["truth"]
        for key, d in diagnoses_by_key(root / name).items():
            want = set(truth.get(key, {}).get("modes", []))
            out += [
                f"{name} {key}: {a['mode']} at step {a['fired_at']}"
                for a in d["alerts"]
                if a["severity"] == "critical" and a["mode"] not in want
            ]
    return out


def _cell(a: Any) -> str:
    """An alert as '<mode> <severity> at <step>', the step it became critical and the one it cleared at."""
    crit = latency.critical_step(a)
    up = f", critical at {crit}" if crit is not None and crit != a.fired_at else ""
    return f"{a.mode} {a.severity} at {a.fired_at}{up}" + ("" if a.cleared_at is None else f" (cleared {a.cleared_at})")


def main() -> int:
    b = base()
    print("| shape | healthy | criticals | alerts (mode, severity, step) |")
    print("| --- | --- | --- | --- |")
    for name in SHAPES:
        al = alerts(name, b)
        crit = [a for a in al if a.severity == "critical"]
        cells = "; ".join(_cell(a) for a in al) or "none"
        print(f"| {name} | {'no' if name in FAILING else 'yes'} | {len(crit)} | {cells} |")
    fc = corpus_false_criticals()
    print(f"\nFalse criticals on the corpus ({len(corpus_runs(latency.CORPUS))} runs): {len(fc)}")
    for line in fc:
        print(f"- {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
