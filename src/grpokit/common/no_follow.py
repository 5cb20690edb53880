"""Append to a file grpokit owns without following a link planted where it goes (docs/threat_model.md): the file is
opened with O_NOFOLLOW, so a symlink at its name is refused by the kernel (ELOOP) instead of being written through."""

from __future__ import annotations

import errno
import os
from pathlib import Path


class PlantedLink(OSError):
    """The name grpokit appends to is a symbolic link it did not make."""


def append_text(path: str | Path, text: str) -> None:
    """Append `text` (UTF-8) to `path`, created mode 0644 if absent; PlantedLink when `path` is a symlink."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as e:
        if e.errno == errno.ELOOP or Path(path).is_symlink():
            raise PlantedLink(errno.ELOOP, f"{path} is a symbolic link grpokit did not make; nothing written") from e
        raise
    with os.fdopen(fd, "a", encoding="utf-8") as f:
        f.write(text)
