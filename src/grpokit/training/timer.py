"""How long each phase of a step took: `with timer("generate"): ...` adds the block's seconds under its name, and
`timer.add("gen_tokens", n)` adds a count (verl's `marked_timer` idea). A phase takes no timings argument: the step
times the calls it makes, and a phase that times its own parts (the update's forward, backward and optimizer)
returns them."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator


class Timer:
    """Seconds (and counts) by name, summed over every block timed under that name."""

    def __init__(self) -> None:
        self.totals: dict[str, float] = {}

    @contextlib.contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.add(name, time.perf_counter() - t0)

    def add(self, name: str, value: float) -> None:
        self.totals[name] = self.totals.get(name, 0.0) + value

    def merge(self, other: Timer | dict[str, float]) -> Timer:
        """Add `other`'s totals (another Timer, or seconds by name) to these; returns self."""
        for name, value in (other.totals if isinstance(other, Timer) else other).items():
            self.add(name, value)
        return self
