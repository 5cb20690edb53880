"""How the command line ends on a stop that is not a bug: one line on stderr and the exit status.

| stop | status |
|---|---|
| SIGINT / SIGTERM, the step finished and checkpointed (`grpokit.training.interrupts.Interrupted`) | 130 / 143 |
| a second Ctrl-C (`KeyboardInterrupt`) | 130 |
| divergence (`grpokit.training.guard.Diverged`) | 1 |
| disk full / file too large / quota (`OSError` ENOSPC, EFBIG, EDQUOT) | 1 |
| read-only file system / permission denied (`OSError` EROFS, EACCES) | 1 |
"""

from __future__ import annotations

import errno
import os
import re
import sys

from ..common.safe_text import safe_text
from ..training.guard import Diverged
from ..training.interrupts import Interrupted

DISK_ERRORS = {errno.ENOSPC, errno.EFBIG, errno.EDQUOT}
ACCESS_ERRORS = {errno.EROFS, errno.EACCES}  # a read-only run directory, one grpokit may not write
OS_ERROR_IN_TEXT = re.compile(r"\(os error (\d+)\)")  # how Rust writers (safetensors) report an OSError


def _disk_error(e: BaseException) -> tuple[str, str] | None:
    """(what failed, where) when `e` is a full disk / file size limit / quota, else None."""
    if isinstance(e, OSError) and e.errno in DISK_ERRORS:
        return e.strerror or "disk full", f" writing {e.filename}" if e.filename else ""
    m = OS_ERROR_IN_TEXT.search(str(e))
    if m and int(m.group(1)) in DISK_ERRORS:
        return os.strerror(int(m.group(1))), f" ({type(e).__name__})"
    return None


def exit_line(e: BaseException) -> int | None:
    """Print the one line for `e` and return the exit status, or None when `e` is not such a stop."""
    if isinstance(e, Interrupted):
        print(str(e), file=sys.stderr)
        return e.exit_code
    if isinstance(e, KeyboardInterrupt):
        print("grpokit: interrupted; stopped at once without a checkpoint of the current step", file=sys.stderr)
        return 130
    if isinstance(e, Diverged):
        print(f"error: {e}", file=sys.stderr)
        return 1
    if isinstance(e, OSError) and e.errno in ACCESS_ERRORS:
        where = f" ({safe_text(e.filename, limit=500)})" if e.filename else ""
        print(
            f"error: {e.strerror or 'permission denied'}{where}: make that directory writable (or pick another "
            "train.out / --output-dir); a run already started keeps its last complete checkpoint: continue it "
            "with grpokit train --resume RUN_DIR",
            file=sys.stderr,
        )
        return 1
    disk = _disk_error(e)
    if disk is not None:
        print(
            f"error: {disk[0]}{disk[1]}: free disk space (or pick another train.out), then continue "
            "with grpokit train --resume RUN_DIR; the last complete checkpoint is intact (checkpoints are written "
            "atomically)",
            file=sys.stderr,
        )
        return 1
    return None
