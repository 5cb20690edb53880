"""bench/forecast.py: forecasts scored on a few corpus runs (the table's shape, hits within runs, non-negative leads,
false forecasts counted on the healthy runs' rows) and the scoring arithmetic on a diagnosis built by hand."""

from __future__ import annotations

import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import forecast  # noqa: E402

# a SkyRL run whose KL blows up (a known KL drift onset) and a converged verl run (healthy for every family)
RUNS = ["skyrl_grpo_tau_bench_kl_blowup", "verl_ppo_gsm8k_converged"]


def test_the_table_has_one_row_per_forecast_and_consistent_numbers() -> None:
    runs = forecast.read_runs(forecast.CORPUS, RUNS)
    assert {r.name for r in runs} == set(RUNS)
    scores = forecast.score(runs)
    assert [s.forecast for s in scores] == [f for f, _, _ in forecast.FAMILIES]
    lines = forecast.table(scores).splitlines()
    assert len(lines) == 2 + len(forecast.FAMILIES)
    assert all(line.count("|") == lines[0].count("|") for line in lines)
    for s, line in zip(scores, lines[2:]):
        assert f"`{s.forecast}`" in line
        assert 0 <= s.hits <= len(s.onsets)
        assert all(o.lead >= 0 and o.lead_over_alert >= 0 for o in s.onsets if o.hit)
        assert all(o.first_step <= o.onset <= o.alerted for o in s.onsets)
        assert 0 <= s.false_forecasts and len(s.false_runs) <= s.healthy_runs
        with_mode = [r for r in runs if s.mode in r.modes]
        assert len(s.onsets) + len(s.no_onset) == len(with_mode)
        healthy = [r for r in runs if s.mode not in r.modes and s.forecast not in r.diagnosis["not_measurable"]]
        assert s.healthy_steps == sum(r.diagnosis["steps"] for r in healthy)
    kl = next(s for s in scores if s.forecast == "kl_forecast")
    assert kl.onsets, "the KL blow-up run has a KL drift alert: its onset is known"
    detail = forecast.detail(scores).splitlines()
    assert len([line for line in detail if line.startswith("| `")]) == sum(len(s.onsets) for s in scores)


def test_a_forecast_before_the_onset_is_a_hit_with_its_lead_and_one_on_a_healthy_run_is_false() -> None:
    def alert(detector: str, mode: str, step: int, fired_at: int) -> dict:
        return {"detector": detector, "mode": mode, "step": step, "fired_at": fired_at}

    failing = forecast.Run(
        "a",
        "log",
        frozenset({"entropy collapse"}),
        {
            "steps": 40,
            "first_step": 1,
            "not_measurable": {},
            "alerts": [
                alert("entropy_forecast", "entropy collapse ahead", 9, 9),
                alert("entropy_collapse", "entropy collapse", 30, 33),
                alert("entropy_forecast", "entropy collapse ahead", 35, 35),
            ],
        },
    )
    healthy = forecast.Run(
        "b",
        "log",
        frozenset(),
        {"steps": 250, "first_step": 1, "not_measurable": {}, "alerts": [alert("entropy_forecast", "x", 7, 7)]},
    )
    s = next(s for s in forecast.score([failing, healthy]) if s.forecast == "entropy_forecast")
    (o,) = s.onsets
    assert (o.hit, o.lead, o.lead_over_alert) == (True, 30 - 9, 33 - 9)
    assert s.after_onset[o.run] == 1
    assert (s.healthy_runs, s.healthy_steps, s.false_forecasts) == (1, 250, 1)
    assert s.false_per_1000 == 1000 / 250
