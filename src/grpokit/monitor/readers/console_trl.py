"""The per-step dicts transformers' Trainer prints for TRL / Unsloth / ms-swift, among progress bars: steps from
the dict, the progress bar or the logging interval, and a printed file split into its trainings."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .canonical import RawRows, merge_segments
from .values import ANSI_ESCAPE, dict_at, numeric_items, step_of

# TRL / transformers: the Trainer prints each log as a Python dict (`{'loss': 0.1, 'reward': ...}`); ms-swift as JSON
TRL_DICT = re.compile(r"\{\s*['\"](?:loss|reward|train_runtime|eval_loss|learning_rate|grad_norm)['\"]\s*:")
# a tqdm bar's counter: `| 12/300 [00:41<...`
# (?<!\d) and at most 12 digits: one try per run of digits (not one per digit), and no int() of a 10^5-digit number
_BAR = re.compile(r"(?<!\d)(\d{1,12})/(\d{1,12}) \[")
TRAINER_START = re.compile(r"\*\*\*\*\* Running training \*\*\*\*\*|Num examples = ")


_RL_KEYS = ("reward", "kl", "entropy", "frac_reward_zero_std", "reward_std", "completion_length")


def _is_rl_row(d: dict[str, Any]) -> bool:
    return any(k in d or any(str(x).startswith(k) for x in d) for k in _RL_KEYS) or any(
        str(k).startswith(("rewards/", "completions/", "clip_ratio")) for k in d
    )


def _dict_step(d: dict[str, Any], bar: tuple[int, int] | None) -> tuple[int | None, int | None]:
    """(step, total steps) of a printed dict: its `global_step/max_steps` (ms-swift) or `step` entry, else the
    counter of the progress bar printed since the previous dict; (None, None) when none says."""
    gs = d.get("global_step/max_steps")
    if isinstance(gs, str) and "/" in gs:
        a, _, b = gs.partition("/")
        return step_of(a), step_of(b)
    if step_of(d.get("step")) is not None:
        return step_of(d.get("step")), None
    if bar is not None:
        return bar
    return None, None


@dataclass
class _Segmenter:
    """Rows of printed dicts collected into runs (see `trl_console_segments`), or handed to `sink(run index, step,
    values)` as they come when one is given (then `segments` holds each closed run's notes, its rows empty)."""

    segments: list[tuple[RawRows, list[str]]] = field(default_factory=list)
    rows: RawRows = field(default_factory=dict)
    sink: Callable[[int, int, dict[str, float]], None] | None = None
    written: bool = False  # the current run has a row
    kind: bool | None = None  # whether the current run's rows are RL rows
    total: int | None = None  # the progress bar's total steps
    last_step: int | None = None
    interval: int = 1
    inferred: int = 0  # rows whose step was inferred from the logging interval
    known: int = 0  # rows whose step was printed

    def close(self) -> None:
        """End the current run (if it has rows), with a note on how many steps were inferred."""
        if self.written:
            notes = []
            if self.inferred and not self.known:
                notes.append(
                    "this console log prints no step numbers or progress bars for these rows: they are numbered "
                    "1, 2, ... and the logging interval is unknown"
                )
            elif self.inferred:
                notes.append(
                    f"{self.inferred} of {self.inferred + self.known} rows had no progress bar: their step was inferred"
                )
            self.segments.append((self.rows, notes))
        self.rows, self.written, self.inferred, self.known, self.last_step = {}, False, 0, 0, None
        self.interval, self.total, self.kind = 1, None, None

    def add_eval(self, d: dict[str, Any], step: int | None) -> None:
        """An evaluation log: it belongs to the training step it was printed at."""
        at = step if step is not None else self.last_step
        if at is not None:
            self._merge(at, numeric_items({k: v for k, v in d.items() if k != "step"}))

    def add_train(self, d: dict[str, Any], step: int | None, this_total: int | None) -> None:
        """A training log: a new run when rows switch between supervised and RL, the bar's total changes or the
        step goes back; a missing or repeated step is the previous one plus the logging interval."""
        is_rl = _is_rl_row(d)
        if (
            (self.kind is not None and is_rl != self.kind)
            or (this_total is not None and self.total is not None and this_total != self.total)
            or (step is not None and self.last_step is not None and step < self.last_step)
        ):
            self.close()
        self.kind = is_rl
        self.total = this_total if this_total is not None else self.total
        if step is None or (self.last_step is not None and step == self.last_step):
            if step is None:
                self.inferred += 1
            step = (self.last_step or 0) + self.interval
        else:
            self.known += 1
            if self.last_step is not None and step > self.last_step:
                self.interval = step - self.last_step
        self._merge(step, numeric_items({k: v for k, v in d.items() if k not in ("step", "global_step/max_steps")}))
        self.last_step = step

    def _merge(self, step: int, values: dict[str, float]) -> None:
        self.written = True
        if self.sink is None:
            merge_segments(self.rows, step, values)
        else:
            self.sink(len(self.segments), step, values)


class TrlConsoleLines:
    """transformers' printed output read one line at a time (`grpokit watch` reads a growing log this way; see
    `trl_console_segments` for the rules). Rows go to `sink(run index, step, values)` when one is given (a row's
    step may come again: an evaluation printed after it joins it), else into runs that `finish()` returns."""

    def __init__(self, sink: Callable[[int, int, dict[str, float]], None] | None = None) -> None:
        self.seg = _Segmenter(sink=sink)
        self.bar: tuple[int, int] | None = None
        self.unreadable = 0  # printed dicts that do not parse

    def feed(self, raw_line: str) -> None:
        """One line (carriage returns already split: a progress bar's renders are lines)."""
        seg = self.seg
        line = ANSI_ESCAPE.sub("", raw_line)
        m = TRL_DICT.search(line)
        for b in _BAR.finditer(line[: m.start()] if m else line):
            n, t = int(b.group(1)), int(b.group(2))
            if 1 <= n <= t:
                self.bar = (n, t)
        if not m:
            return
        d = dict_at(line, m.start())
        if d is None:
            self.unreadable += 1
        if d is None or "train_runtime" in d:
            if d is not None:
                seg.close()  # the end-of-training summary closes a run
            self.bar = None
            return
        step, this_total = _dict_step(d, self.bar)
        if all(str(k).startswith("eval_") or k in ("epoch", "step") for k in d):
            seg.add_eval(d, step)
        else:
            seg.add_train(d, step, this_total)
        self.bar = None

    def finish(self) -> list[tuple[RawRows, list[str]]]:
        seg = self.seg
        seg.close()
        if self.unreadable:  # said, never dropped silently: a run whose every row failed to parse is not "no step"
            note = f"{self.unreadable} printed metric dict(s) could not be read and were skipped"
            if seg.segments:
                seg.segments[-1][1].append(note)
            else:
                seg.segments.append(({}, [note]))
        return seg.segments


def trl_console_segments(text: str) -> list[tuple[RawRows, list[str]]]:
    """Per-step dicts printed by transformers' Trainer (TRL, Unsloth, ms-swift), among progress bars and other
    output. The step of a dict is its `global_step/max_steps` (ms-swift) or `step` entry, else the counter of the
    training progress bar printed since the previous dict, else the previous step plus the logging interval seen
    so far (1 at first). A new run starts when rows switch between supervised (no reward) and RL, when the
    progress bar's total changes, or when the step goes back."""
    lines = TrlConsoleLines()
    for raw_line in text.replace("\r", "\n").splitlines():
        lines.feed(raw_line)
    return lines.finish()
