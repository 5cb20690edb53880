"""A stall watchdog for a training loop: an alert when the end of a step has not come within `k` times the median
step time, naming the last phase the loop logged (`HealthCallback` feeds it TRL's `on_step_end` and `on_log`).

    stalled  <=>  now - last step end > k * median(step durations so far)   (after `min_steps` durations)

It alerts once per stall (a step that ends re-arms it). The check runs on a daemon thread every `poll_s` seconds,
so a loop that hangs (a vLLM server that stopped answering, a collective waiting on a dead rank) is still named;
`check(now)` is the same rule for a caller that keeps its own clock."""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable
from typing import Any

from ..monitor.detectors import Alert

FIX = (
    "the step stopped advancing: look at the phase named (generation: the vLLM server or engine, its log and "
    "memory; the update: a collective waiting on another rank, NCCL_DEBUG=INFO; a reward: a verifier that does not "
    "return, reward timeouts); py-spy dump --pid <trainer pid> shows where each thread waits"
)


class StepWatchdog:
    """`step_end(step)` at the end of each step, `saw(phase)` for what the loop logged; `start()` the thread."""

    def __init__(
        self,
        on_stall: Callable[[dict[str, Any]], None],
        k: float = 5.0,
        min_steps: int = 3,
        poll_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if k <= 1 or min_steps < 1 or poll_s <= 0:
            raise ValueError(f"StepWatchdog(k={k}, min_steps={min_steps}, poll_s={poll_s}): need k > 1, min_steps >= 1")
        self.on_stall, self.k, self.min_steps, self.poll_s, self.clock = on_stall, k, min_steps, poll_s, clock
        self.durations: list[float] = []
        self.last_end: float | None = None
        self.step = 0
        self.phase = "none logged"
        self.alerted = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def step_end(self, step: int, now: float | None = None) -> None:
        now = self.clock() if now is None else now
        if self.last_end is not None:
            self.durations = [*self.durations, now - self.last_end][-200:]
        self.last_end, self.step, self.alerted = now, int(step), False

    def saw(self, phase: str) -> None:
        """The last phase the loop logged (a metric name, a phase timer)."""
        self.phase = str(phase)

    def check(self, now: float | None = None) -> dict[str, Any] | None:
        """The stall alert (an `Alert` dict) if the step is overdue and not yet alerted, else None."""
        now = self.clock() if now is None else now
        if self.alerted or self.last_end is None or len(self.durations) < self.min_steps:
            return None
        median = statistics.median(self.durations)
        waited = now - self.last_end
        if median <= 0 or waited <= self.k * median:
            return None
        self.alerted = True
        ev = {"waited_s": round(waited, 1), "median_step_s": round(median, 3), "k": self.k, "last_phase": self.phase}
        msg = (
            f"stall: no step has ended for {waited:.0f} s since step {self.step}, {waited / median:.1f}x the median "
            f"step time {median:.1f} s; last phase logged: {self.phase}"
        )
        alert = Alert("stall", "step_watchdog", self.step, self.step, "critical", msg, ev, FIX)
        alert.current = {"step": self.step, "message": msg, "evidence": dict(ev)}
        return alert.to_dict()

    def start(self) -> StepWatchdog:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="grpokit-step-watchdog", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5 * self.poll_s)

    def _run(self) -> None:
        while not self._stop.wait(self.poll_s):
            alert = self.check()
            if alert is not None:
                self.on_stall(alert)
