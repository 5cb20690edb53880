"""prime-rl's consoles: the trainer's `logs/trainer.log` and the orchestrator's `logs/orchestrator.log` (loguru
SUCCESS lines `HH:MM:SS SUCCESS Step N | <time> | Label value | ...`; before June 2026 `Label: value`). The trainer
prints Loss, Entropy, Mismatch KL, Grad. Norm, LR, Throughput, MFU, Peak Mem.; the orchestrator Reward, Trainable,
Turns, Max Off-Policy, Truncation (older: Reward, Seq. Length, Max. Off-Policy Level). A run's output directory (or
its `logs/`) is one run: both files are read and their lines merged by step (the orchestrator's step N is the batch
the trainer's step N trains on)."""

from __future__ import annotations

import re
from pathlib import Path

from .canonical import RawRows, Segment
from .console_text import NUMBER, TextLogReader, in_table_order, merge, number, read_text, table_mapper
from .names_more import PRIME_RL_NAMES

# `Step 12 | ...`, not `Micro Step 1/4 | ...` nor `Evaluated env (Step 12) | ...`
_STEP = re.compile(r"(?<![\w(])Step (\d+) \| (.*)$")
_FIELD = re.compile(r"^([A-Z][A-Za-z. -]{0,40}?):? (" + NUMBER + r")(%?)")  # `Label value` / `Label: value`
_TRAINER = re.compile(r"\| Loss:? " + NUMBER + r".*\| Entropy:? ")
_ORCHESTRATOR = re.compile(r"\| Reward:? " + NUMBER + r".*\| (?:Trainable|Seq\. Length|Max\.? Off-Policy|Truncation)")
LOG_FILES = ("trainer.log", "orchestrator.log")


def step_fields(line: str) -> tuple[int, dict[str, float]] | None:
    """(step, {label: value}) of a trainer or orchestrator step line, percentages as fractions; None otherwise."""
    m = _STEP.search(line)
    if not m or not (_TRAINER.search(line) or _ORCHESTRATOR.search(line)):
        return None
    values = {}
    for part in m.group(2).split(" | "):
        f = _FIELD.match(part.strip())
        if f and f.group(1) != "Time":
            v = number(f.group(2) + f.group(3))
            if v is not None:
                values[f.group(1)] = v
    return int(m.group(1)), values


def prime_rows(texts: list[str]) -> RawRows:
    """prime-rl console texts (trainer and/or orchestrator) -> rows by step."""
    rows: RawRows = {}
    for text in texts:
        for line in text.splitlines():
            if found := step_fields(line):
                merge(rows, *found)
    return in_table_order(rows, PRIME_RL_NAMES)


class PrimeRLReader(TextLogReader):
    """prime-rl's printed output: a trainer or orchestrator log file, or a run directory holding
    `logs/trainer.log` and `logs/orchestrator.log` (read as one run)."""

    name = "prime-rl"

    def claims(self, head: str) -> bool:
        return any(step_fields(line) for line in head.splitlines() if "Step " in line)

    def runs(self, path: Path) -> list[tuple[str, list[Path]]]:
        if not path.is_dir():
            return super().runs(path)
        files = [d / name for d in (path, path / "logs") for name in LOG_FILES if (d / name).is_file()]
        files = [f for f in files if self.claims_file(f)]
        return [("", files)] if files else []

    def read(self, files: list[Path]) -> list[Segment]:
        rows = prime_rows([read_text(f) for f in files])
        notes = []
        if len(files) > 1:
            notes.append(
                "the trainer's and the orchestrator's lines are merged by step: " + ", ".join(f.name for f in files)
            )
        return [Segment(rows, table_mapper(PRIME_RL_NAMES), "prime-rl", "", {}, {}, notes)]
