"""trackio's local store: one SQLite database per project (`<project>.db` in `TRACKIO_DIR`, by default
`~/.cache/huggingface/trackio`), read through a read-only connection with the schema trackio writes
(`trackio/sqlite_storage.py`, `SQLiteStorage.init_db`).

Tables read: `metrics` (one row per `trackio.log` call: `run_name`, `step`, and the logged dict as JSON in
`metrics`, NaN and infinities written as the strings "NaN", "Infinity"; TRL's `train/global_step` wins over
trackio's own step, which counts log calls when none is given) and `configs` (the `config` given to
`trackio.init`, as JSON). trackio 0.24 added a `run_id` column that tells apart runs of the same name; older
databases (trackio >= 0.2) have run names only, and are read by name. trackio's own read functions
(`SQLiteStorage.get_logs`) address a project inside `TRACKIO_DIR` and open the database for writing (pragmas,
migrations), so they are not used: reading needs no trackio install. A database locked past 10 s is one line.
A folder (`TRACKIO_DIR`) holds one database per project; each is read.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from .canonical import RawRows, Reader, Segment
from .tracker_common import add_row, numbers, sqlite_tables, store_segment

_MAX_ROWS = 5_000_000


def _columns(conn: sqlite3.Connection, table: str) -> set[str]:
    return {r[1] for r in conn.execute(f"PRAGMA table_info({table})")}


def _is_trackio(path: Path) -> bool:
    tables = sqlite_tables(path) or set()
    if "metrics" not in tables or "runs" in tables:  # MLflow's store has a `metrics` table too
        return False
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=2)
        try:
            return {"run_name", "step", "metrics"} <= _columns(conn, "metrics")
        finally:
            conn.close()
    except sqlite3.Error:
        return False


def _json(blob: Any) -> Any:
    try:
        return json.loads(blob)
    except (ValueError, TypeError, RecursionError):
        return None


def read_trackio_db(path: Path) -> list[tuple[str, RawRows, dict[str, Any], list[str]]]:
    """(run name, raw rows, config, notes) of each run of a trackio database, in the order they were first logged."""
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=10)
    except sqlite3.Error as e:
        raise ValueError(f"{path} (a trackio database): cannot be opened ({e})") from None
    try:
        by_id = "run_id" in _columns(conn, "metrics")
        key = "run_id" if by_id else "run_name"
        runs: dict[str, tuple[str, RawRows]] = {}
        notes: list[str] = []
        cur = conn.execute(f"SELECT {key}, run_name, step, metrics FROM metrics ORDER BY id LIMIT {_MAX_ROWS + 1}")
        for i, (rid, name, step, blob) in enumerate(cur):
            if i == _MAX_ROWS:
                notes.append(f"{path.name}: read the first {_MAX_ROWS} logged rows only")
                break
            values = _json(blob)
            if isinstance(values, dict):
                rows = runs.setdefault(str(rid), (str(name), {}))[1]
                add_row(rows, step if isinstance(step, int) else None, numbers(values.items()))
        configs: dict[str, dict[str, Any]] = {}
        if "configs" in (sqlite_tables(path) or set()) and key in _columns(conn, "configs"):
            for rid, blob in conn.execute(f"SELECT {key}, config FROM configs"):
                cfg = _json(blob)
                if isinstance(cfg, dict):
                    configs[str(rid)] = {k: v for k, v in cfg.items() if not str(k).startswith("_")}
    except sqlite3.OperationalError as e:
        raise ValueError(f"{path} (a trackio database): cannot be read now ({e})") from None
    finally:
        conn.close()
    return [(name, rows, configs.get(rid, {}), notes) for rid, (name, rows) in runs.items()]


class TrackioReader(Reader):
    """A trackio project database (`<project>.db`): each run in it, named `#<run name>` when there are several."""

    name = "trackio"

    def runs(self, path: Path) -> list[tuple[str, list[Path]]]:
        return [("", [path])] if path.is_file() and path.suffix == ".db" and _is_trackio(path) else []

    def read(self, files: list[Path]) -> list[Segment]:
        runs = read_trackio_db(files[0])
        names = [name for name, _, _, _ in runs]
        segs = []
        for i, (name, rows, cfg, notes) in enumerate(runs):
            label = name if names.count(name) == 1 else f"{name} ({names[: i + 1].count(name)})"
            note = f"trackio project {files[0].stem}, run {label}"
            segs.append(
                store_segment(
                    rows, cfg, f"#{label}" if len(runs) > 1 else "", [note, *notes], "the trackio run's config"
                )
            )
        return segs
