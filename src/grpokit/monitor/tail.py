"""The lines appended to a file since the last read, as `tail -F` sees them: `grpokit watch` reads a log this way.

A `Tail` keeps a byte offset and reads only the bytes past it, a block at a time. A line the writer has not ended
yet waits for the bytes that end it. A file that got shorter than the offset (truncated, `copytruncate` rotation),
was replaced by another file (`logrotate` moves it and a new one is created: another inode), or whose first bytes or
last bytes read changed (rewritten in place, longer than before) is read again from its start, as `tail -F` does
(a symlink put in its place is followed: its target is the new file). A path that is, or becomes, something other
than a regular file (a FIFO, `/dev/zero`, a socket, a directory) is `NotALogFile`, never opened for a blocking read:
the file is opened with `O_NONBLOCK` and `fstat` decides before any byte is read. A file deleted (or moved away)
reads as nothing until a file of that name comes back (`missing` says so). `limit` stops the reads at a byte
offset: the rows a watch found in the log when it began are read up to where it began (`backlog`).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

BLOCK = 1 << 20  # bytes read at a time: a long log is parsed in blocks, never held whole
MAX_LINE = 8 << 20  # a line longer than this (no newline in 8 MB) is no metric line: it is skipped, not held
CHECK = 64  # bytes compared at each read, at the file's start and just before the offset: a rewrite shows there


class NotALogFile(ValueError):
    """The followed path is not a regular file (a FIFO, a device, a socket, a directory): one line naming it."""


def kind_of(mode: int) -> str:
    """What a file of `st_mode` `mode` is, in words."""
    for test, name in (
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISDIR, "a directory"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def open_regular(path: Path) -> BinaryIO:
    """`path` opened for reading without blocking on a FIFO; NotALogFile unless it is a regular file."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise NotALogFile(
            f"{path} is {kind_of(st.st_mode)}, not a log file: give the file the trainer writes its metrics to"
        )
    return os.fdopen(fd, "rb")


class Tail:
    """Complete lines appended to `path` since the last `blocks()`.

    `bytes_read` counts every byte read from the file (the appended bytes, and the 2 x `CHECK` bytes compared at
    each read after the first): the tests read it to see that only new bytes are read. `restarts` counts the times
    the file was read again from its start; `skipped` the over-long lines left out."""

    def __init__(self, path: Path, block: int = BLOCK, max_line: int = MAX_LINE, limit: int | None = None) -> None:
        self.path, self.block, self.max_line, self.limit = path, block, max_line, limit
        self.missing = False  # the file was not there at the last read (deleted, or moved away by a rotation)
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
            f = open_regular(self.path)
        except FileNotFoundError:
            self.missing = True
            return
        self.missing = False
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
                size = self.block if self.limit is None else min(self.block, self.limit - self.offset)
                data = f.read(size) if size > 0 else b""
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

    def skip_to(self, offset: int) -> None:
        """Start past the first `offset` bytes (a line end must precede `offset`): the next `blocks()` reads from
        there, and a rewrite of those bytes is still seen."""
        with open_regular(self.path) as f:
            st = os.fstat(f.fileno())
            self._id, self._stat = (st.st_dev, st.st_ino), None
            self._head = f.read(CHECK)
            f.seek(max(0, offset - CHECK))
            self._seam = f.read(min(CHECK, offset))
            self.bytes_read += len(self._head) + len(self._seam)
        self.offset, self.partial, self._skipping = offset, b"", False

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


SEED_BYTES = 64 << 20  # bytes read back for the tail lines, at most
HEAD_BYTES = 4 << 20  # bytes read for the head rows, at most (200 rows of 20 KB)
_BACK = 1 << 20  # bytes read back at a time


def line_end_before(file: Path, size: int) -> int:
    """The offset just past the last line end (`\\n` or `\\r`) in the first `size` bytes of `file` (0 if none within
    `SEED_BYTES` of `size`): a half-written last line is left to the follower."""
    with open_regular(file) as f:
        pos = size
        while pos > 0 and size - pos < SEED_BYTES:
            start = max(0, pos - _BACK)
            f.seek(start)
            chunk = f.read(pos - start)
            cut = max(chunk.rfind(b"\n"), chunk.rfind(b"\r"))
            if cut >= 0:
                return start + cut + 1
            pos = start
    return 0


def tail_text(file: Path, end: int, lines: int, max_bytes: int = SEED_BYTES) -> tuple[int, str]:
    """(start, text): the last `lines` lines before offset `end` (a line end), read backwards in blocks, at most
    `max_bytes` of them; `start` is 0 when they are the whole file."""
    with open_regular(file) as f:
        pos, found, data = end, 0, b""
        while pos > 0 and end - pos < max_bytes:
            start = max(0, pos - _BACK, end - max_bytes)
            f.seek(start)
            chunk = f.read(pos - start)
            data, pos = chunk + data, start
            found = data.count(b"\n", 0, len(data) - 1)  # line ends before the last line's own end
            if found >= lines:
                break
    if pos > 0 or found >= lines:  # drop the lines before the last `lines` (and a cut first line)
        if found == 0:
            return end, ""  # one line longer than `max_bytes`: no metric line
        cut = 0
        for _ in range(found - lines + 1 if found >= lines else 1):
            cut = data.index(b"\n", cut) + 1
        pos, data = pos + cut, data[cut:]
    return pos, data.decode("utf-8", errors="replace")


def head_text(file: Path, end: int, max_bytes: int = HEAD_BYTES) -> str:
    """The complete lines of the first `min(end, max_bytes)` bytes of `file`."""
    with open_regular(file) as f:
        data = f.read(min(end, max_bytes))
    cut = max(data.rfind(b"\n"), data.rfind(b"\r")) + 1
    return data[:cut].decode("utf-8", errors="replace")
