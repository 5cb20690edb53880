"""Telling a sandbox limit from a reward's own error: the exception a reward raised, read as the limit it hit."""

from __future__ import annotations

import errno

from .limits import SandboxLimits, SandboxViolation

_ERRNO_LIMITS = {
    errno.ENETUNREACH: "network",
    errno.ENETDOWN: "network",
    errno.EHOSTUNREACH: "network",
    errno.EAGAIN: "processes",
    errno.EMFILE: "open files",
    errno.EFBIG: "file size",
    errno.EROFS: "filesystem",
    errno.ENOSPC: "directory size",
}


def classify_violation(e: BaseException, limits: SandboxLimits) -> str | None:
    """`"<limit>: explanation"` when exception `e` is the sandbox refusing something, else None."""
    if isinstance(e, MemoryError):
        return f"memory: out of the {limits.memory_mb} MiB the sandbox allows (MemoryError)"
    if isinstance(e, SandboxViolation):
        kind = "network" if "network" in str(e) else "filesystem"
        return f"{kind}: {e.strerror}" + (f": {e.filename}" if e.filename else "")
    if not isinstance(e, OSError) or e.errno is None:
        return None
    if e.errno in (errno.EACCES, errno.EPERM):
        if str(e.filename or "").startswith("/proc/") and not str(e.filename).startswith("/proc/self"):
            return (
                f"processes: reading {str(e.filename)!r} was refused by the sandbox's Landlock layer (of /proc a "
                "reward reads only its own process, /proc/self, and the system-wide files libraries read; another "
                "process's command line, environment and memory are not granted)"
            )
        if e.filename is not None:
            return (
                f"filesystem: permission denied on {e.filename!r} (the sandbox allows writing only in the "
                "reward's private directory, and reading only Python, the system, the data and the run directory "
                "unless reward.sandbox_read=all or reward.sandbox_readable names it)"
            )
        return f"network or permission: {e.strerror} (network, unix sockets and signals to other processes are denied)"
    limit = _ERRNO_LIMITS.get(e.errno)
    if limit is None:
        return None
    detail = {
        "network": "the reward sandbox has no network",
        "processes": f"at most {limits.max_procs} processes",
        "open files": f"at most {limits.max_open_files} open files",
        "file size": f"files up to {limits.max_file_mb} MiB",
        "filesystem": "read-only filesystem",
        "directory size": f"the private directory holds at most {limits.max_dir_mb} MiB",
    }[limit]
    return f"{limit}: {e.strerror} ({detail})"
