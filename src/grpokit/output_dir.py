"""`--output-dir` / `train.output_dir`: the run directory is exactly this folder, as TRL's `output_dir`.

Unlike `--out` (a parent folder: each run gets a new sub-folder), a new run refuses a folder that already holds a
run (a config.yaml, metrics.jsonl or checkpoints/, or the claim of a run started at the same time), so two runs
never mix their logs and checkpoints; continue that run with `--resume` instead, or pick another folder.
"""

from __future__ import annotations

import os
from pathlib import Path

from .rundir import MARKER

RUN_MARKERS = ("config.yaml", "metrics.jsonl", "checkpoints")


class OutputDirError(ValueError):
    """The output directory holds another run."""


def claim_output_dir(path: str | Path) -> Path:
    """The folder itself, created if missing; refused when it holds a run already."""
    run = Path(path)
    if run.exists() and not run.is_dir():
        raise OutputDirError(f"--output-dir {run}: is a file, not a directory; pick a directory")
    held = [m for m in RUN_MARKERS if (run / m).exists()]
    if held:
        raise OutputDirError(
            f"--output-dir {run} already holds a run ({', '.join(held)}): continue it with "
            f"`grpokit train --resume {run}`, or pick another directory (or --out PARENT for a new sub-folder)"
        )
    run.mkdir(parents=True, exist_ok=True)
    try:  # atomic, as grpokit.rundir: of two runs started at once on one folder, the second is refused
        fd = os.open(run / MARKER, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        raise OutputDirError(
            f"--output-dir {run} is claimed by another grpokit run ({MARKER}); pick another directory"
        ) from None
    with os.fdopen(fd, "w") as f:
        f.write(f"{os.getpid()}\n")
    return run
