"""The processes a reward call leaves behind: killed and reaped when the call returns.

A reward may start programs and not wait for them (`subprocess.Popen(...)`, `os.system("... &")`, a forked
helper). They would keep using CPU, memory and process slots while the trainer waits, beyond the per-call CPU
limit, which counts the worker's own time only. So when a call returns, the worker kills every process the
reward started:

- in its own pid namespace (the sandbox's usual case) with `kill(-1, SIGKILL)`: the kernel signals every
  process of that namespace except its pid 1 (the reaper) and the caller, programs that left the worker's
  process group with `setsid` included, and no process outside it;
- elsewhere (no user namespaces, or no sandbox), every child of the worker. The worker is then a child
  subreaper: the children of a killed program (daemons that left the session included) are handed to it, and
  killed in the next round, until none is left (at most `REAP_WAIT_S`).

Its own children are reaped too, so neither the kernel's process count nor the sandbox's sees zombies.
"""

from __future__ import annotations

import os
import signal
import time

REAP_WAIT_S = 1.0  # how long to wait for killed children to be reaped (they die at once unless stuck in the kernel)


def pid_namespace() -> str | None:
    """This process's pid namespace (`pid:[4026531836]`), None where /proc does not say."""
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return None


def kill_namespace_others() -> None:
    """SIGKILL every process of this pid namespace but pid 1 and this one. Only ever call this inside a pid
    namespace of the sandbox's own: anywhere else it would reach every process of the user."""
    try:
        os.kill(-1, signal.SIGKILL)
    except OSError:  # ESRCH: there was nothing else to kill
        pass


def children() -> list[int]:
    """Pids of this process's children (from /proc/self/task/*/children; a scan of /proc where the kernel lacks
    that file). /proc/self must show this process's own pid: not for use inside a pid namespace of its own."""
    try:
        tasks = os.listdir("/proc/self/task")
        found: list[int] = []
        for tid in tasks:
            with open(f"/proc/self/task/{tid}/children") as f:
                found += [int(p) for p in f.read().split()]
        return found
    except FileNotFoundError:
        return _children_by_scan(os.getpid())
    except OSError:
        return []


def _children_by_scan(me: int) -> list[int]:
    found = []
    try:
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return found
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                if int(f.read().rsplit(b")", 1)[1].split()[1]) == me:
                    found.append(pid)
        except (OSError, IndexError, ValueError):
            continue
    return found


def kill_children() -> list[int]:
    """SIGKILL every child of this process; returns them."""
    found = children()
    for pid in found:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    return found


def reap_children() -> bool:
    """Collect this process's exited children; whether any child is left (alive, or killed but not yet gone)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return False
        if pid == 0:
            return True


def end_leftovers(own_namespace: bool, wait_s: float = REAP_WAIT_S) -> None:
    """Kill and reap whatever the call left running; `own_namespace`: the worker serves from inside a pid
    namespace of its own (see the module docstring). Repeated until nothing is left or `wait_s` passed: a
    killed program's children are handed to this process (a child subreaper) and killed in the next round."""
    if not hasattr(os, "fork"):  # Windows: no process groups or children to collect here
        return
    deadline = time.monotonic() + wait_s
    while True:
        if own_namespace:
            kill_namespace_others()
            left = reap_children()
        else:
            left = bool(kill_children())  # found some: look again for their orphans once they are reaped
            reap_children()
        if not left or time.monotonic() >= deadline:
            return
        time.sleep(0.002)
