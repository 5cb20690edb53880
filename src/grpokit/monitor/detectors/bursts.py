"""Runs of rows at a critical level of one signal: two in a row (the fast rule of advantage collapse), how many in
a row, and the short bursts that came and went (docs/math.md §17.1)."""

from __future__ import annotations

from collections import deque


class Bursts:
    """Rows of one signal (a step's zero-variance fraction) read against `level` (at or above: a high row) and `low`
    (below: a healthy row).

    Rows are in a row when consecutive at the log's own interval: the smallest step gap between two rows of the
    signal so far. Two high rows with a step between them that lacks the signal (a verl line cut short before its
    advantages) are not in a row. A burst is a run of at most `short` high rows in a row that a healthy row ended; the
    steps of those that ended within the last `memory` steps are `recent`."""

    def __init__(self, level: float, low: float, memory: int = 100, short: int = 2) -> None:
        self.level, self.low, self.memory, self.short = level, low, memory, short
        self.last: tuple[int, float] | None = None
        self.gap: int | None = None
        self.high: list[int] = []  # steps of the current run of high rows in a row
        self.ended: deque[int] = deque(maxlen=16)  # first steps of the bursts that cleared

    def add(self, step: int, v: float) -> None:
        if self.last is not None and step == self.last[0]:  # a repeated step replaces its row
            if self.high and self.high[-1] == step:
                self.high.pop()
            if v >= self.level:
                self.high.append(step)
            self.last = (step, v)
            return
        if self.last is not None and step < self.last[0]:  # a restart: the rows before it are another run's
            self.last, self.gap, self.high = None, None, []
            self.ended.clear()
        adjacent = True
        if self.last is not None:
            gap = step - self.last[0]
            self.gap = gap if self.gap is None else min(self.gap, gap)
            adjacent = gap <= self.gap
        if v >= self.level:
            self.high = [*self.high, step] if adjacent else [step]
        else:
            if v < self.low and 0 < len(self.high) <= self.short:
                self.ended.append(self.high[0])
            self.high = []
        self.last = (step, v)

    def in_a_row(self) -> int:
        """High rows in a row up to the latest (0 when the latest is not high)."""
        return len(self.high)

    def recent(self, step: int) -> list[int]:
        """First steps of the bursts that cleared within the last `memory` steps before `step`."""
        return [s for s in self.ended if step - s <= self.memory]
