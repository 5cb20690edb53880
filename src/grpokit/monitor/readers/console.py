"""Printed training output (any text file): which trainer printed it (verl, TRL/transformers, OpenRLHF), the
error a crashed run ends with, and the console reader."""

from __future__ import annotations

import re
from pathlib import Path

from ...common.bounded_read import LOG_LIMIT, open_regular, read_text
from . import console_openrlhf
from .canonical import OPENRLHF_CONSOLE_MAPPER, TRL_MAPPER, VERL_MAPPER, Reader, Segment, ordered
from .console_trl import TRAINER_START, TRL_DICT, trl_console_segments
from .console_verl import VERL_LINE, VERL_START, verl_console_segments, verl_context
from .names import OPENRLHF_NAMES, TRL_NAMES, VERL_NAMES
from .values import ANSI_ESCAPE

_TEXT_SNIFF_BYTES = 4 << 20
_STRUCTURED_SUFFIXES = {".json", ".jsonl", ".csv", ".yaml", ".yml", ".parquet", ".safetensors", ".bin", ".pt", ".png"}


def _is_binary(path: Path) -> bool:
    try:
        with open_regular(path) as f:  # a FIFO swapped in is not a hang
            return b"\x00" in f.read(8192)
    except (OSError, ValueError):
        return True


def read_text_file(path: Path) -> str:
    return read_text(path, LOG_LIMIT, errors="replace")  # a regular file, at most LOG_LIMIT bytes


_ERROR_LINE = re.compile(r"^\W*(?:\(\w+ pid=\d+\)\s*)?([A-Za-z_.]*(?:Error|Exception|Interrupt)\b.*)$")


def _tail_error(text: str) -> str | None:
    """The exception a log ends with: the error line after the last bare `Traceback (most recent call last):` near
    its end. A traceback printed by a logger (`ERROR:...:Traceback`) was handled and is not a crash."""
    tail = ANSI_ESCAPE.sub("", text[-30000:]).splitlines()
    idx = max((i for i, line in enumerate(tail) if "Traceback (most recent call last)" in line), default=None)
    if idx is None or re.search(r"(ERROR|WARNING|INFO)[:\s].*Traceback", tail[idx]):
        return None
    if any(
        VERL_LINE.search(line) or TRL_DICT.search(line) or console_openrlhf.GLOBAL_STEP.search(line)
        for line in tail[idx:]
    ):
        return None  # training went on after it
    after = tail[idx + 1 :]
    for i, line in enumerate(after):
        m = _ERROR_LINE.match(line.strip())
        if m:
            # Ray wraps a worker's exception (`RayTaskError(ValueError): ray::Actor.fit() ...`): name the worker's own
            # error line when the log prints it
            inner = re.match(r"[\w.]*RayTaskError\((\w+)\)", m.group(1))
            for later in after[i + 1 :] if inner else ():
                m2 = _ERROR_LINE.match(later.strip())
                if m2 and m2.group(1).startswith(inner.group(1) + ":"):
                    return m2.group(1)[:200]
            return m.group(1)[:200]
    return None


def console_kind(text: str) -> str | None:
    """'verl', 'trl-console' or 'openrlhf' for a text log, by which kind of metric line it holds more of."""
    sample = text[:_TEXT_SNIFF_BYTES]
    verl = sum(1 for line in sample.splitlines() if VERL_LINE.search(ANSI_ESCAPE.sub("", line)))
    orlhf = console_openrlhf.score(ANSI_ESCAPE.sub("", sample))
    # an OpenRLHF status line is a dict too; count only the others as TRL's
    trl = len(TRL_DICT.findall(sample)) - len(console_openrlhf.GLOBAL_STEP.findall(sample))
    if not verl and trl <= 0 and not orlhf:
        # a training that printed its start but no step (it crashed or was stopped before step 1)
        if VERL_START.search(sample):
            return "verl"
        if TRAINER_START.search(sample):
            return "trl-console"
        if console_openrlhf.started(sample):
            return "openrlhf"
        return None
    if orlhf >= max(verl, trl):
        return "openrlhf"
    return "verl" if verl >= trl else "trl-console"


class ConsoleReader(Reader):
    """Printed training output: verl's console logger, the per-step dicts of transformers' Trainer (TRL, Unsloth,
    ms-swift) mixed with progress bars, or OpenRLHF's status lines and progress bars. Any text file (`.log`,
    `.txt`, `.out`, `.md`, no suffix, ...)."""

    name = "console"

    def runs(self, path: Path) -> list[tuple[str, list[Path]]]:
        if not path.is_file() or path.suffix.lower() in _STRUCTURED_SUFFIXES or _is_binary(path):
            return []
        if path.name.startswith("events.out.tfevents."):
            return []
        try:
            with open_regular(path) as f:  # a FIFO swapped in is not a hang
                head = f.read(_TEXT_SNIFF_BYTES).decode("utf-8", errors="replace")
        except (OSError, ValueError):
            return []
        return [("", [path])] if console_kind(head) else []

    def read(self, files: list[Path]) -> list[Segment]:
        text = read_text_file(files[0])
        kind = console_kind(text)
        err = _tail_error(text)
        tail = [f"the log ends with an error: {err}"] if err else []
        if kind == "openrlhf":
            rows, notes = console_openrlhf.read(text)
            raw = ordered(rows, list(OPENRLHF_NAMES))
            ctx = console_openrlhf.context(text)
            return [Segment(raw, OPENRLHF_CONSOLE_MAPPER, "openrlhf", "", ctx, {}, notes + tail)]
        if kind == "verl":
            ctx = verl_context(text)
            segs = verl_console_segments(text) or [{}]
            return [
                Segment(
                    ordered(rows, list(VERL_NAMES)),
                    VERL_MAPPER,
                    "verl",
                    f"#{i + 1}" if len(segs) > 1 else "",
                    ctx,
                    {},
                    list(tail) if i == len(segs) - 1 else [],
                )
                for i, rows in enumerate(segs)
            ]
        out = []
        segs = trl_console_segments(text) or [({}, [])]
        for i, (rows, notes) in enumerate(segs):
            name = f"#{i + 1}" if len(segs) > 1 else ""
            notes = notes + (tail if i == len(segs) - 1 else [])
            out.append(Segment(ordered(rows, list(TRL_NAMES)), TRL_MAPPER, "trl", name, {}, {}, notes))
        return out
