"""SIGINT / SIGTERM during training: the first one asks the loop to stop after the current step (which then writes
a checkpoint, closes the reward worker and exits with one line); a second one stops at once.

`handle_signals()` installs the handlers for the duration of a `with` block (`grpokit.training.run.run` wraps
training in it, for the command line and the Python API alike). The loop asks `requested()` after each step.
Before the first step (loading the model, the data, a checkpoint) there is no step to finish: `stop_at_once()`
turns SIGINT/SIGTERM into `Interrupted` at once, so the command line can say so and release the run directory.
Exit statuses follow the shell's 128 + signal number: 130 for SIGINT, 143 for SIGTERM.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Iterator
from types import FrameType

_received: list[int] = []  # signal numbers received while the handlers are installed


class Interrupted(Exception):
    """Training stopped on a signal after a complete step; `message` is the one line for the user."""

    run_status = "interrupted"  # the run's outcome (grpokit.run.outcome)

    def __init__(self, signum: int, message: str) -> None:
        super().__init__(message)
        self.signum = signum
        self.exit_code = 128 + signum


def requested() -> int | None:
    """The first signal received since the handlers were installed, or None."""
    return _received[0] if _received else None


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def _handler(signum: int, frame: FrameType | None) -> None:
    _received.append(signum)
    if len(_received) == 1:
        print(
            f"\ngrpokit: {signal_name(signum)} received: finishing this step, then a checkpoint "
            "(press Ctrl-C again to stop at once, without one)",
            file=sys.stderr,
            flush=True,
        )
        return
    raise KeyboardInterrupt  # the second signal: unwind now (reward worker closed on the way out)


@contextlib.contextmanager
def handle_signals() -> Iterator[None]:
    """Install the graceful SIGINT/SIGTERM handlers (main thread only; elsewhere a no-op)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _received.clear()
    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    for s in previous:
        signal.signal(s, _handler)
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def _stop_now(signum: int, frame: FrameType | None) -> None:
    raise Interrupted(
        signum,
        f"grpokit: stopped by {signal_name(signum)} while setting up (loading the model, data or checkpoint), "
        "before training started",
    )


@contextlib.contextmanager
def stop_at_once() -> Iterator[None]:
    """While a run sets up: SIGINT/SIGTERM raise `Interrupted` at once (main thread only; elsewhere a no-op)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    for s in previous:
        signal.signal(s, _stop_now)
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
