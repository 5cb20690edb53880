"""How long each phase of a step took: `with timer("generate"): ...` adds the block's seconds under its name, and
`timer.add("gen_tokens", n)` adds a count (verl's `marked_timer` idea). A phase takes no timings argument: the step
times the calls it makes, and a phase that times its own parts (the update's forward, backward and optimizer)
returns them.

On CUDA the clock is read after `torch.cuda.synchronize()` (`clock()`): kernels run asynchronously, so an unsynced
phase would time its launches and the next phase would pay for its work, and the MFU computed from the update's
seconds would be wrong. Where CUDA is not initialised nothing is synchronised."""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Iterator


def clock() -> float:
    """`time.perf_counter()` once the work queued on the current CUDA device has finished (no sync without CUDA)."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        torch.cuda.synchronize()
    return time.perf_counter()


class Timer:
    """Seconds (and counts) by name, summed over every block timed under that name."""

    def __init__(self) -> None:
        self.totals: dict[str, float] = {}

    @contextlib.contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        t0 = clock()
        try:
            yield
        finally:
            self.add(name, clock() - t0)

    def add(self, name: str, value: float) -> None:
        self.totals[name] = self.totals.get(name, 0.0) + value

    def merge(self, other: Timer | dict[str, float]) -> Timer:
        """Add `other`'s totals (another Timer, or seconds by name) to these; returns self."""
        for name, value in (other.totals if isinstance(other, Timer) else other).items():
            self.add(name, value)
        return self
