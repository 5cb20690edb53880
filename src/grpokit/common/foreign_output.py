"""`ForeignOutput`: text another program or library writes, passed on as grpokit's own lines, escaped and bounded.

A reward worker's stdout and stderr carry what the reward and its libraries print: math_verify logs
`Timeout during parsing: <the whole text>` (a 2,000,000-digit answer whole, five times), a reward may print an
OSC 52 clipboard escape. Nothing of it reaches the trainer's terminal as it is:

- each line is cut at `line_limit` characters as it is read (the rest of a long line is counted, never held, so a
  line of any length costs `line_limit` characters of memory), then escaped by `safe_text`;
- a line seen before (the same text kept, whether or not cut, however much) is counted, not passed on again;
- after `max_lines` distinct lines the rest are counted only;
- `summary()` says what was held back: how many repeats and how many further lines.

The caller decides where a line goes (`emit`): the reward worker's lines go to the `grpokit.rewards.worker` log.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Callable

from .safe_text import safe_text

LINE_LIMIT = 2000  # characters of one line kept: a long traceback line whole, not a 2 MB one
MAX_LINES = 200  # distinct lines passed on from one source; a source printing more is counted
CHUNK = 1 << 16  # bytes read at a time


class ForeignOutput:
    """Split a byte stream into lines; pass each new line on once, escaped and cut (module docstring)."""

    def __init__(self, emit: Callable[[str], None], line_limit: int = LINE_LIMIT, max_lines: int = MAX_LINES) -> None:
        self.emit = emit
        self.line_limit = line_limit
        self.max_lines = max_lines
        self.seen: dict[bytes, int] = {}  # digest of a line passed on -> times it came again
        self.held = 0  # lines past max_lines, counted only
        self._buf = bytearray()
        self._extra = 0  # bytes of the current line past line_limit

    def feed(self, data: bytes) -> None:
        """Take the next bytes of the stream."""
        while data:
            end = data.find(b"\n")
            piece, data = (data, b"") if end < 0 else (data[:end], data[end + 1 :])
            room = max(self.line_limit * 4 - len(self._buf), 0)  # a character is at most 4 UTF-8 bytes
            self._buf += piece[:room]
            self._extra += len(piece) - min(len(piece), room)
            if end >= 0:
                self._line()

    def close(self) -> None:
        """The stream ended: pass on a last line that had no newline."""
        if self._buf or self._extra:
            self._line()

    def _line(self) -> None:
        raw, extra = bytes(self._buf), self._extra
        self._buf, self._extra = bytearray(), 0
        text = raw.decode("utf-8", "backslashreplace").rstrip("\r")
        cut = len(text) - self.line_limit if len(text) > self.line_limit else 0
        head = text[: self.line_limit]
        # lines that agree on all they keep are one line, however much of each was cut
        key = hashlib.blake2b(head.encode("utf-8", "surrogatepass") + bytes([bool(cut or extra)]), digest_size=16)
        key = key.digest()
        if cut or extra:
            text = f"{head}…[cut {cut + extra:,} more characters or bytes]"
        if key in self.seen:
            self.seen[key] += 1
            return
        if len(self.seen) >= self.max_lines:
            self.held += 1
            return
        self.seen[key] = 0
        self.emit(safe_text(text, limit=self.line_limit + 64))

    def summary(self) -> str:
        """What was held back, in one sentence ("" when nothing was)."""
        repeats = sum(self.seen.values())
        parts = []
        if repeats:
            lines = sum(1 for n in self.seen.values() if n)
            parts.append(f"{repeats:,} repeat(s) of {lines} line(s) already shown")
        if self.held:
            parts.append(f"{self.held:,} further line(s) past the first {self.max_lines}")
        return " and ".join(parts) + (" not shown" if parts else "")


def drain(fd: int, out: ForeignOutput, done: Callable[[str], None] | None = None) -> threading.Thread:
    """Read `fd` to its end on a daemon thread, feeding `out`; then close `fd` and call `done(out.summary())`.

    The thread never stops reading before the end (a writer blocked on a full pipe would hang), whatever `emit`
    raises: an `emit` that fails loses the line, not the stream.
    """

    def run() -> None:
        try:
            while True:
                try:
                    data = os.read(fd, CHUNK)
                except InterruptedError:
                    continue
                except OSError:
                    break
                if not data:
                    break
                try:
                    out.feed(data)
                except Exception:  # noqa: BLE001 (a failing emit must not stop the drain)
                    pass
            try:
                out.close()
                if done is not None:
                    done(out.summary())
            except Exception:  # noqa: BLE001
                pass
        finally:
            try:
                os.close(fd)
            except OSError:
                pass

    thread = threading.Thread(target=run, name="grpokit-foreign-output", daemon=True)
    thread.start()
    return thread
