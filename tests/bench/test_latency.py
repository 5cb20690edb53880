"""bench/latency.py: failures spliced into a healthy corpus run at a known step, fed as `grpokit watch` feeds rows,
alert within the measured number of logged rows; the healthy rows raise no critical; rlwatch is fed through its
verl hook."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import latency  # noqa: E402

# a verl on-policy-distillation run, 51 healthy steps (KL to a teacher reference ~0.55 from step 1), and a SkyRL run
# (30 steps, 11-40; no rlwatch integration)
VERL, SKYRL = "verl_grpo_opd_qwen2p5_3b_teacher_kl_offset", "skyrl_grpo_tau_bench_30_steps_resumed"


@pytest.fixture(scope="module")
def bases() -> dict[str, latency.Base]:
    return {b.run: b for b in latency.healthy_runs(latency.CORPUS, [VERL, SKYRL])}


def injection(name: str) -> latency.Injection:
    return next(i for i in latency.INJECTIONS if i.name == name)


def test_a_splice_keeps_the_healthy_rows_and_bends_the_signal_from_k(bases: dict[str, latency.Base]) -> None:
    b = bases[VERL]
    assert len(b.raw) == 51 and b.steps[0] == 1
    k, raw = latency.splice(injection("KL blow-up"), b)
    assert k == 1 + max(20, 51 // 2) + 3 == 29
    assert all(raw[s] == b.raw[s] for s in b.steps if s < k)
    (kl,) = b.names_of("kl_ref/k1")
    assert kl == "actor/reward_kl_penalty"
    assert raw[k][kl] == pytest.approx(10 * b.raw[k][kl])  # x10 at k
    assert raw[k + 10][kl] == pytest.approx(1000 * b.raw[k + 10][kl])  # x1000 from k + 10
    assert sorted(raw) == [s for s in b.steps if s < k] + list(range(k, k + latency.SEGMENT["abrupt"]))
    assert sorted(latency.subsample(raw, 10)) == list(range(10, k + latency.SEGMENT["abrupt"], 10))


def test_kl_blow_up_alerts_at_the_first_row_and_the_healthy_part_raises_no_critical(
    bases: dict[str, latency.Base],
) -> None:
    b = bases[VERL]
    r = latency.measure(injection("KL blow-up"), b, 1, None)
    assert r is not None and r.onset == 29
    assert (r.alert, r.rows_to_alert, r.alert_mode) == (29, 1, "KL drift")  # a warning at once (a spike) ...
    assert r.critical == 30 and r.rows_to_critical == 2  # ... critical when the next row holds it
    k, raw = latency.splice(injection("KL blow-up"), b)
    before = latency.feed(b, {s: v for s, v in raw.items() if s < k})
    assert [a for a in before if a.severity == "critical"] == []


def test_nan_at_interval_10_is_critical_at_the_first_logged_row_after_onset(bases: dict[str, latency.Base]) -> None:
    for run in (VERL, SKYRL):
        r = latency.measure(injection("NaN loss / grad norm"), bases[run], 10, None)
        assert r is not None
        first_row = math.ceil(r.onset / 10) * 10
        assert (r.alert, r.critical, r.rows_to_alert) == (first_row, first_row, 1), run


def test_entropy_explosion_in_a_sparse_log_alerts_on_its_second_row(bases: dict[str, latency.Base]) -> None:
    # the baseline is the first 10 training steps (one row at interval 10), not the first 10 rows
    r = latency.measure(injection("entropy explosion"), bases[VERL], 10, None)
    assert r is not None and (r.onset, r.alert, r.rows_to_alert) == (29, 40, 2)


def test_entropy_collapse_waits_its_patience_and_a_drift_is_forecast_before_it_crosses(
    bases: dict[str, latency.Base],
) -> None:
    r = latency.measure(injection("entropy collapse"), bases[SKYRL], 1, None)
    assert r is not None and r.alert is not None and r.alert - r.onset == 50  # more than 50 steps below the floor
    d = latency.measure(injection("entropy drift"), bases[SKYRL], 1, None)
    assert d is not None and d.onset is not None and d.forecast is not None
    assert d.forecast < d.onset < d.alert  # the forecast came before the crossing, the alert 50 steps after it


def test_a_signal_the_kept_rows_lack_is_not_scored(bases: dict[str, latency.Base]) -> None:
    # SkyRL logs no advantages, rewards' range or zero-variance fraction
    assert not bases[SKYRL].logs(*injection("advantage collapse").needs)
    # verl's lines of steps 10, 20, ... carry validation metrics and are cut at 4,096 characters before the lengths
    assert latency.measure(injection("length collapse"), bases[VERL], 10, None) is None


def test_no_false_alarm_on_the_healthy_runs(bases: dict[str, latency.Base]) -> None:
    for iv in latency.INTERVALS:
        h = latency.healthy(list(bases.values()), iv, None)
        assert h.runs == 2 and h.steps >= 70
        assert (h.warnings, h.criticals, h.which) == (0, 0, [])


def test_rlwatch_is_fed_through_its_verl_hook(bases: dict[str, latency.Base], tmp_path: Path) -> None:
    pytest.importorskip("rlwatch")
    kl = latency.measure(injection("KL blow-up"), bases[VERL], 1, tmp_path)
    assert kl is not None and kl.rl_status == "not fed"  # its tracker reads actor/kl_divergence, not verl's names
    sky = latency.measure(injection("KL blow-up"), bases[SKYRL], 1, tmp_path)
    assert sky is not None and sky.rl_status == "no integration"
    ent = latency.measure(injection("entropy explosion"), bases[VERL], 1, tmp_path)
    assert ent is not None and ent.rl_status == "no counterpart"


def test_the_rewards_of_the_tiny_runs_turn_bad_at_step_k(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib

    import latency_rewards

    monkeypatch.setenv("LATENCY_K", "3")
    monkeypatch.setenv("LATENCY_BATCH", "2")
    rewards = importlib.reload(latency_rewards)  # a fresh count, as in the fresh process of each run
    batch = ["apple", "kiwi"]
    # steps 1 and 2: the vowel reward (and 0 from the length reward); from step 3 the failure
    assert [rewards.vowel_then_zero(batch, []) for _ in range(4)] == [[1.0, 0.0]] * 2 + [[0.0, 0.0]] * 2
    assert [rewards.zero_then_length(batch, []) for _ in range(3)] == [[0.0, 0.0]] * 2 + [[5.0, 4.0]]
