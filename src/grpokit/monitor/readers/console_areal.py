"""AReaL's console (inclusionAI/AReaL): `StatsLogger.commit` prints "Epoch e/E Step s/S Train step N/M done." and
then the step's stats as a `tabulate` grid (`areal/utils/stats_logger.py:135-162`, `areal/utils/printing.py`):
`│ key │ value │` cells, four pairs a row, values as `.4e`. N is 1-based (AReaL's trackers get N - 1). Names:
`names_more.AREAL_NAMES`."""

from __future__ import annotations

import re
from pathlib import Path

from .canonical import RawRows, Segment
from .console_text import NUMBER, TextLogReader, in_table_order, merge, number, read_text, table_mapper
from .names_more import AREAL_NAMES

_DONE = re.compile(r"Train step (\d+)/(\d+) done\.")
_CELL = re.compile(r"│\s*([A-Za-z_][^\s│]*)\s*│\s*(" + NUMBER + r")\s*(?=│)")


def areal_rows(text: str) -> RawRows:
    """AReaL console text -> rows: the grid cells after each "Train step N/M done." line belong to step N."""
    rows: RawRows = {}
    step: int | None = None
    for line in text.splitlines():
        if "Train step" in line and (m := _DONE.search(line)):
            step = int(m.group(1))
        elif step is not None and "│" in line:
            values = {k: v for k, raw in _CELL.findall(line) if (v := number(raw)) is not None}
            if values:
                merge(rows, step, values)
    return in_table_order(rows, AREAL_NAMES)


class ArealReader(TextLogReader):
    """AReaL's printed output (a trainer's log with its stats tables)."""

    name = "areal"

    def claims(self, head: str) -> bool:
        return bool(_DONE.search(head)) and bool(areal_rows(head))

    def read(self, files: list[Path]) -> list[Segment]:
        rows = areal_rows(read_text(files[0]))
        return [Segment(rows, table_mapper(AREAL_NAMES), "areal", "", {}, {}, [])]
