"""How the command line ends on a stop that is not a bug: one line on stderr and the exit status.

| stop | status |
|---|---|
| SIGINT / SIGTERM, the step finished and checkpointed (`grpokit.interrupts.Interrupted`) | 130 / 143 |
| a second Ctrl-C (`KeyboardInterrupt`) | 130 |
| divergence (`grpokit.guard.Diverged`) | 1 |
| disk full / file too large / quota (`OSError` ENOSPC, EFBIG, EDQUOT) | 1 |
"""

from __future__ import annotations

import errno
import sys

from .guard import Diverged
from .interrupts import Interrupted

DISK_ERRORS = {errno.ENOSPC, errno.EFBIG, errno.EDQUOT}


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
    if isinstance(e, OSError) and e.errno in DISK_ERRORS:
        where = f" writing {e.filename}" if e.filename else ""
        print(
            f"error: {e.strerror or 'disk full'}{where}: free disk space (or pick another train.out), then continue "
            "with grpokit train --resume RUN_DIR; the last complete checkpoint is intact (checkpoints are written "
            "atomically)",
            file=sys.stderr,
        )
        return 1
    return None
