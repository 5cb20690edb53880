"""How a run ended, kept in its run directory: `outcome.json`, written when the process that trained it stops.

    {"status": "error", "step": 12, "message": "reward 'boom' failed on 11 of 20 samples ...", "at": 1795650285.1}

| status | when |
|---|---|
| `completed` | every step done (or `monitor.stop_when_learned` ended it: the message says so), final model written |
| `interrupted` | SIGINT/SIGTERM (the step finished and checkpointed) or a second Ctrl-C |
| `diverged` | the divergence guard stopped it (`train.on_divergence=stop`) |
| `error` | any other exception: its type and message |

A run that is still training, or was killed outright (kill -9, power loss), has no `outcome.json` for its last
segment: the claim marker tells the two apart (`grpokit.run.directory`). Every reader of runs (`doctor`, `report`,
`compare`, `--resume`) says the outcome first, with `outcome_line`.

An exception says its own status with a `run_status` class attribute (this layer imports nothing above it);
`KeyboardInterrupt` is `interrupted`, anything else `error`.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from ..common.bounded_read import UnreadableInput, open_regular, read_json

OUTCOME_FILE = "outcome.json"
STATUSES = ("completed", "interrupted", "diverged", "error")
MESSAGE_CHARS = 2000
OUTCOME_LIMIT = 1 << 20  # bytes: a written outcome is under 3 KB


def status_of(error: BaseException | None) -> str:
    """The outcome an exception (None: none) ends a run with."""
    if error is None:
        return "completed"
    if isinstance(error, KeyboardInterrupt):
        return "interrupted"
    status = getattr(error, "run_status", "error")
    return status if status in STATUSES else "error"


def message_of(error: BaseException) -> str:
    """`Type: message`, the message's first lines up to MESSAGE_CHARS (a traceback stays on the terminal)."""
    text = str(error).strip()
    return f"{type(error).__name__}: {text}"[:MESSAGE_CHARS] if text else type(error).__name__


def last_step(run_dir: Path) -> int | None:
    """The last training step metrics.jsonl holds (its last row with a step), None when none."""
    path = run_dir / "metrics.jsonl"
    if not path.is_file():
        return None
    step = None
    try:
        f = open_regular(path)  # a FIFO or device put in its place: no step, not a hang
    except (OSError, UnreadableInput):
        return None
    with f:
        f.seek(max(0, os.fstat(f.fileno()).st_size - 65536))  # the tail is enough: rows are small, steps increase
        for line in f.read(65536).splitlines():
            try:
                row = json.loads(line)
            except (ValueError, RecursionError):  # a torn or hostile line (JSON nested past the recursion limit)
                continue
            if isinstance(row, dict) and isinstance(row.get("step"), int):
                step = row["step"]
    return step


def write_outcome(run_dir: Path, status: str, message: str = "", step: int | None = None) -> dict[str, Any]:
    """Record how the run ended (written aside and renamed: a reader never sees half a file)."""
    if status not in STATUSES:
        raise ValueError(f"run outcome {status!r}: expected one of {', '.join(STATUSES)}")
    body = {
        "status": status,
        "step": last_step(run_dir) if step is None else step,
        "message": message,
        "at": time.time(),
    }
    tmp = run_dir / f".{OUTCOME_FILE}.tmp"
    tmp.write_text(json.dumps(body, indent=1) + "\n")
    os.replace(tmp, run_dir / OUTCOME_FILE)
    return body


def read_outcome(run_dir: Path) -> dict[str, Any] | None:
    """The recorded outcome of `run_dir` (a directory), None when it has none or it cannot be read."""
    try:
        body = read_json(Path(run_dir) / OUTCOME_FILE, OUTCOME_LIMIT)  # bounded: not a FIFO, not /dev/zero
    except (OSError, ValueError, RecursionError):
        return None
    return body if isinstance(body, dict) and body.get("status") in STATUSES else None


def outcome_line(outcome: dict[str, Any] | None) -> str | None:
    """One line for a reader of the run: `ended: error after step 12: RewardFailureError: ...`; None without one."""
    if outcome is None:
        return None
    step = outcome.get("step")
    at = f" after step {step}" if isinstance(step, int) else ""
    message = str(outcome.get("message") or "").splitlines()
    return f"ended: {outcome['status']}{at}" + (f": {message[0][:300]}" if message else "")
