"""Forecasts (monitor/detectors/forecast.py): a signal on the healthy side trending toward a failure threshold is a
warning with its slope, fit window, fit quality and horizon; noise, a flat signal, a learned task and a signal
already past the threshold forecast nothing, and a forecast is never critical."""

from __future__ import annotations

import math
import random

from grpokit.monitor.detectors import EntropyForecast, KLForecast, ZeroVarianceForecast
from grpokit.monitor.detectors.forecast import line_fit


def feed(det, key: str, values: list[float], extra: dict | None = None) -> list:
    out = []
    for step, v in enumerate(values, start=1):
        a = det.observe(step, {key: v, **(extra or {})})
        if a is not None:
            out.append(a)
    return out


def test_the_line_fit_is_least_squares() -> None:
    b, now, r2 = line_fit([(1, 3.0), (2, 5.0), (3, 7.0)])
    assert (b, now, r2) == (2.0, 7.0, 1.0)
    b, now, r2 = line_fit([(0, 0.0), (1, 1.0), (2, 0.0), (3, 1.0)])  # slope 0.2, R^2 0.2
    assert math.isclose(b, 0.2) and math.isclose(r2, 0.2)
    assert line_fit([(1, 1e200), (2, -1e200), (3, 1e200)])[2] == 0.0  # too large to square: no fit


def test_falling_entropy_is_forecast_with_its_horizon() -> None:
    """Entropy 2.0 at step 1 falling 0.02 nats/step: at step 20 the line is at 1.62, below 0.5 in 56 steps; it fires
    once the horizon is within 50 steps (step 26: 1.50, 50 steps and a rounding over; step 27: 1.48, 49 steps)."""
    values = [2.0 - 0.02 * i for i in range(40)]
    alerts = feed(EntropyForecast(), "entropy/token_mean", values)
    assert len(alerts) == 1
    a = alerts[0]
    assert a.severity == "warning" and a.mode == "entropy collapse ahead" and a.step == 27
    assert a.evidence["slope_per_step"] == -0.02 and a.evidence["horizon_steps"] == 49
    assert a.evidence["fit_window"] == [8, 27] and a.evidence["r2"] == 1.0
    assert "falls 0.02 nats/step" in a.message and "below 0.5 in ~49 steps" in a.message


def test_noise_flat_and_past_the_threshold_forecast_nothing() -> None:
    rng = random.Random(0)
    noisy = [1.5 - 0.005 * i + rng.gauss(0, 0.3) for i in range(60)]  # a weak trend under noise: R^2 < 0.8
    assert feed(EntropyForecast(), "entropy/token_mean", noisy) == []
    assert feed(EntropyForecast(), "entropy/token_mean", [1.2] * 60) == []
    assert feed(EntropyForecast(), "entropy/token_mean", [0.4 - 0.001 * i for i in range(60)]) == []
    learned = {"reward/accuracy": 0.95}  # a learned task's entropy may fall
    assert feed(EntropyForecast(), "entropy/token_mean", [2.0 - 0.02 * i for i in range(40)], learned) == []


def test_rising_zero_variance_and_kl_are_forecast() -> None:
    zv = feed(ZeroVarianceForecast(), "zv/frac", [0.1 + 0.01 * i for i in range(40)])
    assert [a.mode for a in zv] == ["advantage collapse ahead"] and zv[0].severity == "warning"
    assert "zero-variance groups rises 0.01/step" in zv[0].message
    learned = {"zv/all_correct": 0.3, "zv/all_wrong": 0.02}  # the zero-variance groups are solved ones
    assert feed(ZeroVarianceForecast(), "zv/frac", [0.1 + 0.01 * i for i in range(40)], learned) == []
    kl = feed(KLForecast(), "kl_ref/k3", [0.01 * i for i in range(40)])
    assert [a.mode for a in kl] == ["KL drift ahead"] and kl[0].evidence["threshold"] == 0.5


def test_a_log_every_ten_steps_is_forecast_in_training_steps() -> None:
    det, alerts = EntropyForecast(window=60), []
    for step in range(10, 400, 10):
        if (a := det.observe(step, {"entropy/token_mean": 3.0 - 0.01 * step})) is not None:
            alerts.append(a)
    assert len(alerts) == 1 and alerts[0].evidence["slope_per_step"] == -0.01
    assert alerts[0].evidence["horizon_steps"] <= 50
