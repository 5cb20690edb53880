"""Running one reward call: in-process, or in a long-lived sandboxed worker process killed when a call hangs.

`InlineRunner` calls the function directly (no timeout; for the bounded built-ins). `ProcessRunner` keeps
one worker process per `RewardManager`: a fresh interpreter (`worker.py`: exec, never a bare fork of the
trainer, so it holds none of the trainer's memory or environment) started with the allow-listed environment.
A call is one pickled message over a pipe and one JSON reply (`wire.py`: the trainer never unpickles what the
worker sends); the parent waits with `poll(timeout)`, and on timeout kills the worker's whole process group
(SIGKILL) and starts a fresh one on the next call. What a call and a worker start cost: docs/benchmarks.md, "The
reward worker".
Functions given in Python are sent with cloudpickle and unpickled by the worker once its sandbox is in place; reward
*specs* (`module:function`, `file.py:function`) and tool specs are imported and inspected by the worker itself,
and never in the trainer (a module's top-level code runs confined, like its calls); the worker reports each
one's convention (or schema) or error ("loaded"). The parent-death signal follows the thread that started the
worker, so it is started from the thread that will call it.

Unless `sandbox=None`, the worker confines itself first (`sandbox.py`: no network, memory/CPU/file/process
limits, writes only in a private temporary directory the parent creates and removes, killed with its parent)
and reports which mechanism enforces each limit and which the kernel refused ("ready"); where only a Python
audit hook could confine its files it refuses user code instead (`SandboxRefused`), unless the limits accept
that. A reward stopped by a limit is one failure of kind "sandbox" naming the limit; the worker is then
replaced, so whatever the reward started dies with it. A reward raising KeyboardInterrupt or SystemExit is one
"exception" failure.

This module is the parent's side (the runners, their errors, reading the worker's death); the worker process
itself (its loop, the handle that starts and kills it, the sweep of stale private directories) is `worker.py`.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from collections.abc import Callable
from multiprocessing.reduction import ForkingPickler
from multiprocessing.util import Finalize
from typing import Any

from ..data.example import Example
from . import cgroups, wire
from .launch import Worker, function_files, pickle_table, sweep_workdirs
from .sandbox import SandboxLimits
from .signature import CallContext
from .worker import WORKDIR_PREFIX, Table, as_value_list, describe_exception

log = logging.getLogger(__name__)
LOAD_TIMEOUT_S = 120.0  # how long a worker may take to import the reward modules it resolves (heavy imports)
__all__ = [
    "WORKDIR_PREFIX",
    "LOAD_TIMEOUT_S",
    "InlineRunner",
    "ProcessRunner",
    "RewardCallError",
    "RewardCallLimit",
    "RewardCallTimeout",
    "SandboxBroken",
    "SandboxRefusedError",
    "as_value_list",
    "describe_exception",
    "sweep_workdirs",
]


class RewardCallError(Exception):
    """The reward function raised (message: exception type, text and where), or its worker died."""


class SandboxBroken(RewardCallError):
    """The worker's sandbox could not be set up (every call fails with the reason)."""


class SandboxRefusedError(SandboxBroken):
    """The kernel offers too little to confine user code here (no Landlock) and the limits do not accept
    Python-level checks alone (`SandboxLimits.python_only`): the message says what is missing and the switch."""


class RewardCallTimeout(Exception):
    """The reward function did not return within the timeout (its worker was killed)."""


class RewardCallLimit(Exception):
    """The sandbox stopped the reward (memory, CPU time, network, filesystem, processes, open files)."""


class InlineRunner:
    """Calls reward functions in this process. No timeout: only for rewards that cannot hang."""

    def call(
        self,
        key: str,
        fn: Callable[..., Any],
        completions: list[str],
        examples: list[Example],
        timeout: float,
        context: CallContext | None = None,
    ) -> Any:
        """The function's return value (as a list); `RewardCallError` if it raised."""
        try:
            return as_value_list(fn(completions, examples, context))
        except Exception as e:
            raise RewardCallError(describe_exception(e)) from e

    def close(self) -> None:
        """Nothing to release."""


def _stop(slot: list[Worker | None]) -> None:
    worker, slot[0] = slot[0], None
    if worker is not None:
        worker.close()


def _death_reason(worker: Worker, limits: SandboxLimits | None, cpu_s: float) -> tuple[type[Exception], str]:
    """The exception to raise for a worker that died during a call, naming the limit that killed it if any."""
    code = worker.exitcode
    signum = -code if code is not None and code < 0 else None
    if limits is not None and signum is not None:
        if signum == getattr(signal, "SIGKILL", None) and cgroups.oom_kills(os.path.basename(worker.workdir)):
            return RewardCallLimit, f"memory: its processes used more than {limits.memory_mb} MiB and were killed"
        if signum == getattr(signal, "SIGXCPU", None):
            return RewardCallLimit, f"cpu time: used more than {cpu_s:g} CPU seconds in one call; the worker was killed"
        if signum == getattr(signal, "SIGXFSZ", None):
            return RewardCallLimit, "file size: wrote past the file-size limit; the worker was killed"
    return RewardCallError, f"the reward worker process died (exit code {code}) during the call"


def _load_report(payload: Any, specs: set[str]) -> dict[str, dict[str, str]]:
    """The worker's "loaded" report, checked: for exactly the keys of `specs`, {"convention": ...},
    {"schema": ...} (a tool's) or {"error": ...} (the worker has run reward modules by then, so it is not
    trusted to be well-formed)."""
    if not isinstance(payload, dict) or set(payload) != specs:
        raise wire.BadReply("a load report for other rewards than asked")
    for entry in payload.values():
        if not isinstance(entry, dict) or len(entry) != 1 or not all(isinstance(v, str) for v in entry.values()):
            raise wire.BadReply("a load report entry that is not one string")
        if set(entry) not in ({"convention"}, {"schema"}, {"error"}):
            raise wire.BadReply(f"a load report entry {sorted(entry)[:2]}")
    return payload


class ProcessRunner:
    """Calls reward functions in a long-lived (sandboxed) worker process; a call hung past `timeout` is killed.

    `functions` maps each key to its function, called as `fn(completions, examples, context)`, or to a reward
    spec (`module:function`, `file.py:function`, a built-in name) that the worker imports and inspects itself,
    inside its sandbox, each time one starts (`loaded` reports how that went). Functions are sent with
    cloudpickle (closures and lambdas work; a function of an importable module is imported by the worker,
    which may read its module file). `sandbox=None` runs the worker without confinement.
    """

    def __init__(
        self,
        functions: Table,
        sandbox: SandboxLimits | None = None,
        cpu_s: float = 10.0,
        load_timeout_s: float = LOAD_TIMEOUT_S,
    ) -> None:
        self.load_timeout_s = float(load_timeout_s)
        self._table = pickle_table(functions)  # ValueError naming a function cloudpickle cannot send
        self._files = tuple(function_files(functions))
        self._specs = {k for k, v in self._table.items() if not isinstance(v, bytes)}  # imported by the worker
        if sandbox is not None and not hasattr(os, "fork"):  # Windows: no rlimits, namespaces or Landlock
            log.warning("the reward sandbox needs a POSIX system; reward workers run unconfined here")
            sandbox = None
        self.sandbox = sandbox
        self.cpu_s = float(sandbox.cpu_s if sandbox is not None and sandbox.cpu_s is not None else cpu_s)
        self._slot: list[Worker | None] = [None]
        self._seq = 0
        self.tool_replies = False  # the tool runner reads ToolReply values (wire.py); rewards never return them
        self.started = 0  # workers started so far; more than one means restarts after timeouts or crashes
        if sandbox is not None:  # left behind by trainers that were killed
            cgroups.sweep(WORKDIR_PREFIX)
            sweep_workdirs()
        # stops the worker when this runner is collected, and at interpreter exit before children are joined
        Finalize(self, _stop, args=(self._slot,), exitpriority=100)

    @property
    def pid(self) -> int | None:
        """The worker's process id, or None when no worker is running."""
        return self._slot[0].pid if self._slot[0] is not None else None

    @property
    def workdir(self) -> str | None:
        """The running worker's private directory (its working directory, HOME and TMPDIR)."""
        return self._slot[0].workdir if self._slot[0] is not None else None

    def start(self) -> Worker:
        """The running worker, started now if there is none."""
        worker = self._slot[0]
        if worker is None or not worker.alive():
            _stop(self._slot)
            worker = self._slot[0] = Worker(self._table, self.sandbox, self.cpu_s, self._files)
            self.started += 1
        return worker

    def enforced(self, timeout: float = 10.0) -> dict[str, str]:
        """Which mechanism enforces each sandbox limit in the worker (starts one, waits for its report)."""
        if self.sandbox is None:
            return {}
        worker = self.start()
        self._await(worker, lambda: worker.enforced is not None, timeout, "report its sandbox")
        return worker.enforced or {}

    def loaded(self, timeout: float) -> dict[str, dict[str, str]]:
        """Each reward spec the worker imports itself, with its convention or the error that stopped it (starts
        a worker, waits until it has imported them). `SandboxBroken` when its sandbox could not be set up,
        RewardCallError when it died or took longer than `timeout` seconds."""
        worker = self.start()
        self._await(worker, lambda: worker.loaded is not None, timeout, "import the reward modules")
        return worker.loaded or {}

    def _await(self, worker: Worker, done: Callable[[], bool], timeout: float, what: str) -> None:
        """Read the worker's reports until `done()`; RewardCallError (worker killed) when it cannot."""
        deadline = time.monotonic() + timeout
        while not done():
            if not worker.conn.poll(max(deadline - time.monotonic(), 0.0)):
                self.kill()
                raise RewardCallError(f"the reward worker did not {what} within {timeout:g} s; it was killed")
            try:
                self._handle(worker, *wire.decode(worker.conn))
            except wire.BadReply as e:
                self.kill()
                raise RewardCallError(f"the reward worker sent an unreadable reply ({e})") from e
            except (EOFError, ConnectionError, OSError) as e:
                worker.join(timeout=1)
                kind, reason = _death_reason(worker, self.sandbox, self.cpu_s)
                self.kill()
                raise kind(f"{reason} (before it could {what})") from e

    def _handle(self, worker: Worker, status: str, seq: int, payload: Any) -> None:
        if status == "ready":
            if not isinstance(payload, dict) or not all(isinstance(v, str) for v in payload.values()):
                raise wire.BadReply("a sandbox report that is not a mapping of strings")
            worker.enforced = payload
        elif status == "loaded":
            worker.loaded = _load_report(payload, self._specs)
        elif status == "broken":
            self.kill()
            raise SandboxBroken(payload)
        elif status == "refused":
            self.kill()
            raise SandboxRefusedError(str(payload))

    def kill(self) -> None:
        """Kill the worker at once (a later call starts a fresh one)."""
        worker, self._slot[0] = self._slot[0], None
        if worker is not None:
            worker.kill()

    def close(self) -> None:
        """Stop the worker."""
        _stop(self._slot)

    def call(
        self,
        key: str,
        fn: Callable[..., Any],
        completions: list[str],
        examples: list[Example],
        timeout: float,
        context: CallContext | None = None,
    ) -> Any:
        """`functions[key](completions, examples, context)` in the worker; `RewardCallTimeout` after `timeout`
        s, `RewardCallLimit` when the sandbox stopped it, `RewardCallError` if it raised or the worker died.
        (`fn` is unused: the worker has its own copy.)"""
        for _ in range(2):  # a second try only when the worker asked to be recycled (CPU budget)
            self._seq += 1
            try:
                message = ForkingPickler.dumps((self._seq, key, completions, examples, context))
            except Exception as e:
                raise RewardCallError(f"the batch could not be sent to the worker: {describe_exception(e)}") from e
            status, payload = self._exchange(message, timeout)
            if status != "recycle":
                break
            self.kill()
        if status == "ok":
            try:
                return wire.values_from_wire(payload, tool_replies=self.tool_replies)
            except wire.BadReply as e:
                self.kill()
                raise RewardCallError(f"the reward worker sent an unreadable reply ({e})") from e
        if not isinstance(payload, str):
            self.kill()
            raise RewardCallError(f"the reward worker sent an unreadable {status!r} reply")
        if status == "recycle":
            raise RewardCallError(
                "a fresh reward worker could not grant one call's CPU time (sandbox cpu_s too small?)"
            )
        if status == "limit":
            self.kill()  # whatever the reward started (processes, files) goes with the worker
            raise RewardCallLimit(payload)
        raise RewardCallError(payload)

    def _exchange(self, message: bytes, timeout: float) -> tuple[str, Any]:
        worker = self.start()
        if self._specs and worker.loaded is None:  # a fresh worker imports first: not part of the call's time
            self._await(worker, lambda: worker.loaded is not None, self.load_timeout_s, "import the reward modules")
        try:
            worker.conn.send_bytes(message)
            while True:
                if not worker.conn.poll(timeout):
                    self.kill()
                    raise RewardCallTimeout(f"no result after {timeout:g} s; the worker process was killed")
                status, seq, payload = wire.decode(worker.conn)
                self._handle(worker, status, seq, payload)
                if seq == self._seq:
                    return status, payload
        except (RewardCallTimeout, RewardCallError):
            raise
        except wire.BadReply as e:  # garbage on the pipe: never trusted, the worker is replaced
            self.kill()
            raise RewardCallError(f"the reward worker sent an unreadable reply ({e})") from e
        except (EOFError, ConnectionError, OSError) as e:
            worker.join(timeout=1)
            kind, reason = _death_reason(worker, self.sandbox, self.cpu_s)
            self.kill()
            raise kind(reason) from e
        except BaseException:  # Ctrl-C or a bug here: never leave a busy worker behind
            self.kill()
            raise
