"""The lines appended to a file since the last read, as `tail -F` sees them: `grpokit watch` reads a log this way.

A `Tail` keeps a byte offset and reads only the bytes past it, a block at a time. A line the writer has not ended
yet waits for the bytes that end it. A file that got shorter than the offset (truncated, `copytruncate` rotation),
was replaced by another file (`logrotate` moves it and a new one is created: another inode), or whose first bytes or
last bytes read changed (rewritten in place, longer than before) is read again from its start.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

BLOCK = 1 << 20  # bytes read at a time: a long log is parsed in blocks, never held whole
MAX_LINE = 8 << 20  # a line longer than this (no newline in 8 MB) is no metric line: it is skipped, not held
CHECK = 64  # bytes compared at each read, at the file's start and just before the offset: a rewrite shows there


class Tail:
    """Complete lines appended to `path` since the last `blocks()`.

    `bytes_read` counts every byte read from the file (the appended bytes, and the 2 x `CHECK` bytes compared at
    each read after the first): the tests read it to see that only new bytes are read. `restarts` counts the times
    the file was read again from its start; `skipped` the over-long lines left out."""

    def __init__(self, path: Path, block: int = BLOCK, max_line: int = MAX_LINE) -> None:
        self.path, self.block, self.max_line = path, block, max_line
        self.offset = 0  # bytes of the file consumed (complete lines handed out, plus `partial`)
        self.partial = b""  # the unended last line
        self.bytes_read = 0
        self.restarts = 0
        self.skipped = 0
        self._skipping = False  # inside an over-long line: drop bytes up to its end
        self._id: tuple[int, int] | None = None  # (device, inode) of the file read
        self._head = b""  # its first bytes
        self._seam = b""  # the last bytes consumed (those just before the offset)
        self._stat: tuple[int, int] | None = None  # (size, mtime_ns) at the last read: unchanged means nothing new

    def _start_over(self) -> None:
        self.offset, self.partial, self._skipping, self._head, self._seam = 0, b"", False, b"", b""
        self.restarts += 1

    def blocks(self) -> Iterator[str]:
        """The text of the complete lines appended since the last call, in blocks of about `block` bytes, each
        ending at a line end (`\\n` or `\\r`); nothing when the file has not changed. A block decodes as the readers
        read a file (UTF-8, bad bytes replaced). After a start over (`restarts` went up) the blocks are the file's
        whole text again."""
        try:
            f = self.path.open("rb")
        except FileNotFoundError:
            return
        with f:
            st = os.fstat(f.fileno())
            stat = (st.st_size, st.st_mtime_ns)
            if stat == self._stat and (st.st_dev, st.st_ino) == self._id:
                return
            self._stat = stat
            if self._id is not None and (
                (st.st_dev, st.st_ino) != self._id or st.st_size < self.offset or not self._unchanged(f)
            ):
                self._start_over()
            self._id = (st.st_dev, st.st_ino)
            f.seek(self.offset)
            while True:
                data = f.read(self.block)
                if not data:
                    return
                self.bytes_read += len(data)
                if self.offset == 0:
                    self._head = data[:CHECK]
                self.offset += len(data)
                self._seam = (self._seam + data)[-CHECK:]
                text = self._lines(data)
                if text:
                    yield text

    def _unchanged(self, f: BinaryIO) -> bool:
        """Whether the bytes read before still stand at the file's start and just before the offset."""
        for at, seen in ((0, self._head), (self.offset - len(self._seam), self._seam)):
            f.seek(at)
            now = f.read(len(seen))
            self.bytes_read += len(now)
            if now != seen:
                return False
        return True

    def _lines(self, data: bytes) -> str:
        """The complete lines of `partial + data`; the rest waits in `partial`."""
        if self._skipping:
            ends = [i for i in (data.find(b"\n"), data.find(b"\r")) if i >= 0]
            if not ends:
                return ""
            data, self._skipping = data[min(ends) + 1 :], False
        buf = self.partial + data
        cut = max(buf.rfind(b"\n"), buf.rfind(b"\r")) + 1
        self.partial = buf[cut:]
        if len(self.partial) > self.max_line:
            self.partial, self._skipping = b"", True
            self.skipped += 1
        return buf[:cut].decode("utf-8", errors="replace")
