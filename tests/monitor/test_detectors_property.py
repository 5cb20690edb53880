"""Property-style robustness of every detector (issue 13): fed random and degenerate series — zeros, constants,
NaN, inf, huge and negative values, non-numbers, single rows, gaps, missing keys, repeated, sparse and backwards
step numbers — no detector raises, and every alert it returns is well formed and JSON-ready. Plain seeded loops."""

from __future__ import annotations

import json
import math
import random
from typing import Any

import pytest

from grpokit.monitor.detectors import DETECTORS, SEVERITY_RANK, Alert, Monitor

NAN, INF = float("nan"), float("inf")

# every signal any detector reads
KEYS = sorted(
    {k for cls in DETECTORS.values() for alts in cls.requires for k in alts}
    | {
        "zv/all_correct",
        "zv/all_wrong",
        "zv/frac",
        "zv/sample_frac",
        "kl/coef",
        "actor/pg_loss",
        "adv/abs_mean",
        "reward/mean",
        "reward/max",
        "reward/min",
        "reward/acc_corr",
        "reward/corr/format",
        "length/correct_mean",
        "length/mean",
        "reward/accuracy",
        "eval/accuracy",
        "actor/clipfrac",
        "actor/clipfrac_low",
        "mismatch/frac_high",
        "train/nonfinite_grad",
        "train/nonfinite_loss",
        "train/skipped_update",
        "sampling/rounds",
    }
)

DEGENERATE_VALUES: list[Any] = [0.0, -0.0, 1.0, -1.0, 1e-300, 1e300, -1e300, NAN, INF, -INF, None, "abc", True, 7]

CONTEXTS: list[dict[str, Any] | None] = [
    None,
    {},
    {"epochs": 1, "mini_batches": 1},
    {"epochs": 4, "mini_batches": 2, "eps_low": 0.2, "eps_high": 0.28, "policy_loss": "gspo", "dynamic_sampling": True},
    {"epochs": "two", "mini_batches": None, "eps_high": "x", "entropy_coef": None},
]


def _check_alert(a: Alert) -> None:
    assert isinstance(a, Alert)
    assert a.severity in SEVERITY_RANK
    assert isinstance(a.step, int) and isinstance(a.fired_at, int) and a.step <= a.fired_at
    assert a.message and a.fix is not None
    json.dumps(a.to_dict(), default=str, allow_nan=True)


def _run(rows: list[tuple[int, dict[str, Any]]], context: dict[str, Any] | None, short: bool) -> None:
    thresholds = {name: {"window": 2} for name, cls in DETECTORS.items() if hasattr(cls, "window")} if short else {}
    if short:
        thresholds["entropy_collapse"] = {"patience": 2, "baseline_steps": 2}
    mon = Monitor(context, thresholds)
    for step, row in rows:
        for a in mon.observe(step, row):
            _check_alert(a)
    for a in mon.alerts:
        _check_alert(a)
    mon.active()
    mon.not_measurable({k for _, r in rows for k in r})
    for d in mon.detectors:
        assert isinstance(d.min_steps, int) and d.min_steps >= 1


def _random_value(rng: random.Random) -> Any:
    r = rng.random()
    if r < 0.25:
        return rng.choice(DEGENERATE_VALUES)
    if r < 0.5:
        return rng.random()
    if r < 0.75:
        return rng.uniform(-10, 10)
    return 10 ** rng.uniform(-12, 12)


def _random_steps(rng: random.Random, n: int) -> list[int]:
    kind = rng.choice(["dense", "sparse", "gappy", "repeats", "backwards", "from_zero"])
    if kind == "dense":
        return list(range(1, n + 1))
    if kind == "from_zero":
        return list(range(n))
    if kind == "sparse":
        k = rng.choice([5, 10, 20, 100])
        return [k * (i + 1) for i in range(n)]
    if kind == "gappy":
        steps, s = [], 0
        for _ in range(n):
            s += rng.choice([1, 1, 1, 2, 7, 50])
            steps.append(s)
        return steps
    if kind == "repeats":
        return sorted(rng.randint(1, max(n // 2, 1)) for _ in range(n))
    cut = rng.randint(1, max(n - 1, 1))  # a restart: steps go back to 1
    return list(range(1, cut + 1)) + list(range(1, n - cut + 1))


@pytest.mark.parametrize("seed", range(40))
def test_random_series_never_raise(seed: int) -> None:
    rng = random.Random(seed)
    n = rng.choice([1, 2, 3, 7, 30, 120])
    steps = _random_steps(rng, n)
    keys = rng.sample(KEYS, rng.randint(1, len(KEYS)))
    rows = []
    for s in steps:
        row = {k: _random_value(rng) for k in keys if rng.random() > 0.2}  # keys come and go
        rows.append((s, row))
    _run(rows, rng.choice(CONTEXTS), short=rng.random() < 0.5)


@pytest.mark.parametrize("value", DEGENERATE_VALUES, ids=repr)
@pytest.mark.parametrize("short", [False, True])
def test_constant_series_of_every_degenerate_value_never_raise(value: Any, short: bool) -> None:
    for n in (1, 2, 60):
        _run([(i + 1, dict.fromkeys(KEYS, value)) for i in range(n)], {"epochs": 1}, short)


@pytest.mark.parametrize("short", [False, True])
def test_single_rows_missing_keys_and_empty_rows_never_raise(short: bool) -> None:
    _run([(1, {})], None, short)
    _run([(0, {"step": 0})], None, short)
    for k in KEYS:
        _run([(1, {k: 0.0})], None, short)
        _run([(s, {k: 0.0}) for s in range(1, 80)], None, short)  # zeros forever
        _run([(s, {k: NAN}) for s in range(1, 80)], None, short)
    _run([(s, {}) for s in range(1, 50)], {"epochs": 2}, short)


def test_every_detector_alone_on_alternating_and_spiky_series() -> None:
    """Each detector on its own, fed a series that flips between extremes every step, and one that is zero then
    explodes: the relative rules with a zero baseline are where ZeroDivisionError lived."""
    for name, cls in DETECTORS.items():
        for pattern in ("alternate", "zero_then_spike", "tiny_growth"):
            det = cls({"epochs": 1, "mini_batches": 1})
            for s in range(1, 100):
                if pattern == "alternate":
                    v = 0.0 if s % 2 else 1e6
                elif pattern == "zero_then_spike":
                    v = 0.0 if s < 60 else 1e9
                else:
                    v = 1e-12 * 1.3**s
                a = det.observe(s, dict.fromkeys(KEYS, v))
                if a is not None:
                    _check_alert(a)
            assert isinstance(det.active, bool), name


def test_alert_values_stay_finite_numbers_or_none_in_evidence() -> None:
    """Evidence is for people and JSON: no NaN leaks from a window that held only NaN-free values."""
    rng = random.Random(123)
    mon = Monitor({"epochs": 1}, {"entropy_collapse": {"patience": 2}})
    for s in range(1, 200):
        row = {k: rng.choice([0.0, 1.0, 0.99, 5.0, 0.01]) for k in KEYS}
        mon.observe(s, row)
    for a in mon.alerts:
        for v in a.evidence.values():
            if isinstance(v, float):
                assert math.isfinite(v), (a.detector, a.evidence)
