"""TRL's `trainer_state.json` (its `log_history`), in an output directory or its newest checkpoint.

Bounded: the file is read as a regular file of at most `LOG_LIMIT` bytes (`grpokit.common.bounded_read`), and only
its last `MAX_STEPS` logged steps are diagnosed, a note saying how many were left out (the detectors replay every
row: 10^6 steps took 257 s; the last 20,000 take seconds and hold the state the run is in now)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from ...common.bounded_read import LOG_LIMIT, read_json
from .canonical import TRL_MAPPER, RawRows, Reader, Segment, merge_segments, ordered
from .names import TRL_NAMES
from .values import numeric_items, step_of

MAX_STEPS = 20_000


def _checkpoint_number(p: Path) -> int:
    m = re.search(r"checkpoint-(\d+)$", p.parent.name)
    return int(m.group(1)) if m else -1


class TrlReader(Reader):
    name = "trl"

    def runs(self, path: Path) -> list[tuple[str, list[Path]]]:
        if path.is_dir():
            top = path / "trainer_state.json"
            if top.is_file():
                return [("", [top])]
            ckpts = sorted(path.glob("checkpoint-*/trainer_state.json"), key=_checkpoint_number)
            return [("", [ckpts[-1]])] if ckpts else []
        if path.suffix == ".json" and path.is_file():
            try:
                state = read_json(path, LOG_LIMIT)
            except (OSError, ValueError):  # not JSON, not UTF-8, nested too deeply, not a regular file, too large
                return []
            if isinstance(state, dict) and isinstance(state.get("log_history"), list):
                return [("", [path])]
        return []

    def read(self, files: list[Path]) -> list[Segment]:
        try:
            state = read_json(files[0], LOG_LIMIT)
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise ValueError(f"{files[0]}: not valid JSON ({str(e)[:200]})") from None
        if not isinstance(state, dict) or not isinstance(state.get("log_history", []), list):
            raise ValueError(f"{files[0]}: not a TRL trainer_state.json (a JSON object with a log_history list)")
        rows: RawRows = {}
        for entry in state.get("log_history", []):
            step = step_of(entry.get("step")) if isinstance(entry, dict) else None
            if step is not None:
                merge_segments(rows, step, numeric_items({k: v for k, v in entry.items() if k != "step"}))
        ctx: dict[str, Any] = {}
        notes = []
        if len(rows) > MAX_STEPS:
            kept = sorted(rows)[-MAX_STEPS:]
            notes.append(
                f"trainer_state.json: {len(rows)} logged steps; the last {MAX_STEPS} (steps {kept[0]}..{kept[-1]}) "
                "are diagnosed, the earlier ones left out"
            )
            rows = {s: rows[s] for s in kept}
        interval = state.get("logging_steps")
        if isinstance(interval, (int, float)) and interval > 1:
            notes.append(f"trainer_state.json: logging_steps = {int(interval)}")
        return [Segment(ordered(rows, list(TRL_NAMES)), TRL_MAPPER, "trl", "", ctx, {}, notes)]
