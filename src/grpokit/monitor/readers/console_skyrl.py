"""SkyRL's console (loguru lines `... | INFO | skyrl_train.trainer:<func>:<line> - <message>`).

Per step the trainer prints `Started: 'step'`, the rewards line (`avg_raw_rewards: R, avg_response_length: L`),
`Finished: 'step', time cost: Ts` and the policy's status dict (`{'policy_loss': ..., 'policy_kl': ...}`), none of
them with a step number: steps are counted from the `Started: 'step'` lines, and the "Training Step Progress: k/N"
bar printed before each (k steps done, so this is step k + 1) sets the count when present (a resumed run starts
above 1). Where the log has the fork's `[Step N] Logged ... metrics` lines, their N wins. A step whose batch had no
valid sample prints "Skipping training step because the entire batch was invalid." and makes no update: its row
says so (`skipped_update` 1).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from .canonical import RawRows, Segment
from .console_text import NUMBER, TextLogReader, dict_pairs, in_table_order, merge, read_text, table_mapper
from .names_more import SKYRL_NAMES

# `skyrl_train.trainer:train:391 - ` (mid-2025) or `skyrl.train.trainer:train:342 - ` (upstream)
_SOURCE = r"skyrl[_.]train\.[\w.]+:\w+:\d+ - "
_LOGURU = re.compile(r"\|\s*[A-Z]+\s*\|\s*" + _SOURCE)
_STARTED = re.compile(_SOURCE + r"Started: 'step'\s*$")
_FINISHED = re.compile(_SOURCE + r"Finished: '(step|generate)', time cost: (" + NUMBER + r")s")
_PROGRESS = re.compile(r"Training Step Progress:\s*\d+%\|[^|]*\|\s*(\d+)/\d+")
_LOGGED = re.compile(_SOURCE + r"\[Step (\d+)\] Logged \d+ metrics")
_STATUS = re.compile(_SOURCE + r"(\{.*\})\s*$")
_REWARDS = re.compile(
    _SOURCE + r"((?:avg_raw_rewards|avg_final_rewards|reward/avg_raw_reward|reward/avg_pass_at_\d+):.*)$"
)
_NAMED = re.compile(r"([\w/@]{1,100}): (" + NUMBER + r")(?=,|\s*$)")
# the fork's `trainer.py:260` warning when no sample of the step's batch is valid: the step ends without an update
_SKIPPED = re.compile(_SOURCE + r"Skipping training step because")
SKIPPED = "skipped_update"  # the row key this reader gives that warning (SKYRL_NAMES maps it)

STEPS_NOTE = (
    "SkyRL's console prints no step number with its metrics: steps are counted from its \"Started: 'step'\" lines "
    '(the "Training Step Progress: k/N" bar before each makes it step k + 1)'
)


@dataclass
class _State:
    """Where the parse is: the current step, the last progress-bar count, the rows and notes so far."""

    rows: RawRows = field(default_factory=dict)
    step: int | None = None
    progress: int | None = None
    in_step: bool = False  # between `Started: 'step'` and `Finished: 'step'` (an evaluation runs after it)
    renumbered: bool = False
    notes: list[str] = field(default_factory=list)


def _start_step(st: _State) -> None:
    """A `Started: 'step'` line: the bar's count + 1, else the next number."""
    st.step = st.progress + 1 if st.progress is not None else (st.step or 0) + 1
    st.progress, st.in_step = None, True


def _renumber(st: _State, logged: int) -> None:
    """The fork's `[Step N] Logged` line names the step just finished: move its values there if the count differs."""
    if st.step is None or logged == st.step:
        return
    merge(st.rows, logged, st.rows.pop(st.step, {}))
    st.step, st.renumbered = logged, True


def _values(line: str) -> dict[str, float]:
    """The metrics a line carries: the status dict or the rewards line."""
    if m := _STATUS.search(line):
        pairs = dict_pairs(m.group(1))
        return pairs if any(k in SKYRL_NAMES for k in pairs) else {}
    if m := _REWARDS.search(line):
        return {k: float(v) for k, v in _NAMED.findall(m.group(1))}
    return {}


def _timer(st: _State, name: str, seconds: str) -> None:
    """A step's own `step` / `generate` timer (not one of the evaluation that follows the step)."""
    if st.in_step and st.step is not None:
        merge(st.rows, st.step, {f"timing/{name}": float(seconds)})
    st.in_step = st.in_step and name != "step"


def _parse_line(st: _State, line: str) -> None:
    if "Training Step Progress" in line:
        for m in _PROGRESS.finditer(line):
            st.progress = int(m.group(1))
    if "skyrl" not in line:
        return
    if _STARTED.search(line):
        _start_step(st)
    elif m := _LOGGED.search(line):
        _renumber(st, int(m.group(1)))
    elif m := _FINISHED.search(line):
        _timer(st, m.group(1), m.group(2))
    elif st.step is not None and _SKIPPED.search(line):
        merge(st.rows, st.step, {SKIPPED: 1.0})
    elif st.step is not None and (values := _values(line)):
        merge(st.rows, st.step, values)


def _unfinished(st: _State) -> None:
    """Steps that logged nothing but timers, or nothing (the log ends inside them, or they were interrupted), are
    not rows: say so."""
    empty = [s for s, r in st.rows.items() if all(k.startswith("timing/") for k in r)]
    for step in empty:
        del st.rows[step]
    if st.step is not None and st.step not in st.rows and st.step not in empty:
        empty.append(st.step)
    for step in sorted(empty):
        st.notes.append(f"step {step} started but logged no metrics (the log ends or it stopped inside it)")


def skyrl_rows(text: str) -> tuple[RawRows, list[str]]:
    """SkyRL console text -> (rows by step, notes)."""
    st = _State()
    for line in text.splitlines():
        _parse_line(st, line)
    _unfinished(st)
    notes = [STEPS_NOTE]
    if st.renumbered:
        notes.append('its "[Step N] Logged" lines numbered some steps differently from the count: their N is used')
    return in_table_order(st.rows, SKYRL_NAMES), notes + st.notes


class SkyRLReader(TextLogReader):
    """SkyRL's printed output (a `.log` / `.txt` / W&B `output.log` file)."""

    name = "skyrl"

    def claims(self, head: str) -> bool:
        return bool(_LOGURU.search(head)) and any(
            p in head for p in ("Started: 'step'", "avg_raw_rewards:", "avg_final_rewards:", "'policy_loss':")
        )

    def read(self, files: list[Path]) -> list[Segment]:
        rows, notes = skyrl_rows(read_text(files[0]))
        return [Segment(rows, table_mapper(SKYRL_NAMES), "skyrl", "", {}, {}, notes)]
