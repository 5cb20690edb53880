"""The reward worker process: its loop (confine itself, then serve one call per message and reply in JSON), the
parent's handle on one worker (start it in its own private directory, kill its whole process group), and the
sweep of private directories left by trainers that were killed. The parent-side pool is `isolation.py`.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from typing import Any

from . import calltree, cgroups, linux, wire
from .readable import read_roots
from .registry import load_reward
from .sandbox import (
    CPU_BUDGET_CALLS,
    SandboxLimits,
    apply_sandbox,
    set_call_cpu_limit,
    start_cpu_budget,
)
from .signature import adapt
from .violations import classify_violation

WORKDIR_PREFIX = "grpokit-reward-"  # the worker's private directory, and its cgroups, are named after it


def describe_exception(e: BaseException) -> str:
    """`Type: message (at file.py:12 in fn)` with the innermost frame of the traceback."""
    frames = traceback.extract_tb(e.__traceback__)
    text = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
    if not frames:
        return text
    last = frames[-1]
    return f"{text} (at {os.path.basename(last.filename)}:{last.lineno} in {last.name})"


def as_value_list(out: Any) -> Any:
    """A reward's return value as a list when it is an ordered sequence of values: a list, a tuple (any
    `Sequence` but a string), or a one-dimensional array or tensor. Anything else (a set, whose order is
    arbitrary, a dict, a generator, a string, a single number) is returned unchanged for the caller to report."""
    if isinstance(out, list) or isinstance(out, (str, bytes, bytearray)):
        return out
    if isinstance(out, Sequence) or (hasattr(out, "__array__") and getattr(out, "ndim", None) == 1):
        return list(out)
    return out


Table = dict[str, Callable[..., Any] | str]  # key -> a function, or a spec the worker imports itself


def _resolve_one(spec: str, cwd: str) -> tuple[Callable[..., Any] | str, dict[str, str]]:
    """(the adapted function, {"convention": ...}) or (the error message, {"error": ...}) for one spec."""
    try:
        fn = adapt(load_reward(spec, cwd))
        return fn, {"convention": fn.convention}
    except ValueError as e:
        return str(e), {"error": str(e)}
    except BaseException as e:  # SystemExit or KeyboardInterrupt from a module's top-level code
        message = f"reward {spec!r}: loading it raised {describe_exception(e)}"
        return message, {"error": message}


def resolve(table: Table, cwd: str) -> tuple[Table, dict[str, dict[str, str]]]:
    """Import and inspect the reward specs of `table` here, in the (sandboxed) worker: the trainer never runs a
    reward module's code. Relative paths, and the working directory on `sys.path`, are the trainer's `cwd`.
    Returns the table of functions (an error message where one failed to load) and what to report to the
    trainer for each spec: its convention, or the error."""
    sys.path[:] = [os.path.join(cwd, p) for p in sys.path]  # "" meant the trainer's directory, not the worker's
    functions: Table = {}
    report: dict[str, dict[str, str]] = {}
    for key, entry in table.items():
        if isinstance(entry, str):
            functions[key], report[key] = _resolve_one(entry, cwd)
        else:
            functions[key] = entry
    return functions, report


def _run_one(fn: Callable[..., Any], args: tuple[Any, ...], limits: SandboxLimits | None) -> tuple[str, Any]:
    """(status, payload) of one call inside the worker: "ok", "err" or "limit"."""
    try:
        return "ok", as_value_list(fn(*args))
    except BaseException as e:  # KeyboardInterrupt/SystemExit from a reward are its failures, not ours
        violation = classify_violation(e, limits) if limits is not None else None
        if violation is not None:
            return "limit", f"{violation} [{describe_exception(e)}]"
        if isinstance(e, (KeyboardInterrupt, SystemExit)):
            return "err", f"the reward raised {describe_exception(e)}"
        return "err", describe_exception(e)


def exit_like(status: int) -> None:
    """End this process the way a child with wait status `status` ended: by the same signal, or exit code."""
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            if sig not in (signal.SIGKILL, signal.SIGSTOP):
                signal.signal(sig, signal.SIG_DFL)
            os.kill(os.getpid(), sig)
            time.sleep(1.0)  # a deadly signal ends us before this returns
        except (OSError, ValueError):
            pass
    os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 1)


def single_threaded_torch() -> None:
    """A forked worker inherits the trainer's OpenMP runtime, which GNU OpenMP cannot start again after a fork (the
    hang PyTorch's multiprocessing notes describe): a reward's torch ops then wait forever in their first parallel
    region. Where the trainer has torch loaded, the worker's torch computes in one thread, which needs no OpenMP
    team (numpy's OpenBLAS pool and Python threads are unaffected)."""
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(1)


def fork_server(conn: Any) -> bool:
    """Fork the process that serves the calls, inside the pid namespace the sandbox started: True there.

    The sandbox's `unshare(CLONE_NEWPID)` moves only this process's future children into the new namespace,
    and the kernel then refuses this process every new thread (numpy/torch thread pools, ThreadPoolExecutor).
    Its child lives wholly inside the namespace and may start threads. This process stays as a supervisor that
    waits for the server and ends as it ended (so SIGXCPU or an OOM kill still reads as such in the trainer),
    and returns False. Where the fork fails the calls are served from here, without threads (True)."""
    try:
        pid = os.fork()
    except OSError:
        return True
    if pid == 0:
        single_threaded_torch()
        return True
    conn.close()  # the trainer sees end of file as soon as the server is gone
    while True:
        try:
            _, status = os.waitpid(pid, 0)
            break
        except InterruptedError:
            continue
    exit_like(status)
    return False


def _confine(
    conn: Any, limits: SandboxLimits, cpu_s: float, workdir: str, parent_pid: int, specs: list[str]
) -> dict[str, str] | None:
    """Apply the sandbox (in the serving process, see `fork_server`): what enforces each limit, or None when
    this process should end (the supervisor, once its server has ended; or a sandbox that failed, reported).
    `specs`: the reward specs this worker will import (their modules stay readable)."""
    try:
        readable = None if limits.read == "all" else read_roots(limits.readable, specs, os.getcwd())
        enforced = apply_sandbox(limits, workdir, parent_pid, {conn.fileno()}, readable)
        if "process tree" in enforced and not fork_server(conn):
            return None
        start_cpu_budget(limits.cpu_budget_s or CPU_BUDGET_CALLS * cpu_s)
    except Exception as e:
        why = describe_exception(e)
        conn.send_bytes(
            wire.encode("broken", 0, f"the reward sandbox could not be set up ({why}); sandbox=None skips it")
        )
        return None
    return enforced


def _reply(conn: Any, seq: int, status: str, payload: Any) -> None:
    if status == "ok":
        payload = wire.values_to_wire(payload)
    try:
        reply = wire.encode(status, seq, payload)
    except (TypeError, ValueError) as e:
        reply = wire.encode("err", seq, f"its return value could not be sent back: {describe_exception(e)}")
    conn.send_bytes(reply)


def serve(
    conn: Any,
    parent_end: Any,
    functions: Table,
    limits: SandboxLimits | None,
    cpu_s: float,
    workdir: str,
    parent_pid: int,
) -> None:
    """Worker loop: confine itself (reported as "ready"), import and inspect the reward specs of `functions`
    (reported as "loaded": `resolve`), then receive (seq, key, completions, examples, context) and reply
    (status, seq, payload) with status "ok", "err", "limit" or "recycle" (CPU budget used up). Whatever a call
    left running is killed before its reply (`calltree`)."""
    parent_end.close()
    if hasattr(os, "setpgrp"):
        os.setpgrp()  # own process group: a kill on timeout also reaches processes the reward started
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the trainer's to handle; it then kills us
    home, cwd = calltree.pid_namespace(), os.getcwd()
    if limits is not None:
        specs = [v for v in functions.values() if isinstance(v, str)]
        enforced = _confine(conn, limits, cpu_s, workdir, parent_pid, specs)
        if enforced is None:
            return
    own_namespace = home is not None and calltree.pid_namespace() not in (None, home)
    if not own_namespace:
        linux.set_child_subreaper()  # orphans of the reward's programs come to us, to be killed (calltree)
    if limits is not None:
        how = "kill(-1) in its pid namespace" if own_namespace else "its children, as a child subreaper"
        enforced["leftover processes"] = f"killed when each call returns ({how})"
        conn.send_bytes(wire.encode("ready", 0, enforced))  # sent before any reward code runs here
    functions, report = resolve(functions, cwd)
    calltree.end_leftovers(own_namespace)  # whatever a module's import started
    conn.send_bytes(wire.encode("loaded", 0, report))
    while True:
        try:
            seq, key, completions, examples, context = conn.recv()
        except (EOFError, OSError):
            return  # the trainer closed the pipe or died
        if limits is not None and not set_call_cpu_limit(cpu_s):
            conn.send_bytes(wire.encode("recycle", seq, None))
            return
        fn = functions[key]
        if isinstance(fn, str):  # it failed to load in this worker
            status, payload = "err", fn
        else:
            status, payload = _run_one(fn, (completions, examples, context), limits)
        calltree.end_leftovers(own_namespace)
        _reply(conn, seq, status, payload)


class Worker:
    """One worker process, the parent's end of its pipe and its private directory."""

    def __init__(self, ctx: Any, functions: Table, limits: SandboxLimits | None, cpu_s: float) -> None:
        self.conn, there = ctx.Pipe()
        # the trainer's pid in the name lets a later trainer remove it if this one is killed (see sweep_workdirs)
        self.workdir = tempfile.mkdtemp(prefix=f"{WORKDIR_PREFIX}{os.getpid()}-")
        self.enforced: dict[str, str] | None = None
        self.loaded: dict[str, dict[str, str]] | None = None  # each spec's convention or error, once reported
        # not a daemon, so rewards may use multiprocessing themselves; the finalizer below stops it at exit
        self.proc = ctx.Process(
            target=serve,
            args=(there, self.conn, functions, limits, cpu_s, self.workdir, os.getpid()),
            name="grpokit-reward-worker",
        )
        self.proc.start()
        there.close()

    def kill(self) -> None:
        """Kill the worker's process group (it and whatever the reward started), reap it, remove its dir."""
        self.conn.close()
        if self.proc.is_alive():
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (AttributeError, OSError):  # no process groups here, or setpgrp not reached yet
                self.proc.kill()
        self.proc.join(timeout=5)
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)  # children the reward left behind in the group
        except (AttributeError, OSError):
            pass
        shutil.rmtree(self.workdir, ignore_errors=True)
        cgroups.remove(os.path.basename(self.workdir))

    def close(self) -> None:
        """Close the pipe so an idle worker exits by itself; kill it if it does not within 0.5 s."""
        self.conn.close()
        self.proc.join(timeout=0.5)
        self.kill()


def sweep_workdirs(older_than_s: float = 60.0) -> int:
    """Remove private directories of workers whose trainer is gone (killed before it could clean up).

    Only directories named after a trainer pid that no longer exists are touched: a live trainer's worker may
    have its private tmpfs mounted on its directory, and removing that would detach it.
    """
    removed = 0
    base = tempfile.gettempdir()
    try:
        entries = [e for e in os.scandir(base) if e.name.startswith(WORKDIR_PREFIX) and e.is_dir()]
    except OSError:
        return 0
    for entry in entries:
        owner = entry.name[len(WORKDIR_PREFIX) :].split("-", 1)[0]
        if not owner.isdigit():
            continue
        try:
            os.kill(int(owner), 0)
            continue  # that trainer is alive
        except ProcessLookupError:
            pass
        except OSError:  # alive but not ours to signal
            continue
        try:
            if time.time() - entry.stat().st_mtime > older_than_s:
                shutil.rmtree(entry.path)
                removed += 1
        except OSError:
            continue
    return removed
