"""Forecasts: a signal still on the healthy side but trending toward a failure's threshold, said with a horizon
("entropy falls 0.02 nats/step: below 0.5 in ~35 steps at this rate"). A forecast is a warning with its own
evidence (slope, fit window, fit quality, horizon), never a critical; the failure itself, once there, is its own
detector's (`collapse`, `kl_drift`).

The trend is the least-squares line through the (step, value) rows of the last `window` training steps:

    slope b = sum (s_i - s_mean)(y_i - y_mean) / sum (s_i - s_mean)^2,   R^2 = 1 - SS_res / SS_tot
    horizon = (threshold - (y_mean + b (s_last - s_mean))) / b   steps after the last row

It fires when the window holds at least `min_rows` rows over `window` steps, the line explains at least `r2_min`
of the variance (a noisy signal forecasts nothing), the fitted value now is still on the healthy side and the line
crosses the threshold within `horizon_max` steps; it clears when any of these stops holding.
"""

from __future__ import annotations

import math
import statistics
from typing import Any

from ... import metric_names as mn
from .base import Alert, Detector, register
from .rows import StepWindow, accuracy_now, finite_at, first_logged


def line_fit(points: list[tuple[int, float]]) -> tuple[float, float, float]:
    """(slope per step, fitted value at the last step, R^2) of the least-squares line through (step, value);
    (0, NaN, 0) when the numbers are too large to square."""
    try:
        return _fit(points)
    except (OverflowError, ZeroDivisionError):
        return 0.0, math.nan, 0.0


def _fit(points: list[tuple[int, float]]) -> tuple[float, float, float]:
    xs, ys = [float(s) for s, _ in points], [v for _, v in points]
    xm, ym = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - xm) ** 2 for x in xs)
    b = sum((x - xm) * (y - ym) for x, y in zip(xs, ys)) / sxx
    fit = [ym + b * (x - xm) for x in xs]
    ss_tot = sum((y - ym) ** 2 for y in ys)
    r2 = 1.0 - sum((y - f) ** 2 for y, f in zip(ys, fit)) / ss_tot if ss_tot > 0 else 0.0
    return b, fit[-1], r2


class Trend(Detector):
    """Base: the signal of `keys` moving toward `threshold` (direction +1: rising to it, -1: falling to it)."""

    keys: tuple[str, ...] = ()
    direction = 1
    threshold = 0.0
    window, min_rows, r2_min, horizon_max = 20, 6, 0.8, 50
    what, unit = "signal", ""

    def __init__(self, context: dict[str, Any] | None = None, **params: Any) -> None:
        super().__init__(context, **params)
        self.points = StepWindow(self.window)

    def skip(self, m: dict[str, Any]) -> bool:
        """True when the trend is no failure in this row's context (e.g. a task being learned)."""
        return False

    def fix(self) -> str:
        raise NotImplementedError

    def check(self, step: int, m: dict[str, Any]) -> tuple[bool, Alert | None]:
        key, v = first_logged(m, self.keys)
        if key is None:
            return self.active, None
        self.points.add(step, v)
        if len(self.points) < self.min_rows or not self.points.full() or self.skip(m):
            return False, None
        b, now, r2 = line_fit(list(self.points.items))
        toward = b * self.direction > 0
        healthy = (self.threshold - now) * self.direction > 0
        if not (toward and healthy and r2 >= self.r2_min and math.isfinite(now)):
            return False, None
        horizon = (self.threshold - now) / b
        if not (0 < horizon <= self.horizon_max):
            return False, None
        verb = "rises" if b > 0 else "falls"
        side = "above" if self.direction > 0 else "below"
        evidence = {
            "signal": key,
            "slope_per_step": round(b, 6),
            "fit_window": [self.points.first_step(), step],
            "r2": round(r2, 3),
            "now": round(now, 4),
            "threshold": self.threshold,
            "horizon_steps": round(horizon),
        }
        message = (
            f"{self.what} {verb} {abs(b):.3g}{self.unit}/step over steps {self.points.first_step()}-{step}: "
            f"{side} {self.threshold:g} in ~{horizon:.0f} steps at this rate"
        )
        return True, self.new_alert(step, "warning", message, evidence, self.fix())


@register
class EntropyForecast(Trend):
    """Token entropy falling toward the entropy-collapse floor (`EntropyCollapse.h_star`, 0.5 nats, §17.7); not while
    accuracy is at `ceiling` (a learned task needs no spread)."""

    name, mode = "entropy_forecast", "entropy collapse ahead"
    keys, direction, threshold, ceiling = (mn.ENTROPY_TOKEN_MEAN,), -1, 0.5, 0.9
    what, unit = "entropy", " nats"
    requires = ((mn.ENTROPY_TOKEN_MEAN,),)

    def skip(self, m: dict[str, Any]) -> bool:
        return accuracy_now(m)[1] >= self.ceiling

    def fix(self) -> str:
        return (
            "act before it collapses: clip-higher (algo.eps_high), an entropy bonus (algo.entropy_coef) or a higher "
            "sampling temperature"
        )


@register
class ZeroVarianceForecast(Trend):
    """The share of zero-variance groups rising toward the advantage-collapse threshold (`AdvantageCollapse`, 0.5,
    §17.1): half the batch would give no gradient. Not when the zero-variance groups are mostly all-correct (the
    task being learned: `learned` of them)."""

    name, mode = "zero_variance_forecast", "advantage collapse ahead"
    keys, direction, threshold, learned = (mn.ZV_ACC_FRAC, mn.ZV_FRAC, mn.ZV_SAMPLE_FRAC), 1, 0.5, 0.8
    what = "zero-variance groups"
    requires = (keys,)

    def skip(self, m: dict[str, Any]) -> bool:
        c, w = finite_at(m, mn.ZV_ALL_CORRECT), finite_at(m, mn.ZV_ALL_WRONG)
        return math.isfinite(c) and math.isfinite(w) and c + w > 0 and c / (c + w) >= self.learned

    def fix(self) -> str:
        return (
            "half the batch will give no gradient: dynamic sampling (algo.group_filter=dynamic), or prompts nearer "
            "the policy's level"
        )


@register
class KLForecast(Trend):
    """KL to the reference rising toward the drift bar (`KLDrift.kl_max`, 0.5, §17.3)."""

    name, mode = "kl_forecast", "KL drift ahead"
    keys, direction, threshold = (mn.KL_REF_K3, mn.KL_REF_K1, mn.ACTOR_KL_LOSS), 1, 0.5
    what = "KL to the reference"
    requires = (keys,)

    def fix(self) -> str:
        return "a lower learning rate (train.lr) or a larger KL coefficient (algo.kl_coef)"
