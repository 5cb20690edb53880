"""Files read with bounds: every whole file grpokit reads from a path the user named or a run directory holds
(`--config`, `--recipe`, `--labeled`, a data file, `run.json`, `outcome.json`, the files `doctor` and `report`
read) goes through `open_regular`, `read_bytes`, `read_text` or `read_json`, so a FIFO, a device or a file that
grows without end is one `UnreadableInput` line naming the file, never a hang or gigabytes read.

- The file is opened with `O_NONBLOCK` (opening a FIFO with no writer would block) and refused unless `fstat` says
  it is a regular file (a FIFO, `/dev/zero`, a socket or a directory is named as what it is); the flag is then
  cleared, so reads of the regular file behave as usual.
- At most `limit` bytes are read: a file larger than that (by `fstat`, or by what a read returns from a file that
  grew meanwhile) is refused with the limit named. `lines` bounds each line the same way, so a JSON-lines file
  that grows without a newline holds at most one line's limit in memory.
- `read_json` refuses nesting deeper than Python's recursion limit (json's decoder recurses once per level) in
  one line instead of a `RecursionError`.
"""

from __future__ import annotations

import fcntl
import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from .errors import GrpokitError

MIB = 1 << 20
CONFIG_LIMIT = 16 * MIB  # a YAML config, a recipe: the largest verl config we know is 40 KB
JSON_LIMIT = 64 * MIB  # run.json, outcome.json, a model's config.json, a TRL trainer_state.json
LINE_LIMIT = 64 * MIB  # one record of a JSON-lines file
LOG_LIMIT = 512 * MIB  # a whole log read at once (metrics.jsonl for a report): ~10^6 rows of 500 bytes


class UnreadableInput(GrpokitError, ValueError):
    """A file that is not a regular file, or larger than its limit: `error: <file>: <why>; <fix>`, exit 2."""

    exit_code = 2


def _kind(mode: int) -> str:
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


def _mib(n: int) -> str:
    return f"{n / MIB:g} MiB" if n >= MIB else f"{n} bytes"


def too_large(path: str | Path, limit: int, what: str = "file") -> UnreadableInput:
    return UnreadableInput(f"{path}: {what} larger than {_mib(limit)}, the limit for it; give a smaller file")


def open_regular(path: str | Path) -> IO[bytes]:
    """`path` opened for binary reading without blocking on a FIFO, or UnreadableInput when it is not a regular
    file (an OSError such as FileNotFoundError passes through)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise UnreadableInput(f"{path}: {_kind(mode)}, not a regular file; give a regular file")
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def refuse_special(path: str | Path) -> None:
    """UnreadableInput when `path` (links followed) is neither a regular file nor a directory: a FIFO, a device
    or a socket given where a file or a folder of them is read by a library that would block on it."""
    mode = os.stat(path).st_mode
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        raise UnreadableInput(f"{path}: {_kind(mode)}, not a regular file; give a regular file")


def read_bytes(path: str | Path, limit: int = JSON_LIMIT) -> bytes:
    """The whole of a regular file of at most `limit` bytes; UnreadableInput otherwise."""
    with open_regular(path) as f:
        if os.fstat(f.fileno()).st_size > limit:
            raise too_large(path, limit)
        data = f.read(limit + 1)
    if len(data) > limit:  # it grew while being read
        raise too_large(path, limit)
    return data


def read_text(path: str | Path, limit: int = JSON_LIMIT, errors: str = "strict") -> str:
    """`read_bytes` decoded as UTF-8 (`errors` as `bytes.decode` takes it)."""
    return read_bytes(path, limit).decode("utf-8", errors)


def read_json(path: str | Path, limit: int = JSON_LIMIT) -> Any:
    """A JSON file's value within the size limit and the nesting depth; UnreadableInput past them, ValueError
    (json.JSONDecodeError, UnicodeDecodeError) for a file that is not JSON."""
    return loads_json(read_text(path, limit), str(path))


def loads_json(text: str | bytes, source: str) -> Any:
    """`json.loads` with nesting deeper than the decoder can recurse refused in one line naming `source`."""
    try:
        return json.loads(text)
    except RecursionError:
        raise UnreadableInput(f"{source}: JSON nested too deeply to be read; fix the file") from None


def lines(f: IO[bytes], path: str | Path, limit: int | None = None) -> Iterator[bytes]:
    """The lines of a binary file, each at most `limit` bytes (default LINE_LIMIT; newline included);
    UnreadableInput for a longer one, so a file that grows without a newline is refused, not read into memory."""
    limit = LINE_LIMIT if limit is None else limit
    while True:
        line = f.readline(limit + 1)
        if not line:
            return
        if len(line) > limit:
            raise too_large(path, limit, "a line")
        yield line
