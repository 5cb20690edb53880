"""Detection latency of the system detectors (issue 47 item 2), by `bench/latency.py`'s splicing method: each system
failure bent into the corpus' healthy runs (`latency.healthy_runs`) at the onset step k of `latency.onset_step`, on
the trainer's own metric names, read through the reader's mapper and fed to the detectors as `grpokit watch` feeds
them, at logging intervals 1, 5 and 10. A base counts for an injection when it logs the signal the injection bends
(`Sys.needs`, the trainer's names); the mismatch jump adds verl's `training/rollout_probs_diff_mean` to the verl bases
(no corpus log carries a mismatch signal): 0.003 (verl_console.log's level), x10 from k.

    .venv/bin/python bench/system_latency.py                         # table on stdout (markdown)

Per injection and interval: bases measured, median logged rows from the onset to the first alert of the owning
detector (1 = the first row at or after k; a base whose kept rows from k hold no bent signal is not scored), misses,
and the alerts the same detector raised on the unbent bases (false alarms).
Reads logs only."""

from __future__ import annotations

import math
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from latency import Base, feed, healthy_runs, onset_step, subsample  # noqa: E402

INTERVALS = (1, 5, 10)
SEGMENT = 60
Row = dict[str, float]


@dataclass(frozen=True)
class Sys:
    """A system failure bent into a base from step k: `bend(row, t)` changes the raw row of step k + t in place."""

    name: str
    detector: str
    needs: tuple[str, ...]  # the trainer's raw names, one of which the base must log
    bend: Callable[[Row, int], None]


def _scale(row: Row, keys: tuple[str, ...], f: float) -> None:
    for k in keys:
        if isinstance(row.get(k), float) and math.isfinite(row[k]):
            row[k] *= f


def _gen_bound(row: Row, t: int) -> None:
    """Generation 6x slower: verl timing_s/gen (and the step by the same seconds)."""
    g = row.get("timing_s/gen")
    if isinstance(g, float) and math.isfinite(g):
        row["timing_s/gen"] = 6 * g
        for k in ("timing_s/step", "perf/time_per_step"):
            if k in row:
                row[k] += 5 * g


def _learner_bound(row: Row, t: int) -> None:
    """The update 10x slower (micro-batch 1): verl timing_s/update_actor, the step by the same seconds."""
    u = row.get("timing_s/update_actor")
    if isinstance(u, float) and math.isfinite(u):
        row["timing_s/update_actor"] = 10 * u
        for k in ("timing_s/step", "perf/time_per_step"):
            if k in row:
                row[k] += 9 * u


def _memory_growth(row: Row, t: int) -> None:
    """Peak memory growing 0.5 GB per step from k (a response length that grows, at a fixed GB per token)."""
    for k in ("perf/max_memory_allocated_gb", "perf/max_memory_reserved_gb"):
        if isinstance(row.get(k), float):
            row[k] += 0.5 * (t + 1)


def _throughput(row: Row, t: int) -> None:
    """Half the tokens/s (verl perf/throughput), the step time (TRL step_time, verl timing_s/step) doubled."""
    _scale(row, ("perf/throughput",), 0.5)
    _scale(row, ("step_time", "timing_s/step", "perf/time_per_step"), 2.0)


def _noop(row: Row, t: int) -> None:
    """Gradient norm exactly 0 (TRL grad_norm, verl actor/grad_norm) with the advantages as they were."""
    for k in ("grad_norm", "actor/grad_norm"):
        if k in row:
            row[k] = 0.0


def add_probs_diff(row: Row, t: int | None) -> None:
    """verl's mean |p_sampler - p_learner| at 0.003 (x10 from k: t is not None)."""
    row["training/rollout_probs_diff_mean"] = 0.003 * (1.0 + 0.1 * math.sin(len(row))) * (10 if t is not None else 1)


INJECTIONS = (
    Sys("generation-bound", "time_split", ("timing_s/gen",), _gen_bound),
    Sys("learner-bound", "time_split", ("timing_s/update_actor",), _learner_bound),
    Sys("memory growth", "memory_headroom", ("perf/max_memory_allocated_gb",), _memory_growth),
    Sys("throughput halved", "throughput_regression", ("perf/throughput", "step_time", "timing_s/step"), _throughput),
    Sys("no-op update", "noop_update", ("grad_norm", "actor/grad_norm"), _noop),
    Sys("mismatch jump after sync", "sync_mismatch", ("timing_s/gen",), lambda r, t: add_probs_diff(r, t)),
)


def logs(base: Base, names: tuple[str, ...]) -> bool:
    return any(n in r for r in base.raw.values() for n in names)


def prepared(inj: Sys, base: Base) -> dict[int, Row]:
    """The base's rows as the injection starts from (the mismatch signal added at its healthy level)."""
    raw = {s: dict(r) for s, r in base.raw.items()}
    if inj.detector == "sync_mismatch":
        for r in raw.values():
            add_probs_diff(r, None)
    return raw


def splice(inj: Sys, base: Base) -> tuple[int, dict[int, Row]]:
    """(k, rows): the base's rows before k, then `SEGMENT` steps of its own rows (mirrored past its end) bent."""
    k, src = onset_step(base), prepared(inj, base)
    steps = sorted(src)
    out = {s: r for s, r in src.items() if s < k}
    start = next((i for i, s in enumerate(steps) if s >= k), len(steps))
    period = 2 * (len(steps) - 1) or 1
    for t in range(SEGMENT):
        j = (start + t) % period
        row = dict(src[steps[j if j < len(steps) else period - j]])
        inj.bend(row, t)
        out[k + t] = row
    return k, out


def rows_to_alert(inj: Sys, base: Base, interval: int) -> int | None:
    """Logged rows from k to the first alert of the injection's detector at or after k (None: no alert; -1: the rows
    kept from k on do not hold the signal, not scored)."""
    k, raw = splice(inj, base)
    kept = subsample(raw, interval)
    if not any(n in kept[s] for s in kept if s >= k for n in inj.needs):
        return -1  # the rows kept at this interval do not hold the signal (verl's validation rows cut at 4,096 chars)
    fired = [a.fired_at for a in feed(base, kept) if a.detector == inj.detector and a.fired_at >= k]
    if inj.name in ("generation-bound", "learner-bound"):
        fired = [a.fired_at for a in feed(base, kept) if a.mode == inj.name and a.fired_at >= k]
    return sum(1 for s in kept if k <= s <= min(fired)) if fired else None


def false_alarms(inj: Sys, base: Base) -> list[str]:
    """Alerts of the injection's detector on the unbent base (the added mismatch signal at its healthy level)."""
    return [f"{a.mode} @{a.fired_at}" for a in feed(base, prepared(inj, base)) if a.detector == inj.detector]


def table() -> str:
    bases = healthy_runs()
    out = [
        "| injection | detector | bases | rows to alert, interval 1 / 5 / 10 (median) | missed | false alarms |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for inj in INJECTIONS:
        mine = [b for b in bases if logs(b, inj.needs) and len(b.steps) >= 30]
        cells, missed = [], 0
        for i in INTERVALS:
            got = [g for b in mine if (g := rows_to_alert(inj, b, i)) != -1]
            missed += sum(1 for g in got if g is None)
            hit = [g for g in got if g is not None]
            cells.append(f"{statistics.median(hit):g}" if hit else "-")
        fa = [f"{b.run}: {x}" for b in mine for x in false_alarms(inj, b)]
        names = ", ".join(b.run for b in mine)
        out.append(
            f"| {inj.name} | {inj.detector} | {len(mine)} ({names}) | {' / '.join(cells)} | {missed} | "
            f"{len(fa)}{' (' + '; '.join(fa) + ')' if fa else ''} |"
        )
    return "\n".join(out)


if __name__ == "__main__":
    print(table())
