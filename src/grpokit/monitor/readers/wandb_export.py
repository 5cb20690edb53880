"""W&B run-history exports: the UI's CSV (one or several runs), the API's history as CSV / JSON / JSONL."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path
from typing import Any

from .canonical import (
    FLAVORS,
    OPENRLHF_MAPPER,
    TRL_MAPPER,
    TRL_TB_MAPPER,
    VERL_MAPPER,
    RawRows,
    Reader,
    Segment,
    best_flavor,
    identity_mapper,
    merge_segments,
    ordered,
    table_or_prefixed,
)
from .jsonl import jsonl_flavor, read_jsonl_objects
from .names import TRL_NAMES, TRL_TB_PREFIXES, VERL_NAMES
from .values import step_of, to_float

_WANDB_STEP_COLUMNS = ("train/global_step", "trainer/global_step", "global_step", "Step", "step", "_step")
_WANDB_SKIP = re.compile(r"(__MIN|__MAX|_runtime|_timestamp|_wandb.*)$")


def _wandb_records_to_runs(records: list[dict[str, Any]]) -> dict[str, RawRows]:
    """W&B history records (CSV rows or JSON objects) -> raw rows per run. The UI's panel export names columns
    `<run name> - <metric>` (several runs in one file) with `__MIN`/`__MAX` companions; the API export
    (`run.history()`, `scan_history()`) has plain metric names and `_step`. TRL's `train/global_step` is the
    trainer's step (W&B's `_step` counts log calls) and wins when present."""
    cols = {k for r in records for k in r}
    step_col = next((c for c in _WANDB_STEP_COLUMNS if c in cols), None)
    if step_col is None:
        return {}
    runs: dict[str, RawRows] = {}
    for r in records:
        step = step_of(r.get(step_col))
        if step is None:
            continue
        for k, v in r.items():
            if k == step_col or k in _WANDB_STEP_COLUMNS or _WANDB_SKIP.search(str(k)):
                continue
            run, sep, metric = str(k).partition(" - ")
            if not sep:
                run, metric = "", str(k)
            f = to_float(v) if not (isinstance(v, str) and not v.strip()) else None
            if f is None or (isinstance(v, str) and not v.strip()):
                continue
            merge_segments(runs.setdefault(run, {}), step, {metric: f})
    return runs


class WandbReader(Reader):
    """W&B run-history exports: the UI's CSV download (one or several runs), the API's `run.history()` saved as
    CSV or JSON (records with `_step`), or JSONL of such records."""

    name = "wandb"

    def _records(self, path: Path) -> list[dict[str, Any]] | None:
        suffix = path.suffix.lower()
        if suffix == ".csv":
            try:
                with path.open(encoding="utf-8", errors="replace", newline="") as f:
                    reader = csv.DictReader(f)
                    if not reader.fieldnames or not any(c in _WANDB_STEP_COLUMNS for c in reader.fieldnames):
                        return None
                    return list(reader)
            except (csv.Error, OSError):
                return None
        if suffix == ".json":
            try:
                obj = json.loads(path.read_text(encoding="utf-8"))
            except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
                return None
            if isinstance(obj, dict) and isinstance(obj.get("history"), list):
                obj = obj["history"]
            if isinstance(obj, list) and obj and all(isinstance(x, dict) for x in obj):
                if any(c in obj[0] for c in _WANDB_STEP_COLUMNS):
                    return obj
            return None
        if suffix == ".jsonl" and jsonl_flavor(path) == "wandb":
            return read_jsonl_objects(path)
        return None

    def runs(self, path: Path) -> list[tuple[str, list[Path]]]:
        if not path.is_file():
            return []
        recs = self._records(path)
        return [("", [path])] if recs and _wandb_records_to_runs(recs) else []

    def read(self, files: list[Path]) -> list[Segment]:
        runs = _wandb_records_to_runs(self._records(files[0]) or [])
        return [keyed_segment(rows, run if len(runs) > 1 else "") for run, rows in runs.items()]


#: the flavours a tracker's keys can be in (W&B, MLflow, trackio get what the trainer logged, as it logged it)
TRACKER_FLAVORS = ("grpokit", "trl", "verl", "openrlhf", "roll", "areal")


def keyed_segment(rows: RawRows, name: str = "") -> Segment:
    """A run's rows as a tracker holds them (W&B, MLflow, trackio: the trainer's own keys), mapped with the table
    of the flavour whose mapping knows the most keys (`best_flavor`, as for TensorBoard tags); TRL's keys are
    read bare (`reward`, MLflow) or with transformers' `train/` / `eval/` prefixes (W&B, trackio)."""
    keys = {k for r in rows.values() for k in r}
    flavor, score = best_flavor(keys, TRACKER_FLAVORS)
    trl = table_or_prefixed(TRL_MAPPER, TRL_TB_MAPPER)
    if len(trl(keys)) > score:  # TRL's keys logged bare (transformers' MLflow callback adds no `train/`)
        flavor = "trl"
    if flavor == "trl":
        rows = ordered(rows, [pre + n for pre, _ in TRL_TB_PREFIXES for n in TRL_NAMES] + list(TRL_NAMES))
        mapper = trl
    elif flavor == "verl":
        rows, mapper = ordered(rows, list(VERL_NAMES)), VERL_MAPPER
    elif flavor == "openrlhf":
        mapper = OPENRLHF_MAPPER
    elif flavor in ("roll", "areal"):
        mapper = FLAVORS[flavor][0]
    else:
        mapper = identity_mapper
    return Segment(rows, mapper, flavor, name)
