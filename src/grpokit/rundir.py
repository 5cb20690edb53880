"""New run directories, claimed atomically: two runs started at once never share one.

A directory is claimed by creating its marker file `.grpokit-run` with O_CREAT | O_EXCL (atomic on every local
filesystem): the first process wins and the other moves on to `NAME-1`, `NAME-2`, ... An existing directory is
reused only when it is empty (a folder made for the run beforehand).
"""

from __future__ import annotations

import os
from pathlib import Path

MARKER = ".grpokit-run"


def _claim(path: Path) -> bool:
    try:
        path.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        return False  # a file of that name
    if any(p.name != MARKER for p in path.iterdir()):
        return False  # an earlier run (or anything else) lives there
    try:
        fd = os.open(path / MARKER, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return False  # another process claimed it first
    with os.fdopen(fd, "w") as f:
        f.write(f"{os.getpid()}\n")
    return True


def claim_run_dir(base: Path) -> Path:
    """`base`, or the first free `base-1`, `base-2`, ..., created and claimed for this process."""
    i = 0
    while True:
        candidate = base if i == 0 else base.with_name(f"{base.name}-{i}")
        if _claim(candidate):
            return candidate
        i += 1
