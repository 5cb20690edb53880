"""Run directories, claimed atomically: two runs started at once never share one, and a run is trained by one
process at a time.

A directory is claimed by creating its marker file `.grpokit-run` (written aside, then hard-linked into place,
which fails when the marker exists: atomic on every local filesystem): the first process wins and the other moves
on to `NAME-1`, `NAME-2`, ... An existing directory is reused only when it is empty (a folder made for the run
beforehand).

The marker records its claimant: the process id, the process's start time (Linux `/proc/PID/stat`, so a pid
reused by another process does not count as the claimant) and the directory as it resolved then (a copy of a run
directory holds another path, so a copy is never "in use"). A claim is live while its process runs:
`claim_existing_run` (a `--resume`) refuses a run whose claimant still runs, and takes over a claim whose process
has ended (a crash, a kill -9), so a crashed run can always be resumed. `release_claim` empties the marker when a
process is done with the run; `abandon_new_run` removes the claim of a run that stopped before writing anything.

A candidate that is a symbolic link is refused (`RunDirError`), never claimed: the run would be written wherever it
points (a planted `--out P --name N` link to another folder).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .outcome import OUTCOME_FILE, last_step, message_of, read_outcome, status_of, write_outcome

MARKER = ".grpokit-run"


class RunInUseError(ValueError):
    """The run directory is claimed by a grpokit process that is still running."""


class RunDirError(ValueError):
    """No run directory can be made where asked (a file in the way, no permission)."""


def process_start(pid: int) -> str | None:
    """The start time of process `pid` in clock ticks since boot (Linux), None when unknown or not running; a
    zombie (ended, not yet reaped) counts as not running."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    if not fields or fields[0] in ("Z", "X"):
        return None
    return fields[19] if len(fields) > 19 else None


def claim_record(path: Path, *, created: bool) -> dict[str, Any]:
    """This process's claim of `path`; `created`: whether the claim made the directory (removed on abandon)."""
    pid = os.getpid()
    return {"pid": pid, "start": process_start(pid), "dir": str(path.resolve()), "created": created}


def read_claim(path: Path) -> dict[str, Any] | None:
    """The claim in `path`'s marker (markers written before claims were records hold a bare pid); None when there
    is none or it cannot be read."""
    try:
        text = (path / MARKER).read_text(errors="replace").strip()
    except OSError:
        return None
    if text.isdigit():
        return {"pid": int(text)}
    try:
        claim = json.loads(text) if text else None
    except (json.JSONDecodeError, RecursionError):
        return None
    return claim if isinstance(claim, dict) and isinstance(claim.get("pid"), int) else None


def _pid_runs(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return pid > 0
    return True


def claim_is_live(claim: dict[str, Any] | None, path: Path, *, own: bool = False) -> bool:
    """Whether `claim` is held by a process that still runs, on this very directory; a claim of this process
    counts only when `own` (a new run in this process still owns its directory; a resume in the same process
    comes after the run it continues)."""
    if not claim or claim["pid"] <= 0:
        return False
    if claim["pid"] == os.getpid():  # this process, unless the pid belonged to an earlier one
        return own and claim.get("start") in (None, process_start(os.getpid()))
    if claim.get("dir") not in (None, str(path.resolve())):
        return False  # the marker came with a copy of another run directory
    if claim.get("start") is not None:
        return process_start(claim["pid"]) == claim["start"]
    if Path("/proc/self/stat").exists():  # a bare pid: live if that process runs grpokit
        try:
            return (
                process_start(claim["pid"]) is not None
                and b"grpokit" in Path(f"/proc/{claim['pid']}/cmdline").read_bytes()
            )
        except OSError:
            return False
    return _pid_runs(claim["pid"])


def _write_marker(path: Path, claim: dict[str, Any], *, exclusive: bool) -> bool:
    """Put `claim` in `path`'s marker: written aside, then linked into place when `exclusive` (False when a
    marker exists) or renamed over the old one."""
    tmp = path / f"{MARKER}.{os.getpid()}-{threading.get_ident()}.tmp"
    tmp.write_text(json.dumps(claim) + "\n")
    try:
        if not exclusive:
            os.replace(tmp, path / MARKER)
            return True
        try:
            os.link(tmp, path / MARKER)
        except FileExistsError:
            return False
        except OSError:  # a filesystem without hard links: create the marker exclusively, then fill it
            try:
                fd = os.open(path / MARKER, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                return False
            with os.fdopen(fd, "w") as f:
                f.write(json.dumps(claim) + "\n")
        return True
    finally:
        tmp.unlink(missing_ok=True)


def create_claim(path: Path, *, created: bool) -> bool:
    """Claim `path` (an existing directory) by creating its marker; False when a marker is already there."""
    return _write_marker(path, claim_record(path, created=created), exclusive=True)


@contextlib.contextmanager
def dir_lock(path: Path) -> Iterator[None]:
    """An exclusive lock on the directory itself while its claim is read and replaced (flock; none where the
    platform has no fcntl)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        yield
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def take_over_stale_claim(path: Path, *, created: bool) -> bool:
    """Claim `path`, whose marker exists, when its claimant no longer runs; False when it still does (this process
    included: two runs started in one process never share a directory)."""
    with dir_lock(path):
        if claim_is_live(read_claim(path), path, own=True):
            return False
        return _write_marker(path, claim_record(path, created=created), exclusive=False)


def claim_existing_run(path: Path) -> None:
    """Claim a run directory for this process to continue it (`--resume`): RunInUseError naming the process when
    another grpokit process still trains it; a claim left by a process that has ended is taken over."""
    with dir_lock(path):
        claim = read_claim(path)
        if claim_is_live(claim, path):
            raise RunInUseError(
                f"--resume {path}: the run is in use by grpokit process {claim['pid']} (the run itself or another "
                "--resume, still running); wait for it to end or stop it, then resume"
            )
        _write_marker(path, claim_record(path, created=False), exclusive=False)


def _is_mine(path: Path) -> bool:
    claim = read_claim(path)
    return bool(claim) and claim["pid"] == os.getpid() and claim.get("start") == process_start(os.getpid())


def release_claim(path: Path) -> None:
    """This process is done with the run: empty its marker (the directory stays a claimed grpokit run)."""
    with contextlib.suppress(OSError):
        if _is_mine(path):
            _write_marker(path, {}, exclusive=False)


def abandon_new_run(path: Path, before: set[str] | frozenset[str] = frozenset()) -> bool:
    """A new run stopped before writing anything (beyond the entries `before`, which were there when it claimed
    the directory): remove its claim, and the directory when the claim created it and nothing else is in it. True
    when the directory was removed."""
    claim = read_claim(path)
    if not _is_mine(path) or any(p.name != MARKER and p.name not in before for p in path.iterdir()):
        return False
    (path / MARKER).unlink(missing_ok=True)
    if claim and claim.get("created"):
        with contextlib.suppress(OSError):
            path.rmdir()
            return True
    return False


@dataclass
class RunEnd:
    """What the trainer adds to a run's outcome when it completes (e.g. it stopped because the task is learned)."""

    message: str = ""


def run_end(path: Path) -> dict[str, Any] | None:
    """How the grpokit run in `path` ended (`outcome.json`); `running` while a live process holds its claim;
    `unknown` for a claimed run with neither (killed outright, or written before grpokit recorded outcomes);
    None for a directory that is no grpokit run."""
    recorded = read_outcome(path)
    if recorded is not None:
        return recorded
    claim = read_claim(path)
    if claim_is_live(claim, path):
        return {"status": "running", "step": last_step(path), "message": f"process {claim['pid']} is training it"}
    if (path / MARKER).exists():
        msg = "no recorded end: killed outright (kill -9, out of memory, power loss) or older than outcome.json"
        return {"status": "unknown", "step": last_step(path), "message": msg}
    return None


def started(path: Path) -> bool:
    """Whether the run got anywhere worth keeping: a checkpoint, or a logged step after the first."""
    step = last_step(path)
    return (path / "checkpoints").is_dir() or (step is not None and step >= 1)


def remove_unstarted(path: Path, before: set[str]) -> None:
    """A new run that failed before its first step: remove what it wrote (entries not in `before`), so that the
    retry may use the directory; the claim itself is removed by `abandon_new_run`."""
    for entry in path.iterdir():
        if entry.name in before or entry.name == MARKER:
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)


@contextlib.contextmanager
def claimed_run(path: Path, *, new: bool) -> Iterator[RunEnd]:
    """Train in `path` holding its claim: a resume (`new` False) claims it first (`claim_existing_run`; under
    torchrun rank 0 alone, the ranks share one run); the claim is released when training ends, and how it ended is
    written to `outcome.json` (`grpokit.run.outcome`). A new run that stops before its first step (a signal or an
    error while the model loads or in the first evaluation) leaves nothing behind: what it wrote is removed, and
    the directory too when the claim made it, so the retry starts where this one did."""
    main = os.environ.get("RANK", "0") == "0"
    if not new and main:
        claim_existing_run(path)
        (path / OUTCOME_FILE).unlink(missing_ok=True)  # training again: the last segment's end no longer holds
    before = {p.name for p in path.iterdir()} if new else set()
    end = RunEnd()
    try:
        yield end
    except BaseException as e:
        if new and not started(path):
            if main:
                remove_unstarted(path, before)
            abandon_new_run(path, before)  # the error (one line) is said by the caller
        elif main:
            write_outcome(path, status_of(e), message_of(e))
        raise
    else:
        if main:
            write_outcome(path, "completed", end.message)
    finally:
        release_claim(path)


def _claim(path: Path) -> bool:
    if path.is_symlink():  # a link grpokit did not make: the run would be written wherever it points
        raise RunDirError(
            f"--out {path.parent}: {path.name} is a symbolic link (to {os.readlink(path)!r}), not a folder grpokit "
            "made; a run is never written through a link: remove the link, or pick another --name"
        )
    existed = path.is_dir()
    try:
        path.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        return False  # a file of that name
    if any(p.name != MARKER for p in path.iterdir()):
        return False  # an earlier run (or anything else) lives there
    return create_claim(path, created=not existed)  # False: another process claimed it first


def claim_run_dir(base: Path) -> Path:
    """`base`, or the first free `base-1`, `base-2`, ..., created and claimed for this process. RunDirError when
    none can be made there: a parent that is a file (every candidate would fail: this looped for ever), no
    permission."""
    parent = next((p for p in base.parents if p.exists()), None)
    if parent is not None and not parent.is_dir():
        raise RunDirError(f"--out {base.parent}: {parent} is a file, not a directory; a run directory cannot be made")
    i = 0
    while True:
        candidate = base if i == 0 else base.with_name(f"{base.name}-{i}")
        try:
            if _claim(candidate):
                return candidate
        except OSError as e:
            raise RunDirError(f"--out {base.parent}: cannot make a run directory there ({e.strerror or e})") from None
        i += 1
