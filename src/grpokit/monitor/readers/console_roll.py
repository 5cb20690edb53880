"""ROLL's console (alibaba/ROLL): with the `stdout` tracker, each step's metrics are one log line
`metrics_tag: {"step": N, "metrics": {...}}` (`roll/utils/tracking.py:161`, JSON, reduction tags already stripped),
behind ROLL's logger prefix. N is ROLL's `global_step` (0-based), the step its other trackers get. Names:
`names_more.ROLL_NAMES` and `ROLL_PATTERNS` (the per-domain in-reward KL)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from .canonical import RawRows, Segment, table_mapper
from .console_text import TextLogReader, in_table_order, merge, read_text
from .names_more import ROLL_NAMES, ROLL_PATTERNS
from .values import numeric_items, step_of

_TAG = re.compile(r"metrics_tag: (\{.*\})\s*$")


def metrics_line(line: str) -> tuple[int, dict[str, float]] | None:
    """(step, {ROLL name: value}) of a `metrics_tag:` line; None for any other line."""
    if "metrics_tag:" not in line or not (m := _TAG.search(line)):
        return None
    try:
        obj = json.loads(m.group(1))
    except (json.JSONDecodeError, RecursionError):
        return None
    if not isinstance(obj, dict) or not isinstance(obj.get("metrics"), dict):
        return None
    step = step_of(obj.get("step"))
    return None if step is None else (step, numeric_items(obj["metrics"]))


def roll_rows(text: str) -> RawRows:
    """ROLL console text -> rows by step (a step printed twice keeps the later values)."""
    rows: RawRows = {}
    for line in text.splitlines():
        if found := metrics_line(line):
            merge(rows, *found)
    return in_table_order(rows, ROLL_NAMES)


class RollReader(TextLogReader):
    """ROLL's printed output with the `stdout` tracker."""

    name = "roll"

    def claims(self, head: str) -> bool:
        return any(metrics_line(line) for line in head.splitlines() if "metrics_tag:" in line)

    def read(self, files: list[Path]) -> list[Segment]:
        rows = roll_rows(read_text(files[0]))
        return [Segment(rows, table_mapper(ROLL_NAMES, ROLL_PATTERNS), "roll", "", {}, {}, [])]
