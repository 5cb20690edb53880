"""Running one reward call: in-process, or in a long-lived worker process that is killed when a call hangs.

`InlineRunner` calls the function directly (no timeout; for the bounded built-ins). `ProcessRunner` keeps
one forked worker process per `RewardManager`; a call is one pickled message over a pipe (about 0.1-0.3 ms
for 32 completions), the parent waits with `poll(timeout)`, and on timeout kills the worker's whole process
group (SIGKILL) and forks a fresh one on the next call. The worker inherits the parent's loaded reward
functions and imported modules, so it starts in milliseconds; it is forked when the `RewardManager` is
built, ideally before the trainer starts threads (Python 3.12+ warns about forking threaded processes). It
is not a daemon, so rewards may use multiprocessing themselves; a finalizer stops it at exit. On platforms
without `fork` the worker is started with `spawn` (then only module-level functions work).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import traceback
from collections.abc import Callable
from multiprocessing.reduction import ForkingPickler
from multiprocessing.util import Finalize
from typing import Any

from ..data.example import Example


class RewardCallError(Exception):
    """The reward function raised (message: exception type, text and where), or its worker died."""


class RewardCallTimeout(Exception):
    """The reward function did not return within the timeout (its worker was killed)."""


def describe_exception(e: BaseException) -> str:
    """`Type: message (at file.py:12 in fn)` with the innermost frame of the traceback."""
    frames = traceback.extract_tb(e.__traceback__)
    if not frames:
        return f"{type(e).__name__}: {e}"
    last = frames[-1]
    return f"{type(e).__name__}: {e} (at {os.path.basename(last.filename)}:{last.lineno} in {last.name})"


def as_value_list(out: Any) -> Any:
    """A reward's return value as a list when it is a sequence/iterable of values; anything else unchanged."""
    if isinstance(out, list):
        return out
    if isinstance(out, (str, bytes, dict)) or not hasattr(out, "__iter__"):
        return out
    return list(out)


class InlineRunner:
    """Calls reward functions in this process. No timeout: only for rewards that cannot hang."""

    def call(
        self,
        spec: str,
        fn: Callable[..., Any],
        completions: list[str],
        examples: list[Example],
        timeout: float,
    ) -> Any:
        """The function's return value (as a list); `RewardCallError` if it raised."""
        try:
            return as_value_list(fn(completions, examples))
        except Exception as e:
            raise RewardCallError(describe_exception(e)) from e

    def close(self) -> None:
        """Nothing to release."""


def _serve(conn: Any, parent_end: Any, functions: dict[str, Callable[..., Any]]) -> None:
    """Worker loop: receive (seq, key, completions, examples), reply (status, seq, payload)."""
    parent_end.close()
    if hasattr(os, "setpgrp"):
        os.setpgrp()  # own process group: a kill on timeout also reaches processes the reward started
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the trainer's to handle; it then kills us
    while True:
        try:
            seq, key, completions, examples = conn.recv()
        except (EOFError, OSError):
            return  # the trainer closed the pipe or died
        try:
            reply = ("ok", seq, as_value_list(functions[key](completions, examples)))
        except Exception as e:
            reply = ("err", seq, describe_exception(e))
        try:
            conn.send(reply)
        except Exception as e:  # unpicklable return value
            conn.send(("err", seq, f"its return value could not be sent back: {describe_exception(e)}"))


class _Worker:
    """One worker process and the parent's end of its pipe."""

    def __init__(self, ctx: Any, functions: dict[str, Callable[..., Any]]) -> None:
        self.conn, there = ctx.Pipe()
        # not a daemon, so rewards may use multiprocessing themselves; the finalizer below stops it at exit
        self.proc = ctx.Process(target=_serve, args=(there, self.conn, functions), name="grpokit-reward-worker")
        self.proc.start()
        there.close()

    def kill(self) -> None:
        """Kill the worker's process group (it and whatever the reward started) and reap it."""
        self.conn.close()
        if self.proc.is_alive():
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (AttributeError, OSError):  # no process groups here, or setpgrp not reached yet
                self.proc.kill()
        self.proc.join(timeout=5)

    def close(self) -> None:
        """Close the pipe so an idle worker exits by itself; kill it if it does not within 0.5 s."""
        self.conn.close()
        self.proc.join(timeout=0.5)
        self.kill()


def _stop(slot: list[_Worker | None]) -> None:
    worker, slot[0] = slot[0], None
    if worker is not None:
        worker.close()


class ProcessRunner:
    """Calls reward functions in a long-lived worker process; a call hung past `timeout` s is killed.

    `functions` maps each key to its function. With `fork` the worker inherits the table (closures and
    lambdas work); with `spawn` it is pickled, so only module-level functions work there.
    """

    def __init__(self, functions: dict[str, Callable[..., Any]]) -> None:
        methods = mp.get_all_start_methods()
        self._ctx = mp.get_context("fork" if "fork" in methods else "spawn")
        self._functions = dict(functions)
        self._slot: list[_Worker | None] = [None]
        self._seq = 0
        self.started = 0  # workers started so far; more than one means restarts after timeouts or crashes
        # stops the worker when this runner is collected, and at interpreter exit before children are joined
        Finalize(self, _stop, args=(self._slot,), exitpriority=100)

    @property
    def pid(self) -> int | None:
        """The worker's process id, or None when no worker is running."""
        return self._slot[0].proc.pid if self._slot[0] is not None else None

    def start(self) -> _Worker:
        """The running worker, started now if there is none."""
        worker = self._slot[0]
        if worker is None or not worker.proc.is_alive():
            _stop(self._slot)
            worker = self._slot[0] = _Worker(self._ctx, self._functions)
            self.started += 1
        return worker

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
    ) -> Any:
        """`functions[key](completions, examples)` in the worker; `RewardCallTimeout` after `timeout` s,
        `RewardCallError` if it raised or the worker died. (`fn` is unused: the worker has its own copy.)"""
        self._seq += 1
        try:
            message = ForkingPickler.dumps((self._seq, key, completions, examples))
        except Exception as e:
            raise RewardCallError(f"the batch could not be sent to the worker: {describe_exception(e)}") from e
        worker = self.start()
        try:
            worker.conn.send_bytes(message)
            while True:
                if not worker.conn.poll(timeout):
                    self.kill()
                    raise RewardCallTimeout(f"no result after {timeout:g} s; the worker process was killed")
                status, seq, payload = worker.conn.recv()
                if seq == self._seq:
                    break
        except RewardCallTimeout:
            raise
        except (EOFError, ConnectionError, OSError) as e:
            self.kill()
            code = worker.proc.exitcode
            raise RewardCallError(f"the reward worker process died (exit code {code}) during the call") from e
        except BaseException:  # Ctrl-C or a bug here: never leave a busy worker behind
            self.kill()
            raise
        if status == "ok":
            return payload
        raise RewardCallError(payload)
