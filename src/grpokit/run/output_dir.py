"""`--output-dir` / `train.output_dir`: the run directory is exactly this folder, as TRL's `output_dir`.

Unlike `--out` (a parent folder: each run gets a new sub-folder), a new run refuses a folder that already holds a
run (a config.yaml, metrics.jsonl or checkpoints/, or the claim of a grpokit process still running), so two
runs never mix their logs and checkpoints; continue that run with `--resume` instead, or pick another folder. A folder
holding a symbolic link (dangling or not) is refused too: the run writes its files there by name, and would write
through the link. A run name (`--name`) is one plain, printable folder name: no `/`, no newline or terminal escape.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from .directory import MARKER, claim_run_dir, create_claim, take_over_stale_claim

RUN_MARKERS = ("config.yaml", "metrics.jsonl", "checkpoints")


class OutputDirError(ValueError):
    """The output directory holds another run."""


def _not_a_directory(run: Path) -> Path | None:
    """The first existing one of `run` and its parents when it is not a directory (a file in the way)."""
    existing = next((p for p in (run, *run.parents) if p.exists()), None)
    return existing if existing is not None and not existing.is_dir() else None


def refuse_links(run: Path) -> None:
    """OutputDirError naming the first entry of `run` that is a symbolic link (dangling or not): a run writes its
    files in `run` by name, and would create, append to or replace whatever a planted link points to."""
    try:
        links = sorted(p for p in run.iterdir() if p.is_symlink()) if run.is_dir() else []
    except OSError:
        return  # unreadable: creating the claim says why
    if links:
        raise OutputDirError(
            f"--output-dir {run}: {links[0].name} is a symbolic link (to {os.readlink(links[0])!r}) that grpokit did "
            f"not make; a run writes its files here and would write through it: remove the link, or pick another "
            "directory"
        )


def claim_output_dir(path: str | Path) -> Path:
    """The folder itself, created if missing; refused when it holds a run already, or is claimed by a grpokit
    process that still runs (a claim left by a process that has ended, e.g. killed while loading, is taken over)."""
    run = Path(path)
    blocker = _not_a_directory(run)
    if blocker is not None:
        where = "is a file" if blocker == run else f"is under {blocker}, a file"
        raise OutputDirError(f"--output-dir {run}: {where}, not a directory; pick a directory")
    refuse_links(run)
    held = [m for m in RUN_MARKERS if (run / m).exists()]
    if held:
        raise OutputDirError(
            f"--output-dir {run} already holds a run ({', '.join(held)}): continue it with "
            f"`grpokit train --resume {run}`, or pick another directory (or --out PARENT for a new sub-folder)"
        )
    created = not run.exists()
    try:
        run.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        why = e.strerror or e
        raise OutputDirError(f"--output-dir {run}: cannot create it ({why}); pick another directory") from None
    # atomic, as grpokit.run.directory: of two runs started at once on one folder, the second is refused
    if not create_claim(run, created=created) and not take_over_stale_claim(run, created=created):
        raise OutputDirError(
            f"--output-dir {run} is claimed by another grpokit run that is still running ({MARKER}); pick another "
            "directory"
        )
    return run


def claim_new_run(out: str | Path, output_dir: str | None, recipe: str, stem: str, name: str | None = None) -> Path:
    """The one way a new run claims its directory (CLI and Python API alike): `output_dir` itself when set (as
    TRL's, refused when it holds a run), else a new sub-folder of `out` named `name` or `<recipe>-<stem>-<time>`
    (`-1`, `-2`, ... added when taken), claimed atomically. A name that would leave `out` is refused."""
    if output_dir:
        return claim_output_dir(output_dir)
    leaf = name or f"{recipe}-{stem}-{time.strftime('%Y%m%d-%H%M%S')}"
    if not leaf or leaf in (".", "..") or "/" in leaf or os.sep in leaf or not leaf.isprintable():
        # a newline or a terminal escape in a folder name reaches every listing and log line that names the run
        raise OutputDirError(f"run name {leaf!r} is not a plain folder name; use letters, digits, '-', '_' or '.'")
    return claim_run_dir(Path(out) / leaf)
