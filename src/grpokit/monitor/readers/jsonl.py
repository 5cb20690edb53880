"""JSONL metrics files: reading objects, rows (flat or verl's `{"step": N, "data": {...}}`), telling grpokit's,
verl's and W&B's apart, and verl's JSONL file logger."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ...common.bounded_read import open_regular
from .canonical import VERL_MAPPER, RawRows, Reader, Segment, best_flavor, merge_segments, ordered
from .names import VERL_NAMES
from .values import numeric_items, step_of


def _jsonl_values(path: Path) -> Iterator[Any]:
    """The JSON value of each non-blank line of `path`, in order; a line that does not parse is passed over."""
    with open_regular(path) as fb:  # a FIFO or device is refused, not a hang
        for raw in fb:
            line = raw.decode("utf-8", errors="replace").strip()
            if not line:
                continue
            try:
                yield json.loads(line)
            except (json.JSONDecodeError, RecursionError):
                continue  # a line cut by a running writer


def read_jsonl_objects(path: Path) -> list[dict[str, Any]]:
    return [obj for obj in _jsonl_values(path) if isinstance(obj, dict)]


def jsonl_rows(objs: list[dict[str, Any]], step_key: str = "step") -> RawRows:
    """Flat `{"step": N, k: v}` objects, or verl's file logger `{"step": N, "data": {k: v}}`."""
    rows: RawRows = {}
    for obj in objs:
        step = step_of(obj.get(step_key))
        if step is None:
            continue
        data = obj["data"] if isinstance(obj.get("data"), dict) else {k: v for k, v in obj.items() if k != step_key}
        merge_segments(rows, step, numeric_items(data))
    return rows


def jsonl_flavor(path: Path, max_lines: int = 50) -> str | None:
    """'grpokit', 'verl' or 'wandb' for a JSONL metrics file (None if it is none of them)."""
    names: set[str] = set()
    nested = wandb = False
    seen = 0
    for obj in _jsonl_values(path):
        if not isinstance(obj, dict):
            return None
        if "step" not in obj:
            if "_step" in obj:
                wandb = True
                seen += 1
                if seen >= max_lines:
                    break
                continue
            return None
        if isinstance(obj.get("data"), dict):
            nested = True
            names |= set(obj["data"])
        else:
            names |= set(obj) - {"step"}
        seen += 1
        if seen >= max_lines:
            break
    if wandb and not names:
        return "wandb"
    if nested:
        return "verl"
    if not seen:
        return None
    flavor, score = best_flavor(names, ("grpokit", "verl"))
    return flavor if score > 0 else None


class VerlJsonlReader(Reader):
    """verl's JSONL file logger (`{"step": N, "data": {...}}` per line, or flat keys)."""

    name = "verl"

    def runs(self, path: Path) -> list[tuple[str, list[Path]]]:
        if path.is_file() and path.suffix == ".jsonl" and jsonl_flavor(path) == "verl":
            return [("", [path])]
        return []

    def read(self, files: list[Path]) -> list[Segment]:
        rows = jsonl_rows(read_jsonl_objects(files[0]))
        return [Segment(ordered(rows, list(VERL_NAMES)), VERL_MAPPER, "verl")]
