"""Per-worker cgroups (Linux, root, a writable cgroup filesystem): a process count and a real memory limit.

A worker started as root is exempt from RLIMIT_NPROC, and RLIMIT_AS does not follow it into programs it
runs; a cgroup bounds the worker and every process it starts, whatever they do. Both cgroup v1 (one hierarchy
per controller, e.g. /sys/fs/cgroup/pids) and v2 (the unified /sys/fs/cgroup) are handled. The worker creates
and joins `<its cgroup>/<name>`; the trainer removes it once the worker is gone. Where the filesystem is not
writable (not root, a read-only mount) nothing is created and the callers fall back to rlimits.
"""

from __future__ import annotations

import os
import time

_SETTINGS = {  # controller -> (v1 file, v2 file) holding its limit
    "pids": ("pids.max", "pids.max"),
    "memory": ("memory.limit_in_bytes", "memory.max"),
}


def candidates(controller: str, name: str) -> list[str]:
    """Where a cgroup `name` for `controller` would be created, beside this process's own cgroup."""
    out = []
    try:
        with open("/proc/self/cgroup") as f:
            lines = f.read().splitlines()
    except OSError:
        return out
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controller in controllers.split(","):
            out.append(os.path.join("/sys/fs/cgroup", controller, path.lstrip("/"), name))
        elif controllers == "" and os.path.exists("/sys/fs/cgroup/cgroup.controllers"):
            out.append(os.path.join("/sys/fs/cgroup", path.lstrip("/"), name))
    return out


def join(controller: str, name: str, limit: int) -> str | None:
    """Create cgroup `name` for `controller` with `limit`, move this process into it; its path or None."""
    for path in candidates(controller, name):
        created = not os.path.isdir(path)
        try:
            os.makedirs(path, exist_ok=True)
        except OSError:
            continue
        v1 = f"/{controller}/" in path
        try:
            with open(os.path.join(path, _SETTINGS[controller][0 if v1 else 1]), "w") as f:
                f.write(str(limit))
            with open(os.path.join(path, "cgroup.procs"), "w") as f:
                f.write("0")
            return path
        except OSError:
            if created:
                _rmdir(path, tries=1)
    return None


def oom_kills(name: str) -> int:
    """How many processes of cgroup `name` the kernel killed for exceeding its memory limit."""
    total = 0
    for path in candidates("memory", name):
        for fname in ("memory.oom_control", "memory.events"):
            try:
                with open(os.path.join(path, fname)) as f:
                    for line in f:
                        key, _, value = line.partition(" ")
                        total += int(value) if key == "oom_kill" else 0
            except (OSError, ValueError):
                continue
    return total


def _rmdir(path: str, tries: int) -> None:
    for _ in range(tries):  # killed processes may take a moment to be released from the group
        try:
            os.rmdir(path)
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.01)


def remove(name: str) -> None:
    """Remove the worker's (now empty) cgroups; called by the trainer after the worker is gone."""
    for controller in _SETTINGS:
        for path in candidates(controller, name):
            _rmdir(path, tries=20)


def sweep(prefix: str, older_than_s: float = 60.0) -> int:
    """Remove empty cgroups named `prefix*` left by workers whose trainer was killed; how many were removed.

    A cgroup that still holds a process cannot be removed (rmdir fails), so live workers are never touched.
    """
    removed = 0
    for controller in _SETTINGS:
        for parent in {os.path.dirname(p) for p in candidates(controller, "x")}:
            try:
                entries = [e for e in os.scandir(parent) if e.name.startswith(prefix) and e.is_dir()]
            except OSError:
                continue
            for entry in entries:
                try:
                    if time.time() - entry.stat().st_mtime > older_than_s:
                        os.rmdir(entry.path)
                        removed += 1
                except OSError:
                    continue
    return removed
