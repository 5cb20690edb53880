"""Throughput regression: tokens per second (verl `perf/throughput`, grpokit `perf/tokens_per_s`), or the step
rate where only the step time is logged (TRL `step_time`; per response token when the length is logged), falling
beyond its noise.

    baseline = median of the rate over the `baseline` training steps after the first `warmup` (at least 3 rows)
    noise    = 1.4826 * MAD of those rows
    recent   = median of the rate over the last `window` training steps (at least 3 rows)

A regression holds while recent < (1 - `drop`) * baseline and recent < baseline - `k` * noise (docs/math.md §17:
a relative rule with an absolute floor; a median, so a validation or checkpoint step does not count)."""

from __future__ import annotations

import math
import statistics
from typing import Any

from ... import metric_names as mn
from .base import Alert, Detector, register
from .rows import StepWindow, finite_at

FIX = (
    "find what slowed: a longer step at the same response length is the system (a sampler that lost its cache or "
    "sleep mode, CPU offload kicking in near the memory limit, a slower node, a checkpoint or validation every "
    "step); compare time/generate and time/update (verl timing_s/gen, timing_s/update_actor) before and after"
)


def step_rate(m: dict[str, Any]) -> tuple[float, str]:
    """(the row's rate, what it is): tokens/s where logged, else response tokens per step second, else steps/s."""
    tps = finite_at(m, mn.PERF_TOKENS_PER_S)
    if math.isfinite(tps) and tps > 0:
        return tps, "tokens/s"
    t = finite_at(m, mn.TIME_STEP)
    if not (math.isfinite(t) and t > 0):
        return math.nan, ""
    length = finite_at(m, mn.LENGTH_MEAN)
    if math.isfinite(length) and length > 0:
        return length / t, "response tokens per step second"
    return 1.0 / t, "steps/s"


@register
class ThroughputRegression(Detector):
    """The rate falling `drop` below its early median and beyond `k` times its noise (module docstring)."""

    name, mode = "throughput_regression", "throughput regression"
    warmup, baseline, window, drop, k = 2, 10, 10, 0.3, 4.0
    requires = ((mn.PERF_TOKENS_PER_S, mn.TIME_STEP),)

    def __init__(self, context: dict[str, Any] | None = None, **params: Any) -> None:
        super().__init__(context, **params)
        self.first: int | None = None
        self.rows: list[float] = []  # the recent window's rates, at least 3 rows
        self.base: list[float] = []
        self.recent = StepWindow(self.window)
        self.unit = ""

    @property
    def min_steps(self) -> int:
        return self.warmup + self.baseline + self.window

    def check(self, step: int, m: dict[str, Any]) -> tuple[bool, Alert | None]:
        rate, unit = step_rate(m)
        if not math.isfinite(rate) or (self.unit and unit != self.unit):
            return self.active, None
        self.unit = unit
        self.first = step if self.first is None else self.first
        if step - self.first < self.warmup:
            return self.active, None
        if step - self.first < self.warmup + self.baseline or len(self.base) < 3:
            self.base.append(rate)
            return self.active, None
        self.recent.add(step, rate)
        self.rows = [*self.rows, rate][-max(3, len(self.recent)) :]
        if not self.recent.full() or len(self.rows) < 3:
            return self.active, None
        med = statistics.median(self.base)
        noise = 1.4826 * statistics.median(abs(v - med) for v in self.base)
        now = statistics.median(self.rows)
        if not (now < (1 - self.drop) * med and now < med - self.k * noise):
            return False, None
        ev = {"rate_now": round(now, 3), "rate_baseline": round(med, 3), "noise": round(noise, 3), "unit": unit}
        ev["ratio"] = round(now / med, 3) if med > 0 else None
        msg = f"throughput fell to {now / med:.0%} of its early median ({now:.4g} vs {med:.4g} {unit})"
        return True, self.new_alert(step, "warning", msg, ev, FIX, onset=self.recent.first_step())
