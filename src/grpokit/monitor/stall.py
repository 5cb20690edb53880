"""Alerts of the watch itself, from when rows arrive rather than what they hold: the `WATCH_RULES` registry.

**stall**: no new row for `k` times the run's median row interval (and at least `min_s` seconds) means the trainer
hangs, or died without a word: a collective waiting for a dead rank, a rollout engine waiting for a lost worker, a
reward call that never returns. The median interval is that of the rows seen arriving while the watch runs (each
poll's rows share its wait), or before three have arrived, the median step time the log records (`time/step`)
times its median step gap. The clock starts at the log's last write when the watch begins, so a run that hung
before the watch started is seen too. The alert names the last phase the log recorded, the last timing key of the
newest row (verl's `timing_s/*`, TRL's and grpokit's `time/*`): the trainer stopped in the phase after it. It clears
when a row comes.

    idle > k * median(intervals), idle >= min_s      (idle: seconds since the newest row was written)
"""

from __future__ import annotations

import statistics
from collections import deque
from typing import Any

from ..common.registry import Registry
from ..metric_names import TIME_STEP
from .detectors import Alert

WATCH_RULES = Registry("watch rule")

_TIMING = ("timing_s/", "timing/", "time/", "perf/time", "timer/")  # verl, verl <= 0.2, grpokit and TRL, others

STALL_FIX = (
    "see where the trainer waits: `py-spy dump --pid PID` on each rank (or `ray stack` under Ray); a collective "
    "that waits for a dead rank shows with NCCL_DEBUG=INFO and ends with TORCH_NCCL_ASYNC_ERROR_HANDLING=1 and a "
    "shorter `timeout` to init_process_group; a rollout engine waiting for a lost worker shows in `ray status`; if the "
    "process is gone, the end of its own output or `dmesg | tail` (the OOM killer) says why"
)


def phases(values: dict[str, Any]) -> list[str]:
    """The timing keys of a row, in the order it logged them."""
    return [k for k in values if k.startswith(_TIMING)]


@WATCH_RULES.register("stall")
class Stall:
    """No new row for k times the run's median row interval: the trainer hangs in the phase after the last logged."""

    mode = name = "stall"

    def __init__(self, *, k: float = 5.0, min_s: float = 60.0, history: int = 200) -> None:
        if not (k > 1 and min_s >= 0 and history >= 3):
            raise ValueError(f"stall: k > 1, min_s >= 0, history >= 3 (got k={k}, min_s={min_s}, history={history})")
        self.k, self.min_s = k, min_s
        self.intervals: deque[float] = deque(maxlen=history)  # seconds between rows seen arriving
        self.step_times: deque[float] = deque(maxlen=history)  # the log's own step times x step gaps
        self.last_at: float | None = None  # when the newest row was written (the watch's monotonic clock)
        self.step = 0
        self.values: dict[str, Any] = {}  # the newest row, in the source's names
        self.alert: Alert | None = None

    def seen(
        self, rows: list[tuple[int, dict[str, Any]]], at: float, *, arrived: bool, last: dict[str, Any] | None = None
    ) -> None:
        """Rows (step, values) written at `at`; `arrived`: seen coming while the watch ran (their wait is an
        interval), else read from the log as it was (only their logged step times count); `last`: the newest row in
        the source's names (its timing keys name the phase), else the newest of `rows`."""
        if not rows:
            return
        if arrived and self.last_at is not None and at > self.last_at:
            self.intervals.extend([(at - self.last_at) / len(rows)] * min(len(rows), self.intervals.maxlen or 1))
        gaps = [b[0] - a[0] for a, b in zip([(self.step, {}), *rows], rows, strict=False) if b[0] > a[0]]
        gap = statistics.median(gaps) if gaps else 1
        for _, v in rows:
            t = v.get(TIME_STEP, v.get("timing_s/step", v.get("timing/step")))
            if isinstance(t, int | float) and t > 0:
                self.step_times.append(float(t) * gap)
        self.last_at, self.step = at, rows[-1][0]
        self.values = dict(last if last is not None else rows[-1][1])

    def median(self) -> float | None:
        """The run's median row interval in seconds (None while nothing tells it)."""
        if len(self.intervals) >= 3:
            return statistics.median(self.intervals)
        return statistics.median(self.step_times) if self.step_times else None

    def check(self, now: float) -> tuple[str, Alert] | None:
        """The alert event due at `now`: ("onset", alert) once a stall passes the bound, ("cleared", alert) when
        a row came after it; else None."""
        if self.alert is not None and self.alert.cleared_at is None and self.step > self.alert.step:
            self.alert.cleared_at = self.step
            return "cleared", self.alert
        median = self.median()
        if self.last_at is None or median is None or (self.alert is not None and self.alert.step == self.step):
            return None
        idle = now - self.last_at
        if idle < max(self.k * median, self.min_s):
            return None
        self.alert = self._alert(idle, median)
        return "onset", self.alert

    def _alert(self, idle: float, median: float) -> Alert:
        logged = phases(self.values)
        last = logged[-1] if logged else None
        where = (
            f"the last phase it logged is {last} ({self.values[last]:g} s) at step {self.step}: it stopped after it"
            if last
            else f"the log records no phase timing (the last row is step {self.step})"
        )
        ratio = idle / median
        message = f"no new row for {idle:.0f} s, {ratio:.1f} x the run's median row interval ({median:.1f} s); {where}"
        evidence = {"idle_s": round(idle, 1), "median_interval_s": round(median, 2), "k": self.k, "last_phase": last}
        return Alert(self.mode, self.name, self.step, self.step, "warning", message, evidence, STALL_FIX)
