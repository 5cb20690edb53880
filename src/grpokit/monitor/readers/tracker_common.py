"""What the readers of the trackers' own stores (W&B run directories, MLflow stores, trackio databases) share: the
step of a logged row, the detectors' context from the store's config, and the one line that names a missing
client."""

from __future__ import annotations

import ast
import math
import sqlite3
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .canonical import RawRows, Segment, merge_segments
from .grpokit_run import grpokit_context
from .values import to_float
from .wandb_export import keyed_segment

#: a row's step: TRL's trainer step (transformers' W&B / trackio callbacks add `train/global_step`; W&B's `_step`
#: counts log calls), else the step the tracker was given
STEP_KEYS = ("train/global_step", "trainer/global_step", "global_step")


def missing_client(what: str, module: str, package: str) -> ValueError:
    """The one line `grpokit doctor` prints when a store's client is not installed."""
    return ValueError(
        f"{what}: reading it needs the {module} package, which is not installed "
        f"(pip install '{package}', or pip install 'grpokit[trackers]')"
    )


def numbers(items: Iterable[tuple[str, Any]]) -> dict[str, float]:
    """The numeric values of (key, value) pairs (booleans and strings like `NaN` count; media, tables do not)."""
    out = {}
    for k, v in items:
        if isinstance(v, (dict, list)):
            continue
        f = to_float(v)
        if f is not None:
            out[k] = f
    return out


def add_row(rows: RawRows, tracker_step: int | None, values: dict[str, float]) -> None:
    """One logged row at its step (`STEP_KEYS` win over the tracker's step); a row with neither is dropped."""
    step = next((values[k] for k in STEP_KEYS if k in values and math.isfinite(values[k])), None)
    if step is None:
        if tracker_step is None:
            return
        step = tracker_step
    merge_segments(rows, int(step), {k: v for k, v in values.items() if k not in STEP_KEYS})


def trl_context(cfg: dict[str, Any]) -> dict[str, Any]:
    """The detectors' context from TRL's `GRPOConfig` as a tracker keeps it (transformers' callbacks log the
    training arguments as the run's config): sampling temperature, completion length, clip range, PPO epochs
    (`num_iterations`) and optimizer steps per generation batch."""
    ctx: dict[str, Any] = {}
    for src, dst in (("temperature", "temperature"), ("max_completion_length", "max_new_tokens")):
        if isinstance(cfg.get(src), (int, float)) and not isinstance(cfg.get(src), bool):
            ctx[dst] = cfg[src]
    eps = cfg.get("epsilon")
    if isinstance(eps, (int, float)):
        ctx["eps_low"] = eps
        high = cfg.get("epsilon_high")
        ctx["eps_high"] = high if isinstance(high, (int, float)) else eps
    if isinstance(cfg.get("num_iterations"), int):
        ctx["epochs"] = cfg["num_iterations"]
    spg, ga = cfg.get("steps_per_generation"), cfg.get("gradient_accumulation_steps")
    if isinstance(spg, int) and isinstance(ga, int) and ga > 0:
        ctx["mini_batches"] = max(spg // ga, 1)
    return ctx


def store_segment(rows: RawRows, cfg: dict[str, Any], name: str, notes: list[str], where: str) -> Segment:
    """A run of a tracker's store: keys mapped by the table that knows the most of them (`keyed_segment`); the
    store's config (`where` says where it was) is grpokit's full config for a grpokit run, TRL's training arguments
    for the detectors' context of a TRL run."""
    seg = keyed_segment(rows, name)
    seg.notes = list(notes)
    if cfg and seg.flavor == "grpokit":
        seg.config, seg.context = cfg, grpokit_context(cfg)
        seg.notes.append(f"config read from {where}")
    elif cfg and seg.flavor == "trl":
        seg.context = trl_context(cfg)
        if seg.context:
            seg.notes.append(f"TRL's training arguments read from {where}")
    return seg


SQLITE_MAGIC = b"SQLite format 3\0"


def sqlite_tables(path: Path) -> set[str] | None:
    """The table names of an SQLite file, opened read-only (None when it is not one; ValueError when a writer
    holds it locked for over 2 s)."""
    try:
        with path.open("rb") as f:
            if f.read(16) != SQLITE_MAGIC:
                return None
    except OSError:
        return None
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=2)
        try:
            return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        finally:
            conn.close()
    except sqlite3.OperationalError as e:
        if "locked" in str(e):  # an exclusive writer (trackio, MLflow never hold it long)
            raise ValueError(f"{path}: an SQLite database its writer keeps locked ({e}); try again") from None
        return None
    except sqlite3.Error:
        return None


def sqlite_snapshot(path: Path, dest: Path, what: str) -> None:
    """A consistent copy of an SQLite database (`sqlite3`'s backup API, through a read-only connection: the
    writer's WAL included, the original untouched); a database locked for longer than 10 s is one line."""
    try:
        src = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=10)
        try:
            dst = sqlite3.connect(dest)
            try:
                src.backup(dst)
            finally:
                dst.close()
        finally:
            src.close()
    except sqlite3.Error as e:
        raise ValueError(f"{path} ({what}): cannot be read now ({e}); try again when its writer pauses") from None


def param_value(text: str) -> Any:
    """A parameter a tracker stored as text (`str(value)`: MLflow params) back as the value: None, booleans,
    numbers, Python literals; anything else stays text."""
    s = text.strip()
    if s in ("None", "null"):
        return None
    if s in ("True", "False", "true", "false"):
        return s in ("True", "true")
    for conv in (int, float):
        try:
            return conv(s)
        except ValueError:
            pass
    if s[:1] in "[{(\"'" and len(s) < 100_000:
        try:
            return ast.literal_eval(s)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            pass
    return text


def unflatten(flat: dict[str, Any]) -> dict[str, Any]:
    """Dotted keys (`algo.eps_high`, as grpokit's MLflow tracker logs its config) as nested dicts."""
    out: dict[str, Any] = {}
    for key in sorted(flat, key=lambda k: k.count(".")):
        node, parts = out, key.split(".")
        for part in parts[:-1]:
            nxt = node.setdefault(part, {})
            if not isinstance(nxt, dict):
                break
            node = nxt
        else:
            node[parts[-1]] = flat[key]
    return out
