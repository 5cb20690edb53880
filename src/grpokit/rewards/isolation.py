"""Running one reward call: in-process, or in a long-lived worker process that is killed when a call hangs.

`InlineRunner` calls the function directly (no timeout; for the bounded built-ins). `ProcessRunner` keeps
one forked worker process per `RewardManager`; a call is one pickled message over a pipe (about 0.1-0.3 ms
for 32 completions), the parent waits with `poll(timeout)`, and on timeout kills the worker's whole process
group (SIGKILL) and forks a fresh one on the next call. Forking inherits the parent's imported modules and
`sys.path`, so a user module already imported by the parent costs nothing in the worker. On platforms
without `fork` the worker is started with `spawn`.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import sys
import traceback
from collections.abc import Callable
from multiprocessing.reduction import ForkingPickler
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


def _serve(conn: Any, parent_end: Any) -> None:
    """Worker loop: receive (seq, spec, sys.path, completions, examples), reply (status, seq, payload)."""
    from .registry import load_reward

    parent_end.close()
    if hasattr(os, "setpgrp"):
        os.setpgrp()  # own process group: a kill on timeout also reaches processes the reward started
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the trainer's to handle; it then kills us
    fns: dict[str, Callable[..., Any]] = {}
    while True:
        try:
            seq, spec, path, completions, examples = conn.recv()
        except (EOFError, OSError):
            return  # the trainer closed the pipe or died
        sys.path[:] = path
        try:
            if spec not in fns:
                fns[spec] = load_reward(spec)
            reply = ("ok", seq, as_value_list(fns[spec](completions, examples)))
        except Exception as e:
            reply = ("err", seq, describe_exception(e))
        try:
            conn.send(reply)
        except Exception as e:  # unpicklable return value
            conn.send(("err", seq, f"its return value could not be sent back: {describe_exception(e)}"))


class ProcessRunner:
    """Calls reward functions in a long-lived worker process; a call hung past `timeout` s is killed."""

    def __init__(self) -> None:
        methods = mp.get_all_start_methods()
        self._ctx = mp.get_context("fork" if "fork" in methods else "spawn")
        self._proc: Any = None
        self._conn: Any = None
        self._seq = 0
        self.started = 0  # workers started so far; more than one means restarts after timeouts or crashes

    @property
    def pid(self) -> int | None:
        """The worker's process id, or None when no worker is running."""
        return self._proc.pid if self._proc is not None else None

    def start(self) -> None:
        """Start the worker now (otherwise the first call starts it)."""
        if self._proc is not None and self._proc.is_alive():
            return
        self.close()
        here, there = self._ctx.Pipe()
        proc = self._ctx.Process(target=_serve, args=(there, here), name="grpokit-reward-worker", daemon=True)
        proc.start()
        there.close()
        self._proc, self._conn = proc, here
        self.started += 1

    def kill(self) -> None:
        """Kill the worker and everything it started, without waiting for it to finish its call."""
        proc, conn = self._proc, self._conn
        self._proc = self._conn = None
        if conn is not None:
            conn.close()
        if proc is None:
            return
        if proc.is_alive():
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (AttributeError, OSError):  # no process groups here, or setpgrp not reached yet
                proc.kill()
        proc.join(timeout=5)

    def close(self) -> None:
        """Stop the worker: closing the pipe makes an idle worker exit; a busy one is killed."""
        proc, conn = self._proc, self._conn
        if proc is None:
            return
        conn.close()
        proc.join(timeout=0.5)
        self._conn = None
        self.kill()

    def call(
        self,
        spec: str,
        fn: Callable[..., Any],
        completions: list[str],
        examples: list[Example],
        timeout: float,
    ) -> Any:
        """The return value; `RewardCallTimeout` after `timeout` s, `RewardCallError` if it raised."""
        self._seq += 1
        try:
            message = ForkingPickler.dumps((self._seq, spec, list(sys.path), completions, examples))
        except Exception as e:
            raise RewardCallError(
                f"the batch could not be sent to the worker: {describe_exception(e)}"
            ) from e
        self.start()
        try:
            self._conn.send_bytes(message)
            while True:
                if not self._conn.poll(timeout):
                    self.kill()
                    raise RewardCallTimeout(f"no result after {timeout:g} s; the worker process was killed")
                status, seq, payload = self._conn.recv()
                if seq == self._seq:
                    break
        except RewardCallTimeout:
            raise
        except (EOFError, ConnectionError, OSError) as e:
            proc = self._proc
            self.kill()
            code = proc.exitcode if proc is not None else None
            raise RewardCallError(f"the reward worker process died (exit code {code}) during the call") from e
        except BaseException:  # Ctrl-C or a bug here: never leave a busy worker behind
            self.kill()
            raise
        if status == "ok":
            return payload
        raise RewardCallError(payload)

    def __del__(self) -> None:
        try:
            self.kill()
        except Exception:
            pass
