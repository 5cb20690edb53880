"""The reward worker process: its loop (confine itself, then serve one call per message and reply in JSON) and
what it resolves (functions sent by the trainer, reward and tool specs it imports itself). The trainer's handle
on it (start, kill, sweep) is `launch.py`; the parent-side pool is `isolation.py`.

The worker is a fresh interpreter (`subprocess`, exec), never a bare fork of the trainer: a forked child would
hold a copy of the trainer's memory, and the kernel's copy of its environment (`/proc/self/environ`) keeps every
secret even after `os.environ.clear()`. The interpreter starts with the allow-listed environment alone
(`environment.worker_environment`) and receives, over its pipe, a `Boot` message: the trainer's `sys.path`, the
limits, and each function of the table pickled with cloudpickle (functions from importable modules by
reference, closures and `__main__` functions by value). The functions are unpickled only once the sandbox is in
place, so a module they import runs confined.
"""

from __future__ import annotations

import os
import pickle
import signal
import time
import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from . import calltree, linux, wire
from .readable import read_roots
from .registry import load_reward
from .sandbox import (
    CPU_BUDGET_CALLS,
    SandboxLimits,
    apply_sandbox,
    confine_files,
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


MAX_ITERATED = 1 << 20  # the most values read from a reward's iterator (a generator), so an endless one is bounded


def as_value_list(out: Any) -> Any:
    """A reward's return value as a list when it is an ordered, finite collection of values: a list, a tuple
    (any `Sequence` but a string), a one-dimensional array or tensor, or an iterator such as a generator (TRL
    iterates whatever a reward returns), read up to `MAX_ITERATED` values. Anything else (a set, whose order
    is arbitrary, a dict, a string, a single number) is returned unchanged for the caller to report.
    An iterator is read inside the reward's call, so what it raises is the reward's failure."""
    if isinstance(out, list) or isinstance(out, (str, bytes, bytearray)):
        return out
    if isinstance(out, Sequence) or (hasattr(out, "__array__") and getattr(out, "ndim", None) == 1):
        return list(out)
    if isinstance(out, Iterable) and not isinstance(out, (AbstractSet, Mapping)):
        values = []
        for v in out:
            values.append(v)
            if len(values) > MAX_ITERATED:
                raise ValueError(f"the reward's iterator yielded more than {MAX_ITERATED} values")
        return values
    return out


@dataclass(frozen=True)
class WorkerSpec:
    """A spec the worker imports itself with `load(spec, cwd) -> (function, report)`, where `report` is what the
    trainer learns of it (one string entry, e.g. {"schema": ...} for a tool; grpokit/agents/execution.py).
    `load` is pickled by reference: a module-level function of grpokit."""

    spec: str
    load: Callable[[str, str], tuple[Callable[..., Any], dict[str, str]]]


# key -> a function (pickled to the worker), a reward spec or a WorkerSpec, which the worker imports itself
Table = dict[str, "Callable[..., Any] | str | WorkerSpec"]


def load_reward_spec(spec: str, cwd: str, convention: str = "auto") -> tuple[Callable[..., Any], dict[str, str]]:
    """A reward spec's adapted function (in `convention`, or the one it declares) and its report: {"convention"}."""
    fn = adapt(load_reward(spec, cwd), convention)
    return fn, {"convention": fn.convention}


def _resolve_one(entry: str | WorkerSpec, cwd: str) -> tuple[Callable[..., Any] | str, dict[str, str]]:
    """(the function, its report) or (the error message, {"error": ...}) for one spec."""
    spec, load = (entry, load_reward_spec) if isinstance(entry, str) else (entry.spec, entry.load)
    try:
        return load(spec, cwd)
    except ValueError as e:
        return str(e), {"error": str(e)}
    except BaseException as e:  # SystemExit or KeyboardInterrupt from a module's top-level code
        message = f"{spec!r}: loading it raised {describe_exception(e)}"
        return message, {"error": message}


def _unpickle(key: str, blob: bytes) -> Callable[..., Any] | str:
    """A function of the table as sent by the trainer, or the message saying why it cannot be loaded here."""
    try:
        return pickle.loads(blob)  # noqa: S301 (from the trainer: the trusted direction)
    except BaseException as e:  # a module it refers to failed to import (unreadable in the sandbox, or raising)
        return (
            f"reward {key!r} could not be loaded in the reward worker: {describe_exception(e)}. A function given in "
            "Python must be importable there (its module readable: see reward.sandbox_readable) or defined in "
            "__main__ or inside a function"
        )


def resolve(table: dict[str, Any], cwd: str) -> tuple[dict[str, Any], dict[str, dict[str, str]]]:
    """Unpickle the functions of `table` (bytes) and import and inspect its specs here, in the (sandboxed)
    worker: the trainer never runs a reward or tool module's code. Relative paths are the trainer's `cwd`.
    Returns the table of functions (an error message where one failed to load) and what to report to the
    trainer for each spec: its report (convention, schema), or the error."""
    functions: dict[str, Any] = {}
    report: dict[str, dict[str, str]] = {}
    for key, entry in table.items():
        if isinstance(entry, bytes):
            functions[key] = _unpickle(key, entry)
        else:
            functions[key], report[key] = _resolve_one(entry, cwd)
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


@dataclass(frozen=True)
class Boot:
    """What the trainer sends a fresh worker interpreter first (pickled: the trusted direction). `table` maps
    each key to a cloudpickled function (bytes), a reward spec or a `WorkerSpec`."""

    table: dict[str, Any]
    limits: SandboxLimits | None
    cpu_s: float
    workdir: str
    parent_pid: int
    cwd: str
    environment: str  # what the allow-list dropped, for the sandbox report
    files: tuple[str, ...] = ()  # the module files of the table's functions (readable: `function_files`)


class SandboxRefused(Exception):
    """The kernel offers too little to confine user code, and the user did not accept that (`python_only`)."""


def _refuse_python_only(limits: SandboxLimits, enforced: dict[str, str]) -> None:
    """Fail closed where only the Python audit hook would confine the filesystem (no Landlock), unless
    `limits.python_only` accepts it."""
    if limits.python_only or not enforced.get("filesystem", "").startswith("audit hook"):
        return
    why = enforced.get("unavailable", "no Landlock")
    raise SandboxRefused(
        f"the reward sandbox cannot confine files here ({why}): only a Python audit hook would remain, which a "
        "program the reward runs, or ctypes, walks past (~/.ssh, the network, writes anywhere). User reward and "
        "tool code is refused; run on a kernel with Landlock (5.13+) and user namespaces, or accept Python-level "
        "checks only with --set reward.sandbox_python_only=true"
    )


def _confine(conn: Any, boot: Boot, specs: list[str]) -> dict[str, str] | None:
    """Apply the sandbox: what enforces each limit, or None when this process should end (the supervisor, once
    its server has ended; or a sandbox that failed or was refused, reported). The file rules are applied in
    the serving process (after `fork_server`), so `/proc/self` is the process that runs the reward.
    `specs`: the reward specs this worker will import (their modules stay readable)."""
    limits = boot.limits
    assert limits is not None
    try:
        readable = None if limits.read == "all" else read_roots(limits.readable, specs, boot.cwd, boot.files)
        enforced = apply_sandbox(limits, boot.workdir, boot.parent_pid, {conn.fileno()})
        if "process tree" in enforced and not fork_server(conn):
            return None
        confine_files(limits, boot.workdir, readable, enforced)
        enforced["environment"] = boot.environment
        _refuse_python_only(limits, enforced)
        start_cpu_budget(limits.cpu_budget_s or CPU_BUDGET_CALLS * boot.cpu_s)
    except SandboxRefused as e:
        conn.send_bytes(wire.encode("refused", 0, str(e)))
        return None
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


def serve(conn: Any, boot: Boot) -> None:
    """Worker loop: confine itself (reported as "ready"), unpickle the functions and import and inspect the
    specs of the table (reported as "loaded": `resolve`), then receive (seq, key, completions, examples,
    context) and reply (status, seq, payload) with status "ok", "err", "limit" or "recycle" (CPU budget used
    up). Whatever a call left running is killed before its reply (`calltree`)."""
    try:
        os.setpgrp()  # own process group (the trainer starts it as a session leader, which has one already)
    except OSError:
        pass
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the trainer's to handle; it then kills us
    limits = boot.limits
    home = calltree.pid_namespace()
    if limits is not None:
        specs = [v.spec if isinstance(v, WorkerSpec) else v for v in boot.table.values() if not isinstance(v, bytes)]
        enforced = _confine(conn, boot, specs)
        if enforced is None:
            return
    else:
        os.chdir(boot.workdir)
    own_namespace = home is not None and calltree.pid_namespace() not in (None, home)
    if not own_namespace:
        linux.set_child_subreaper()  # orphans of the reward's programs come to us, to be killed (calltree)
    if limits is not None:
        how = "kill(-1) in its pid namespace" if own_namespace else "its children, as a child subreaper"
        enforced["leftover processes"] = f"killed when each call returns ({how})"
        conn.send_bytes(wire.encode("ready", 0, enforced))  # sent before any reward code runs here
    functions, report = resolve(boot.table, boot.cwd)
    calltree.end_leftovers(own_namespace)  # whatever a module's import started
    conn.send_bytes(wire.encode("loaded", 0, report))
    while True:
        try:
            seq, key, completions, examples, context = conn.recv()
        except (EOFError, OSError):
            return  # the trainer closed the pipe or died
        if limits is not None and not set_call_cpu_limit(boot.cpu_s):
            conn.send_bytes(wire.encode("recycle", seq, None))
            return
        fn = functions[key]
        if isinstance(fn, str):  # it failed to load in this worker
            status, payload = "err", fn
        else:
            status, payload = _run_one(fn, (completions, examples, context), limits)
        calltree.end_leftovers(own_namespace)
        _reply(conn, seq, status, payload)


def boot(conn: Connection) -> None:
    """The worker interpreter's entry (`BOOT`): die with the trainer, read the `Boot` message, serve."""
    message = pickle.loads(conn.recv_bytes())  # noqa: S301 (from the trainer: the trusted direction)
    linux.set_parent_death_signal()
    if os.getppid() != message.parent_pid:  # the trainer died before the prctl
        os._exit(0)
    try:
        serve(conn, message)
    except (OSError, EOFError):  # the trainer closed the pipe (it is done with us, or gone)
        pass
    os._exit(0)  # no interpreter shutdown work (atexit handlers of reward modules) after the trainer is gone
