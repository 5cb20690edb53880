"""One run as the report and `grpokit compare` see it: canonical rows (any log `readers.py` understands), the
grpokit config, what the run recorded about itself (`run.json`), its alerts and sampled completions, and the
x axes runs are lined up on.

X axes (`X_AXES`), each a running sum over the training rows so that runs of different recipes and lengths line up:

- `steps`: the training step;
- `samples`: generated completions, `reward/sampled_n` per step (every generation round of dynamic sampling);
- `tokens`: generated completion tokens, `perf/gen_tokens` per step (every round; eval generations excluded);
- `seconds`: wall seconds spent in steps and evaluations, `time/step` + `time/eval` per row.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import metric_names as M
from ..common.bounded_read import LOG_LIMIT, UnreadableInput, loads_json, read_json, read_text
from ..run.directory import run_end
from .readers import RunLog, read_run, read_runs

SKIPPED = M.TRAIN_SKIPPED_UPDATE


@dataclass(frozen=True)
class XAxis:
    """How one x axis is built: per-row increments of `keys`, summed."""

    label: str  # axis label with unit
    keys: tuple[str, ...]  # per-step increments; empty = the step itself


X_AXES: dict[str, XAxis] = {
    "steps": XAxis("training step", ()),
    "samples": XAxis("generated samples (cumulative)", (M.REWARD_SAMPLED_N,)),
    "tokens": XAxis("generated tokens (cumulative)", (M.PERF_GEN_TOKENS,)),
    "seconds": XAxis("wall time (s, cumulative step + eval time)", (M.TIME_STEP, M.TIME_EVAL)),
}


def finite(v: Any) -> float | None:
    """`v` as a float when it is a finite number, else None."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    f = float(v)
    return f if math.isfinite(f) else None


@dataclass
class RunData:
    """Everything a report or a comparison draws for one run."""

    name: str
    path: Path
    source: str
    rows: list[dict[str, Any]]
    config: dict[str, Any] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)  # run.json: device, precision, wall time
    alerts: list[dict[str, Any]] = field(default_factory=list)  # alerts.jsonl rows (mode, severity, step, ...)
    # interventions.jsonl rows of `--autopilot`: kind intervention (step, action, before, after, reason), followup
    # (metrics after), unable (mode, why, needs)
    interventions: list[dict[str, Any]] = field(default_factory=list)
    completions: list[dict[str, Any]] = field(default_factory=list)
    skipped_completions: int = 0  # completion rows without a text or an integer step, left out
    outcome: dict[str, Any] | None = None  # how a grpokit run ended (grpokit.run.outcome); None for other logs

    def cfg(self, dotted: str, default: Any = None) -> Any:
        """A config value by `section.key`, or `default` when the log carries no such value."""
        node: Any = self.config
        for part in dotted.split("."):
            if not isinstance(node, dict) or part not in node:
                return default
            node = node[part]
        return node

    @property
    def training_rows(self) -> list[dict[str, Any]]:
        """Rows of training steps (step >= 1); the step-0 row holds only the evaluation before training."""
        return [r for r in self.rows if int(r["step"]) >= 1]

    def series(self, key: str, x: dict[int, float] | None = None) -> tuple[list[float], list[float]]:
        """(x, values) of one metric; x defaults to the step. A metric logged on most training steps gets NaN on
        the training steps that lack it (a plotted line breaks there instead of joining over, e.g. a skipped
        update has no gradient norm); a sparse one (held-out accuracy) keeps only its logged points."""
        train = self.training_rows
        logged = sum(finite(r.get(key)) is not None for r in train)
        dense = logged * 2 >= len(train) > 0
        xs, ys = [], []
        for r in self.rows:
            v = finite(r.get(key))
            step = int(r["step"])
            if v is None and not (dense and step >= 1):
                continue
            xs.append(x[step] if x is not None else float(step))
            ys.append(math.nan if v is None else v)
        if not any(math.isfinite(y) for y in ys):
            return [], []
        return xs, ys

    def skipped_steps(self) -> list[int]:
        """Steps whose update was skipped (no gradient step: no group with a learning signal)."""
        return [int(r["step"]) for r in self.rows if (finite(r.get(SKIPPED)) or 0.0) >= 1.0]

    def total(self, key: str) -> float | None:
        vals = [v for r in self.rows if (v := finite(r.get(key))) is not None]
        return sum(vals) if vals else None


def x_positions(run: RunData, axis: str) -> dict[int, float]:
    """Step -> position on `axis` (a name of `X_AXES`); ValueError naming the run and the missing metric."""
    if axis not in X_AXES:
        raise ValueError(f"--x {axis!r}: unknown x axis; choose one of {', '.join(X_AXES)}")
    spec = X_AXES[axis]
    if not spec.keys:
        return {int(r["step"]): float(r["step"]) for r in run.rows}
    if not any(finite(r.get(spec.keys[0])) is not None for r in run.rows):
        raise ValueError(f"--x {axis}: run {run.name!r} ({run.source} log) does not log {spec.keys[0]}; use --x steps")
    pos, total = {}, 0.0
    for r in run.rows:
        total += sum(finite(r.get(k)) or 0.0 for k in spec.keys)
        pos[int(r["step"])] = total
    return pos


def _jsonl(path: Path) -> list[dict[str, Any]]:
    """The JSON objects of a JSONL file; other lines (torn, not JSON, not an object) are left out."""
    if not path.is_file():
        return []
    out = []
    for line in read_text(path, LOG_LIMIT, errors="replace").splitlines():
        try:
            obj = loads_json(line, str(path))
        except (json.JSONDecodeError, UnreadableInput):
            continue
        if isinstance(obj, dict):
            out.append(obj)
    return out


def _run_info(run_dir: Path) -> dict[str, Any]:
    """run.json; for runs written before it existed, the precision recorded in the newest checkpoint."""
    path = run_dir / "run.json"
    if path.exists():
        try:
            info = read_json(path)  # bounded: a FIFO or /dev/zero as run.json is refused, not read
        except (OSError, ValueError):
            return {}  # unreadable: the report goes without what the run recorded about itself
        return info if isinstance(info, dict) else {}
    from ..run.checkpoint import recorded_precision

    try:
        precision = recorded_precision(run_dir)
    except (OSError, ValueError):
        precision = None
    return {"precision": precision, "precision_from": "checkpoint"} if precision else {}


def is_completion(row: dict[str, Any]) -> bool:
    """A completions.jsonl row the report can show: a text and an integer step."""
    step = row.get("step")
    return isinstance(row.get("text"), str) and isinstance(step, int) and not isinstance(step, bool)


def _from_log(log: RunLog) -> RunData:
    run_dir = log.path if log.path.is_dir() else log.path.parent
    grpokit = log.source == "grpokit"
    name = log.name or (run_dir.name if log.path.is_dir() else log.path.name)
    samples = [c for c in _jsonl(run_dir / "completions.jsonl") if "text" in c] if grpokit else []
    return RunData(
        name=name,
        path=log.path,
        source=log.source,
        rows=log.rows,
        config=log.config,
        info=_run_info(run_dir) if grpokit else {},
        alerts=_jsonl(run_dir / "alerts.jsonl") if grpokit else [],
        interventions=_jsonl(run_dir / "interventions.jsonl") if grpokit else [],
        completions=[c for c in samples if is_completion(c)],
        skipped_completions=sum(not is_completion(c) for c in samples),
        outcome=run_end(run_dir) if grpokit else None,
    )


def load_run(path: str | Path, run: str | None = None) -> RunData:
    """Read one run (ValueError when PATH holds none or several and `run` does not pick one)."""
    return _from_log(read_run(path, run))


def load_runs(path: str | Path) -> list[RunData]:
    """Every run under PATH (a run directory, a log file, or a folder of runs), each read on its own."""
    return [_from_log(log) for log in read_runs(path)]
