"""A growing training log as a stream of canonical rows: what `grpokit watch` feeds its detectors.

`open_log(path, run)` recognises the log with the doctor's readers (`readers.discover`, the same detection). A log
written line by line — verl's console output or its JSONL file logger, the dicts transformers' Trainer prints for
TRL, a grpokit run's `metrics.jsonl` — is followed by a `LineLog`: each read takes only the bytes appended since
the last one (`tail.Tail`), parses only those lines with the format's own line reader (`VerlConsoleLines`,
`TrlConsoleLines`, `jsonl_rows`), maps their names with the reader's mapper and hands out the rows of new steps. It
holds the newest row (still open: a later line may add to its step), the names seen so far, and nothing of the rows
it handed out, so a log of 10^6 lines is followed in the memory of a short one. Any other log (TensorBoard events,
TRL's `trainer_state.json` that checkpoints rewrite whole, the other trainers' consoles, a folder of several runs,
`--run`) is a `WholeLog`: read again whole each time it changes, as `watch` always did.

Either hands out each step once, in increasing order, and holds the newest row back while the file is still
changing (a line may be half written, an evaluation may join the step) until a later step appears, the file stops
changing, or the caller says the writer is done (`final`).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from .readers import RunLog, read_run, verl_context
from .readers.canonical import NONFINITE_FLAGS, TRL_MAPPER, VERL_MAPPER, Mapper, canonicalise, identity_mapper, ordered
from .readers.console import console_kind
from .readers.console_trl import TrlConsoleLines
from .readers.console_verl import VerlConsoleLines
from .readers.discovery import discover
from .readers.grpokit_run import grpokit_context, yaml_load
from .readers.jsonl import jsonl_rows
from .readers.names import TRL_NAMES, VERL_NAMES
from .readers.values import NAN
from .tail import HEAD_BYTES, Tail, head_text, line_end_before, open_regular, tail_text

Sink = Callable[[int, int, dict[str, float]], None]  # (run index in the file, step, the source's values)

SETTLE_S = 0.5  # a held row goes out after this long without a new byte (its step's lines come together)
_SNIFF_BYTES = 4 << 20  # the head a console log's kind and verl's printed config are read from (as the readers do)
_JSONL_LINES = re.compile(r"\r\n|\r|\n")  # how Python's text files split lines (the JSONL readers iterate a file)


class Log:
    """A followed log: `flavor` and `context` for the detectors, and `rows(final)`, the canonical rows of the steps
    not handed out yet (see the module docstring)."""

    flavor: str | None = None
    context: dict[str, Any]

    def rows(self, final: bool = False) -> Iterator[dict[str, float]]:
        raise NotImplementedError

    def next_read(self, interval: float) -> float:
        """Seconds to wait before the next `rows()`: the watch's interval."""
        return interval


class WholeLog(Log):
    """Read again whole, with the doctor's `read_run`, each time the log changes."""

    def __init__(self, path: Path, run: str | None = None) -> None:
        self.path, self.run = path, run
        self.last_step = 0
        self._signature: tuple[int, float] | None = None
        self._held = False  # the newest row was held back at the last read
        self._first_signature = _signature(path)
        self._first: RunLog | None = read_run(path, run)  # the read that recognised the log, used if still current
        self.flavor, self.context = self._first.flavor, dict(self._first.context)

    def rows(self, final: bool = False) -> Iterator[dict[str, float]]:
        sig = _signature(self.path)
        settled = final or sig == self._signature
        self._signature = sig
        if settled and not self._held and not final:
            return  # nothing new since the last read: a large log is not re-read every poll
        if not self.path.is_dir():
            open_regular(self.path).close()  # a FIFO or a device put in its place is one line, never a blocking read
        first, self._first = self._first, None
        log = first if first is not None and sig == self._first_signature else read_run(self.path, self.run)
        rows = [r for r in log.rows if int(r["step"]) > self.last_step]
        self._held = bool(rows) and not settled
        if self._held:
            rows = rows[:-1]
        for r in rows:
            self.last_step = int(r["step"])
            yield r


def _signature(path: Path) -> tuple[int, float]:
    """(total size, newest mtime) of a file, or of every file under a directory: changes when the log grows."""
    files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
    stats = [p.stat() for p in files]
    return sum(s.st_size for s in stats), max((s.st_mtime for s in stats), default=0.0)


class _JsonlLines:
    """JSONL metrics lines one at a time, through the readers' `jsonl_rows` (flat, or verl's `{"step", "data"}`)."""

    def __init__(self, sink: Sink) -> None:
        self.sink = sink

    def feed(self, line: str) -> None:
        line = line.strip()
        if not line:
            return
        try:
            obj = json.loads(line)
        except (json.JSONDecodeError, RecursionError):
            return  # as the reader: a line that does not parse is passed over
        if isinstance(obj, dict):
            for step, values in jsonl_rows([obj]).items():
                self.sink(0, step, values)


class _VerlLines:
    def __init__(self, sink: Sink) -> None:
        self.sink, self.lines = sink, VerlConsoleLines()

    def feed(self, line: str) -> None:
        row = self.lines.feed(line)
        if row is not None:
            self.sink(*row)


class LineLog(Log):
    """A log written line by line, followed by reading only what was appended (see the module docstring).

    `tail.bytes_read` is what was read of the file since it was opened; `shown` is the path the user gave, for the
    error a second training in the same file gives (as `read_run` says it)."""

    def __init__(
        self,
        file: Path,
        *,
        parser: Callable[[Sink], Any],
        split: Callable[[str], list[str]],
        mapper: Mapper,
        order: list[str] | None,
        flavor: str,
        context: dict[str, Any],
        shown: Path,
    ) -> None:
        self.file, self.shown = file, shown
        self.flavor, self.context = flavor, context
        self.mapper, self.order, self.split, self._parser = mapper, order, split, parser
        self.tail = Tail(file)
        # a line carries its own step (verl's JSONL and console, a grpokit run): reading can start anywhere
        self.seekable = parser in (_JsonlLines, _VerlLines)
        self.last_values: dict[str, float] = {}  # the source's values of the newest row handed out
        self.last_step = 0  # the newest step handed out
        self.runs = 1  # runs the file holds (a console log can hold several trainings one after another)
        self._lines = parser(self._take)
        self._restarts = 0
        self._open: tuple[int, dict[str, float]] | None = None  # the newest row, not handed out yet
        self._done: list[tuple[int, dict[str, float]]] = []  # rows closed by the lines fed, not handed out yet
        self._names: set[str] = set()  # the source's names seen so far
        self._map: dict[str, tuple[str, ...]] = {}  # their canonical names
        self._available: set[str] = set()  # canonical names recorded so far
        self._orders: dict[tuple[str, ...], tuple[str, ...]] = {}  # a row's names -> the readers' order of them

    def _take(self, run: int, step: int, values: dict[str, float]) -> None:
        """A row from the line reader: it joins the open row of its step, or closes that row and opens its own."""
        if run > 0:
            self.runs = max(self.runs, run + 1)
            names = ", ".join(repr(f"#{i + 1}") for i in range(self.runs))
            raise ValueError(f"{self.shown} holds {self.runs} runs ({names}): pick one with --run NAME")
        if self._open is not None and step == self._open[0]:
            self._open[1].update(values)  # later values win, as the readers merge a step
        elif step > max(self.last_step, self._open[0] if self._open else 0):
            if self._open is not None:
                self._done.append(self._open)
            self._open = (step, dict(values))
        # else a step already handed out (or before the open one): the whole-file readers would not feed it again

    def rows(self, final: bool = False) -> Iterator[dict[str, float]]:
        grew = False
        for text in self.tail.blocks():
            grew = True
            if self.tail.restarts != self._restarts:  # the file was truncated or replaced: read it from its start
                self._restarts = self.tail.restarts
                if self._open is not None:  # the old file's last row: complete, since the file moved on
                    self._done.append(self._open)
                    self._open = None
                self._lines = self._parser(self._take)  # steps up to `last_step` are not handed out again
            for line in self.split(text):
                self._lines.feed(line)
            yield from self._hand_out()
        if (final or not grew) and self._open is not None:
            self._done.append(self._open)
            self._open = None
            yield from self._hand_out()

    def seed(self, head_rows: int, tail_rows: int) -> tuple[list[dict[str, float]], int | None]:
        """Start at the log's end: (rows, old). `rows` are at most `head_rows` rows from the log's start and the rows
        of its last `tail_rows` lines (`backlog`), in canonical names, but the newest, held back as always; the
        follower goes on past the last line end. `old` is the offset where the newest row's line starts (the rows
        before it are the backlog's), None when `rows` are the whole log (nothing was left out)."""
        end = line_end_before(self.file, self.file.stat().st_size)
        start, text = tail_text(self.file, end, tail_rows)
        rows = self._rows_of(head_text(self.file, min(start, HEAD_BYTES)), head_rows) if start > 0 else []
        rows += self._rows_of(text, None)
        self.tail.skip_to(end)
        # the old rows end where the newest (held) row's line begins: that row is the live detectors' to judge
        return rows, (line_end_before(self.file, end - 1) if start > 0 else None)

    def _rows_of(self, text: str, limit: int | None) -> list[dict[str, float]]:
        """The rows of `text`'s lines (at most `limit`), read with a fresh line reader as a start over does."""
        self._lines, self._open, rows = self._parser(self._take), None, []
        for line in self.split(text):
            if limit is not None and len(self._done) >= limit:
                break
            self._lines.feed(line)
        if limit is not None:  # the head: its last row is complete (the tail's newest stays open, as any newest)
            if self._open is not None and len(self._done) < limit:
                self._done.append(self._open)
            self._open = None
        rows.extend(self._hand_out())
        self._lines = self._parser(self._take)
        return rows

    def next_read(self, interval: float) -> float:
        """Sooner while a row is held: a line-by-line log hands out only ended lines, so the row waits only for
        lines of its own step, which come together; a short quiet is enough (a read costs a `stat` when nothing
        changed). A row that ends a burst of writing goes out about `interval` + `SETTLE_S` after it was written,
        not 2 x `interval`."""
        return min(interval, SETTLE_S) if self._open is not None else interval

    def _hand_out(self) -> Iterator[dict[str, float]]:
        done, self._done = self._done, []
        for step, values in done:
            self.last_step, self.last_values = step, values
            yield self._canonical(step, values)

    def _canonical(self, step: int, values: dict[str, float]) -> dict[str, float]:
        """One row in canonical names, as `readers.canonicalise` maps a whole log, with the names seen so far: every
        canonical name recorded so far is present (NaN where this row lacks it), and a non-finite flag set so far
        is 0 where its signal is finite."""
        if not self._names.issuperset(values):
            self._names.update(values)
            self._map = self.mapper(self._names)
        if self.order:
            # the readers' key order (mapping-table priority), worked out once per set of names: rows repeat them
            keys = tuple(values)
            order = self._orders.get(keys)
            if order is None:
                if len(self._orders) > 1000:
                    self._orders.clear()
                order = self._orders[keys] = tuple(ordered({0: dict.fromkeys(keys)}, self.order)[0])
            values = {k: values[k] for k in order}
        raw = {step: values}
        mapper = identity_mapper if self.mapper is identity_mapper else self._mapped
        rows, available, _ = canonicalise(raw, mapper)
        self._available |= available
        row = rows[0]
        for signal, flag in NONFINITE_FLAGS.items():
            if flag in self._available and math.isnan(row.get(flag, NAN)):
                row[flag] = 0.0 if math.isfinite(row.get(signal, NAN)) else NAN
        for name in self._available:
            row.setdefault(name, NAN)
        return row

    def _mapped(self, names: Any) -> dict[str, tuple[str, ...]]:
        return {n: self._map[n] for n in names if n in self._map}


def _head_text(file: Path, size: int = _SNIFF_BYTES) -> str:
    with file.open("rb") as f:
        return f.read(size).decode("utf-8", errors="replace")


def open_log(path: Path, run: str | None = None) -> Log:
    """The log at `path` (a file, or a folder holding one run), recognised as the doctor recognises it; ValueError
    as `read_run` gives it when it is not a training log or holds several runs."""
    if not path.is_dir():
        open_regular(path).close()  # NotALogFile: a FIFO, /dev/zero, a socket is one line, never read
    found = discover(path) if run is None else []
    if len(found) == 1:
        _, reader, files = found[0]
        file = files[0]
        common = {"shown": path}
        if reader == "grpokit":
            cfg_path = file.parent / "config.yaml"
            cfg = yaml_load(cfg_path.read_text(encoding="utf-8", errors="replace")) if cfg_path.is_file() else {}
            return LineLog(
                file,
                parser=_JsonlLines,
                split=_JSONL_LINES.split,
                mapper=identity_mapper,
                order=None,
                flavor="grpokit",
                context=grpokit_context(cfg),
                **common,
            )
        if reader == "verl":
            return LineLog(
                file,
                parser=_JsonlLines,
                split=_JSONL_LINES.split,
                mapper=VERL_MAPPER,
                order=list(VERL_NAMES),
                flavor="verl",
                context={},
                **common,
            )
        if reader == "console":
            head = _head_text(file)
            kind = console_kind(head)
            if kind == "verl":
                return LineLog(
                    file,
                    parser=_VerlLines,
                    split=str.splitlines,
                    mapper=VERL_MAPPER,
                    order=list(VERL_NAMES),
                    flavor="verl",
                    context=verl_context(head),
                    **common,
                )
            if kind == "trl-console":
                return LineLog(
                    file,
                    parser=TrlConsoleLines,
                    split=str.splitlines,
                    mapper=TRL_MAPPER,
                    order=list(TRL_NAMES),
                    flavor="trl",
                    context={},
                    **common,
                )
    return WholeLog(path, run)
