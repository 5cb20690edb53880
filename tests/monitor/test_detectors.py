"""Failure-mode detectors (`grpokit.monitor.detectors`) on synthetic metric rows: each one fires on its condition
with the right onset step, severity, evidence and a fix naming the seed technique; stays quiet below its
threshold; takes its thresholds by keyword; reports absent inputs as not measurable and then never fires. Includes
the §18.15 vector of docs/math.md for the entropy-collapse rule of §17.7."""

from __future__ import annotations

from typing import Any

import pytest

from grpokit.monitor.detectors import (
    DETECTORS,
    AdvantageCollapse,
    Alert,
    ClippingAnomaly,
    Detector,
    EntropyCollapse,
    KLDrift,
    LengthBias,
    Monitor,
    NoisyReward,
    Numerical,
    SamplerMismatch,
    Saturation,
    Truncation,
    rank,
)

NAN = float("nan")


def feed(det: Detector | Monitor, rows: list[dict[str, Any]], start: int = 1) -> list[Alert]:
    """Observe `rows` as steps start, start+1, ...; return every alert raised."""
    out: list[Alert] = []
    for i, row in enumerate(rows):
        if isinstance(det, Monitor):
            out.extend(det.observe(start + i, row))
        elif (a := det.observe(start + i, row)) is not None:
            out.append(a)
    return out


def one(alerts: list[Alert]) -> Alert:
    assert len(alerts) == 1, [a.to_dict() for a in alerts]
    return alerts[0]


# ------------------------------------------------------------------------------------------------ registry


def test_registry_holds_one_documented_detector_per_failure_mode() -> None:
    assert set(DETECTORS) == {
        "advantage_collapse",
        "entropy_collapse",
        "entropy_explosion",
        "kl_drift",
        "length_bias",
        "truncation",
        "clipping",
        "sampler_mismatch",
        "noisy_reward",
        "numerical",
        "saturation",
        "short_batch",
        "divergence",
        "stale_sampler",
        "malformed_tool_calls",
        "tool_failures",
        "episode_limits",
        "env_token_share",
        "entropy_forecast",
        "zero_variance_forecast",
        "kl_forecast",
        *SYSTEM,
    }
    for name, cls in DETECTORS.items():
        assert cls.name == name and cls.__doc__ and cls.requires
        with pytest.raises(ValueError, match="no threshold"):
            cls(None, no_such_threshold=1)


def test_monitor_passes_thresholds_to_its_detectors() -> None:
    mon = Monitor(None, {"entropy_collapse": {"patience": 5, "h_star": 1.0}, "truncation": {"window": 2}})
    by_name = {d.name: d for d in mon.detectors}
    assert by_name["entropy_collapse"].patience == 5 and by_name["entropy_collapse"].h_star == 1.0
    assert by_name["truncation"].window == 2 and by_name["truncation"].values.size == 2
    assert by_name["kl_drift"].kl_max == KLDrift.kl_max  # untouched detectors keep their defaults


def test_alert_is_json_ready_and_rank_puts_critical_first() -> None:
    a = Alert("m", "d", 3, 5, "warning", "msg", {"x": 1}, "fix", ["a=b"])
    b = Alert("m", "d", 9, 9, "critical", "msg", {}, "fix")
    c = Alert("m", "d", 1, 9, "warning", "msg", {}, "fix")
    assert a.to_dict()["evidence"] == {"x": 1} and a.to_dict()["actions"] == ["a=b"]
    assert rank([a, b, c]) == [b, c, a]


# --------------------------------------------------------------------------------------- advantage collapse


def zv_row(frac: float, all_correct: float = 0.0, all_wrong: float | None = None) -> dict[str, float]:
    return {
        "zv/acc_frac": frac,
        "zv/all_correct": all_correct,
        "zv/all_wrong": frac if all_wrong is None else all_wrong,
    }


def test_advantage_collapse_fires_when_the_window_mean_reaches_the_threshold() -> None:
    det = AdvantageCollapse()
    a = one(feed(det, [zv_row(0.9)] * 8))
    # two rows at the critical 0.8 or above name the onset at once, before the window of 5 fills
    assert (a.step, a.fired_at, a.severity) == (1, 2, "critical")  # onset: the first of the two rows
    assert a.evidence["zero_variance_frac"] == 0.9 and a.evidence["signal"] == "zv/acc_frac"
    assert a.evidence["all_wrong_frac"] == 0.9 and a.evidence["all_correct_frac"] == 0.0
    assert "DAPO dynamic sampling" in a.fix and "easier prompts" in a.fix
    assert a.actions == ["algo.group_filter=dynamic_sampling"]
    assert det.active
    a = one(feed(AdvantageCollapse(), [zv_row(0.7)] * 8))  # under 0.8: the window decides
    assert (a.step, a.fired_at, a.severity) == (1, 5, "warning")


def test_advantage_collapse_severity_data_advice_and_actions() -> None:
    a = one(feed(AdvantageCollapse(), [zv_row(0.6, all_correct=0.4, all_wrong=0.2)] * 5))
    assert a.severity == "warning" and "harder prompts" in a.fix
    # already using dynamic sampling: nothing to switch on
    a = one(feed(AdvantageCollapse({"dynamic_sampling": True}), [zv_row(1.0)] * 5))
    assert a.actions == [] and a.severity == "critical"


def test_advantage_collapse_quiet_below_threshold_or_before_the_window_fills() -> None:
    assert feed(AdvantageCollapse(), [zv_row(0.45)] * 30) == []
    assert feed(AdvantageCollapse(), [zv_row(0.7)] * 4) == []
    assert feed(AdvantageCollapse(), [zv_row(1.0), zv_row(0.0), zv_row(1.0)]) == []  # one row is a moment
    # a mean just under 0.5 over the window: 4 x 0.6 + 0.0 = 0.48
    assert feed(AdvantageCollapse(), [zv_row(0.6)] * 4 + [zv_row(0.0)]) == []


def test_advantage_collapse_thresholds_and_signal_preference() -> None:
    a = one(feed(AdvantageCollapse(threshold=0.3, critical=0.95, window=2), [zv_row(0.4)] * 3))
    assert (a.step, a.fired_at, a.severity) == (1, 2, "warning")
    # the accuracy-based fraction wins over the reward-based ones
    rows = [{"zv/frac": 0.0, "zv/sample_frac": 0.0, "zv/acc_frac": 1.0}] * 5
    assert one(feed(AdvantageCollapse(), rows)).evidence["signal"] == "zv/acc_frac"
    rows = [{"zv/frac": 1.0}] * 5
    a = one(feed(AdvantageCollapse(), rows))
    assert a.evidence["signal"] == "zv/frac" and "all_wrong_frac" not in a.evidence


def test_advantage_collapse_alerts_once_per_episode() -> None:
    det = AdvantageCollapse(window=2, threshold=0.6, cooldown=0)
    alerts = feed(det, [zv_row(1.0)] * 6 + [zv_row(0.0)] * 2 + [zv_row(1.0)] * 2)
    assert [(a.step, a.fired_at) for a in alerts] == [(1, 2), (9, 10)]


def test_a_mode_returning_within_the_cooldown_is_not_alerted_again() -> None:
    det = AdvantageCollapse(window=2, threshold=0.6)  # default cooldown: 10 steps
    rows = [zv_row(1.0)] * 6 + [zv_row(0.0)] * 2 + [zv_row(1.0)] * 2 + [zv_row(0.0)] * 12 + [zv_row(1.0)] * 2
    alerts = feed(det, rows)
    # cleared at 7, back at 10 (silent, though active), cleared at 11, back at 24: 13 steps later, alerted
    assert [(a.step, a.fired_at) for a in alerts] == [(1, 2), (23, 24)]


def test_zero_variance_groups_that_are_all_correct_read_as_the_task_learned() -> None:
    """Zero-variance groups that are nearly all all-correct are convergence, information with the advice to stop
    (whatever their share of all groups); the same zero-variance share of all-wrong groups is a critical collapse."""
    a = one(feed(AdvantageCollapse(), [zv_row(0.9, all_correct=0.85, all_wrong=0.05)] * 5))
    assert (a.mode, a.severity, a.actions) == ("convergence", "info", [])
    assert "task is learned" in a.message and "monitor.stop_when_learned=true" in a.fix
    assert a.evidence["learned_share"] == 0.944 and "94% of those are all-correct" in a.message
    a = one(feed(AdvantageCollapse(), [zv_row(0.6, all_correct=0.6, all_wrong=0.0)] * 5))
    assert (a.mode, a.severity) == ("convergence", "info")
    a = one(feed(AdvantageCollapse(), [zv_row(0.9, all_correct=0.05, all_wrong=0.85)] * 5))
    assert (a.mode, a.severity) == ("advantage collapse", "critical")
    # below `learned` (0.8) of the zero-variance groups all-correct, they are still wasted compute
    a = one(feed(AdvantageCollapse(), [zv_row(0.9, all_correct=0.6, all_wrong=0.3)] * 5))
    assert (a.mode, a.severity) == ("advantage collapse", "critical") and "harder prompts" in a.fix
    a = one(feed(AdvantageCollapse(learned=0.6), [zv_row(0.9, all_correct=0.6, all_wrong=0.3)] * 5))
    assert (a.mode, a.severity) == ("convergence", "info")


def test_a_collapse_that_turns_into_the_task_learned_changes_reading_and_severity() -> None:
    """Mixed zero-variance groups first (critical), then all-correct: the same alert becomes convergence, its
    severity eases to info, both changes are recorded, the live monitor shows it again and names it active."""
    mon = Monitor(factories={"advantage_collapse": AdvantageCollapse})
    first = one(feed(mon, [zv_row(0.9, all_correct=0.3, all_wrong=0.6)] * 5))
    assert (first.mode, first.severity) == ("advantage collapse", "critical") and mon.active() == ["advantage collapse"]
    assert feed(mon, [zv_row(1.0, all_correct=1.0, all_wrong=0.0)] * 3, start=6) == []
    # all-correct share of the zero-variance groups over the window 0.75 < 0.8: still a collapse
    assert mon.escalated == [] and (first.mode, first.severity) == ("advantage collapse", "critical")
    feed(mon, [zv_row(1.0, all_correct=1.0, all_wrong=0.0)], start=9)  # 0.86 all-correct, 0.12 all-wrong: 0.88
    assert mon.escalated == [first] and (first.mode, first.severity) == ("convergence", "info")
    assert first.escalations == [
        {"step": 9, "mode": "convergence", "from_mode": "advantage collapse"},
        {"step": 9, "from": "critical", "to": "info"},
    ]
    assert mon.active() == ["convergence"] and mon.active_alerts() == [first]


# ------------------------------------------------------------------------------------------ entropy collapse


def entropy_rows(hs: list[float]) -> list[dict[str, float]]:
    return [{"entropy/token_mean": h} for h in hs]


def test_entropy_rule_spec_vector_18_15() -> None:
    """H = [0.6]*10 + [0.4]*51 + [0.7]: first flagged at index 60 (the 51st consecutive low step), clears at 61."""
    hs = [0.6] * 10 + [0.4] * 51 + [0.7]
    mon = Monitor()
    flagged, active = [], []
    for i, h in enumerate(hs):  # step = 0-based index
        flagged += [(i, a) for a in mon.observe(i, {"entropy/token_mean": h}) if a.detector == "entropy_collapse"]
        active.append("entropy collapse" in mon.active())
    assert [i for i, _ in flagged] == [60]
    a = flagged[0][1]
    assert (a.step, a.fired_at, a.severity, a.mode) == (10, 60, "critical", "entropy collapse")
    assert a.evidence == {"entropy": 0.4, "steps_below": 51, "threshold": 0.5, "initial_entropy": 0.6}
    assert "clip-higher" in a.fix and "entropy bonus" in a.fix and "Clip-Cov" in a.fix
    assert [i for i, on in enumerate(active) if on] == [60]


def test_entropy_flag_stays_set_while_low_and_alerts_once() -> None:
    det = EntropyCollapse()
    hs = [0.6] + [0.4] * 55
    alerts = []
    on = []
    for i, h in enumerate(hs):
        if (a := det.observe(i, {"entropy/token_mean": h})) is not None:
            alerts.append(a)
        on.append(det.active)
    assert [a.fired_at for a in alerts] == [51]
    assert on == [False] * 51 + [True] * 5


def test_entropy_low_from_the_first_step_is_no_collapse_unless_it_falls_further() -> None:
    """A collapse is a fall: entropy below h* from the first logged step (TRL's finance run, 0.087 at step 1 and 0.077
    at step 100, reward flat) raises nothing; a fall below 10% of that initial level is a collapse, and low entropy
    at the accuracy ceiling is still convergence."""
    assert feed(EntropyCollapse(), entropy_rows([0.087, 0.074, 0.081] * 40)) == []
    a = one(feed(EntropyCollapse(patience=3), entropy_rows([0.2] * 10 + [0.01] * 5)))
    assert (a.mode, a.step, a.evidence["threshold"]) == ("entropy collapse", 11, 0.02) and "10%" in a.message
    rows = [{"entropy/token_mean": 0.05, "reward/accuracy": 0.95}] * 5
    assert one(feed(EntropyCollapse(patience=3), rows)).mode == "convergence"
    # one logged value at or above h* before the drop makes it a fall
    assert one(feed(EntropyCollapse(patience=3), entropy_rows([0.5] + [0.087] * 4))).step == 2


def test_entropy_exactly_h_star_resets_the_counter() -> None:
    det = EntropyCollapse()
    assert feed(det, entropy_rows([0.4] * 50 + [0.5] + [0.4] * 50), start=0) == []  # strict <
    assert det.count == 50
    a = one(feed(det, entropy_rows([0.4]), start=101))
    assert (a.step, a.fired_at, a.evidence["steps_below"]) == (51, 101, 51)


def test_entropy_nan_resets_the_counter_and_is_reported_as_missing() -> None:
    det = EntropyCollapse()
    alerts = feed(det, entropy_rows([0.6] + [0.4] * 50 + [NAN] + [0.4] * 50), start=0)
    assert [a.mode for a in alerts] == ["entropy metric missing"]  # the separate alert of §17.7, no collapse
    assert alerts[0].step == 51 and alerts[0].detector == "entropy_collapse"
    assert det.count == 50 and not det.active
    a = one(feed(det, entropy_rows([0.4]), start=102))
    assert a.mode == "entropy collapse" and a.step == 52


def test_entropy_nan_clears_an_active_flag() -> None:
    det = EntropyCollapse(patience=2)
    feed(det, entropy_rows([0.6] + [0.1] * 3))
    assert det.active
    feed(det, entropy_rows([NAN]), start=5)
    assert not det.active and det.count == 0


def test_entropy_relative_collapse() -> None:
    """Well above h* but below 10% of the first 10 steps' mean (8.0 -> threshold 0.8) for more than `patience`."""
    det = EntropyCollapse(patience=3)
    alerts = feed(det, entropy_rows([8.0] * 10 + [0.7] * 6), start=0)
    a = one(alerts)
    assert (a.step, a.fired_at) == (10, 13)
    assert a.evidence["threshold"] == 0.8 and a.evidence["initial_entropy"] == 8.0
    assert "10%" in a.message
    assert feed(EntropyCollapse(patience=3), entropy_rows([8.0] * 10 + [0.9] * 20)) == []


def test_entropy_thresholds_are_configurable() -> None:
    a = one(feed(EntropyCollapse(h_star=1.0, patience=2), entropy_rows([2.0, 0.9, 0.9, 0.9])))
    assert (a.step, a.fired_at) == (2, 4)
    assert feed(EntropyCollapse(h_star=0.3, patience=2), entropy_rows([0.4] * 10)) == []
    assert feed(EntropyCollapse(patience=2, rel_frac=0.05), entropy_rows([8.0] * 10 + [0.7] * 5)) == []


def test_entropy_ignores_rows_without_the_signal() -> None:
    """Rows lacking the key (a skipped update, an eval row) neither reset the counter nor stop the steps they cover
    from counting: entropy below h* at steps 1, 2 and 4 has been below for 4 steps at step 4 (issue 13: skipped
    updates made the collapse be called 49 steps late)."""
    det = EntropyCollapse(patience=2)
    rows = entropy_rows([0.6, 0.1, 0.1]) + [{"reward/mean": 0.5}] + entropy_rows([0.1])
    a = one(feed(det, rows, start=0))
    assert a.fired_at == 4 and a.evidence["steps_below"] == 4 and a.step == 1


# ------------------------------------------------------------------------------------------------ KL drift


def test_kl_drift_fires_above_kl_max() -> None:
    a = one(feed(KLDrift(), [{"kl_ref/k3": 0.1}, {"kl_ref/k3": 0.2}, {"kl_ref/k3": 0.6}, {"kl_ref/k3": 0.7}]))
    assert (a.step, a.fired_at, a.severity) == (3, 3, "critical")
    assert a.evidence == {"kl": 0.6, "signal": "kl_ref/k3"}
    assert "decoupled KL" in a.fix and "adaptive" in a.fix and "EMA reference" in a.fix


def test_kl_drift_fires_on_unbounded_growth() -> None:
    rows = [{"kl_ref/k1": 0.01 * 1.5**i} for i in range(12)]
    a = one(feed(KLDrift(), rows))
    assert (a.step, a.fired_at) == (1, 10)
    assert a.evidence["signal"] == "kl_ref/k1" and a.evidence["kl_first"] == 0.01
    assert a.evidence["kl_last"] == pytest.approx(0.01 * 1.5**9, abs=1e-5)
    assert "0.01 to 0.3844" in a.message  # the absolute values, not only the ratio
    # steps 11-12 pass kl_max: one row above it is a spike; the second makes the episode critical
    assert a.escalations == [{"step": 12, "from": "warning", "to": "critical"}]
    assert a.current["step"] == 12 and a.current["evidence"]["kl"] == pytest.approx(0.01 * 1.5**11, abs=1e-4)


def test_kl_drift_quiet_for_bounded_or_tiny_kl() -> None:
    assert feed(KLDrift(), [{"kl_ref/k3": 0.01 + 0.001 * i} for i in range(30)]) == []  # grows < 3x
    assert feed(KLDrift(), [{"kl_ref/k3": 1e-5 * 2**i} for i in range(10)]) == []  # 5e-3 < kl_floor
    assert feed(KLDrift(), [{"kl_ref/k3": 0.4}] * 30) == []


def test_kl_drift_thresholds_and_signal_preference() -> None:
    rows = [{"kl_ref/k3": k, "kl_ref/k1": 0.01, "actor/kl_loss": 0.01} for k in (0.05, 0.2)]
    a = one(feed(KLDrift(kl_max=0.1), rows))
    assert a.evidence["signal"] == "kl_ref/k3" and a.step == 2
    # above kl_max from the first row: an offset (the reference is not the initial policy); only 3x it is drift
    assert feed(KLDrift(kl_max=0.1), rows[1:] * 3) == []
    a = one(feed(KLDrift(kl_max=0.1), rows[1:] * 2 + [{"kl_ref/k3": 0.7}]))
    assert (a.step, a.evidence["kl_first"]) == (3, 0.2)
    a = one(feed(KLDrift(window=3, growth=2.0), [{"actor/kl_loss": v} for v in (0.05, 0.08, 0.12)]))
    assert (a.step, a.fired_at, a.evidence["signal"]) == (1, 3, "actor/kl_loss")


def dominance_rows(n: int, kl_loss: float, adv_abs: float | None, pg: float = 0.0) -> list[dict[str, float]]:
    row = {"kl_ref/k3": 0.05, "kl/coef": 0.1, "actor/kl_loss": kl_loss, "actor/pg_loss": pg, "reward/mean": 0.3}
    if adv_abs is not None:
        row["adv/abs_mean"] = adv_abs
    return [row] * n


def test_kl_penalty_outweighing_the_policy_gradient() -> None:
    a = one(feed(KLDrift(), dominance_rows(12, kl_loss=10.0, adv_abs=0.8)))
    assert (a.step, a.fired_at, a.severity) == (1, 10, "warning")
    assert a.evidence == {"kl_coef": 0.1, "kl_loss": 10.0, "pg_scale": 0.8}
    assert "adaptive" in a.fix and a.actions == ["algo.kl_coef*=0.5"]
    # without the advantage scale (another trainer's log) the pg loss itself is the yardstick
    assert one(feed(KLDrift(), dominance_rows(10, kl_loss=1.0, adv_abs=None, pg=0.01))).fired_at == 10


def test_kl_penalty_check_is_not_fooled_by_a_zero_grpo_surrogate() -> None:
    """On-policy GRPO's surrogate value is ~0 whatever its gradient: a tiny KL loss must not count as dominating."""
    assert feed(KLDrift(), dominance_rows(30, kl_loss=1e-4, adv_abs=0.7, pg=1e-8)) == []
    # and reward still improving: no stall
    rows = [dict(r, **{"reward/mean": 0.1 * i}) for i, r in enumerate(dominance_rows(12, kl_loss=10.0, adv_abs=0.8))]
    assert feed(KLDrift(), rows) == []


# ---------------------------------------------------------------------------------------------- length bias


def length_row(inc: float, cor: float, mean: float = 100.0, acc: float = 0.3) -> dict[str, float]:
    return {"length/incorrect_mean": inc, "length/correct_mean": cor, "length/mean": mean, "reward/accuracy": acc}


def test_length_bias_incorrect_responses_grow_longer() -> None:
    rows = [length_row(100 + 10 * i, 50) for i in range(12)]
    a = one(feed(LengthBias(), rows))
    assert (a.step, a.fired_at, a.severity, a.mode) == (1, 10, "warning", "length bias")
    assert a.evidence == {"incorrect_len": 190.0, "correct_len": 50.0}
    assert "Dr. GRPO" in a.fix and "token-mean" in a.fix and a.actions == ["algo.loss_agg=token-mean"]


def test_length_bias_quiet_when_not_growing_or_not_longer() -> None:
    assert feed(LengthBias(), [length_row(200, 50)] * 20) == []  # long but stable
    assert feed(LengthBias(), [length_row(50 + i, 50) for i in range(12)]) == []  # growing, ratio < 1.3
    assert feed(LengthBias(), [length_row(100 + 10 * i, 50) for i in range(9)]) == []  # window not full


def test_length_bias_thresholds() -> None:
    rows = [length_row(100 + 10 * i, 50) for i in range(3)]  # ratios 2.0, 2.2, 2.4
    a = one(feed(LengthBias(window=3, ratio=1.9), rows))
    assert (a.step, a.fired_at) == (1, 3)
    assert feed(LengthBias(window=3, ratio=2.0), rows) == []  # every step of the window must exceed the ratio


def test_length_bias_ignores_a_single_noisy_step() -> None:
    """Small batches make one step's correct/incorrect means noisy: one step over the ratio is not a trend."""
    rows = [length_row(55 + i, 50) for i in range(9)] + [length_row(100, 50)]
    assert feed(LengthBias(), rows) == []


def test_length_collapse_without_accuracy_gain() -> None:
    rows = [{"length/mean": 100.0, "reward/accuracy": 0.3}] * 5 + [{"length/mean": 20.0, "reward/accuracy": 0.3}]
    a = one(feed(LengthBias(), rows))
    assert (a.mode, a.step, a.fired_at) == ("length collapse", 6, 6)
    assert a.evidence == {"length": 20.0, "accuracy": 0.3, "initial_accuracy": 0.3}
    assert "VC-PPO" in a.fix
    better = rows[:5] + [{"length/mean": 20.0, "reward/accuracy": 0.6}]  # shorter *and* better: fine
    assert feed(LengthBias(), better) == []
    assert feed(LengthBias(collapse_frac=0.1), rows) == []


def test_length_collapse_on_the_reward_when_the_log_has_no_accuracy() -> None:
    """verl's ReTool on-policy-distillation run (real/verl_grpo_retool_opd_qwen3_4b_length_collapse): no accuracy,
    a -1/+1 score. Length 1,759 -> 88 -> 1 token while the score falls from -0.68 to -1.0 is a collapse; the same
    fall with the reward rising above its first-steps mean is a shorter answer that earns more."""
    first = [(1759.0, -0.68), (1700.0, -0.8), (1500.0, -0.85), (1353.0, -0.91), (1233.0, -0.92)]
    rows = [{"length/mean": n, "reward/mean": r} for n, r in first + [(88.0, -0.99), (1.0, -1.0)]]
    a = one(feed(LengthBias(), rows))
    assert (a.mode, a.step) == ("length collapse", 6) and "without any reward gain" in a.message
    assert a.evidence == {"length": 88.0, "reward": -0.99, "initial_reward": -0.832}
    earns_more = rows[:5] + [{"length/mean": 88.0, "reward/mean": 0.2}]
    assert feed(LengthBias(), earns_more) == []


# ------------------------------------------------------------------------------------------------ truncation


def test_truncation_fires_on_a_high_and_not_falling_rate() -> None:
    a = one(feed(Truncation(), [{"length/truncation_rate": 0.5}] * 7))
    assert (a.step, a.fired_at, a.severity) == (1, 5, "warning")
    assert a.evidence == {"truncation_rate": 0.5, "now": 0.5}
    assert "overlong filtering" in a.fix and "soft overlong" in a.fix and a.actions == ["algo.soft_overlong=true"]


def test_truncation_quiet_when_low_or_falling() -> None:
    assert feed(Truncation(), [{"length/truncation_rate": 0.15}] * 20) == []
    falling = [0.9, 0.7, 0.5, 0.3, 0.25]
    assert feed(Truncation(), [{"length/truncation_rate": v} for v in falling]) == []


def test_truncation_thresholds() -> None:
    a = one(feed(Truncation(threshold=0.1, window=2), [{"length/truncation_rate": 0.15}] * 3))
    assert (a.step, a.fired_at) == (1, 2)
    assert feed(Truncation(threshold=1.01), [{"length/truncation_rate": 1.0}] * 10) == []


# -------------------------------------------------------------------------------------------------- clipping


def clip_row(high: float, low: float) -> dict[str, float]:
    return {"actor/clipfrac_high": high, "actor/clipfrac_low": low}


def test_clipping_fires_when_most_tokens_are_clipped() -> None:
    a = one(feed(ClippingAnomaly(), [clip_row(0.3, 0.2)] * 22))
    assert (a.step, a.fired_at, a.severity) == (1, 20, "warning")
    assert a.evidence == {"clip_frac": 0.5}
    assert "lower learning rate" in a.fix and a.actions == ["train.lr*=0.5"]


def test_clipping_quiet_below_high_for_gspo_and_thresholds() -> None:
    assert feed(ClippingAnomaly(), [clip_row(0.1, 0.1)] * 40) == []
    assert feed(ClippingAnomaly({"policy_loss": "gspo"}), [clip_row(0.4, 0.3)] * 40) == []  # GSPO clips by design
    a = one(feed(ClippingAnomaly(high=0.1, window=3), [clip_row(0.1, 0.1)] * 3))
    assert a.fired_at == 3


CLIP_HIGHER_OFF_POLICY = {"epochs": 2, "mini_batches": 1, "eps_low": 0.2, "eps_high": 0.28}


def test_clip_higher_never_active_is_reported_as_info() -> None:
    a = one(feed(ClippingAnomaly(CLIP_HIGHER_OFF_POLICY, window=4), [clip_row(0.0, 0.05)] * 4))
    assert (a.step, a.fired_at, a.severity) == (1, 4, "info")
    assert a.evidence == {"eps_high": 0.28}
    # the union fraction logged too (verl's pg_clipfrac): the high clip alone decides
    rows = [{"actor/clipfrac": 0.05, **clip_row(0.0, 0.05)}] * 4
    assert one(feed(ClippingAnomaly(CLIP_HIGHER_OFF_POLICY, window=4), rows)).severity == "info"
    # on-policy, symmetric clipping, or a high clip that fires: nothing to say
    assert feed(ClippingAnomaly({**CLIP_HIGHER_OFF_POLICY, "epochs": 1}, window=4), [clip_row(0.0, 0.05)] * 8) == []
    assert feed(ClippingAnomaly({**CLIP_HIGHER_OFF_POLICY, "eps_high": 0.2}, window=4), [clip_row(0, 0.05)] * 8) == []
    assert feed(ClippingAnomaly(CLIP_HIGHER_OFF_POLICY, window=4), [clip_row(0.01, 0.05)] * 8) == []


# ------------------------------------------------------------------------------------------ sampler mismatch


def test_sampler_mismatch_kl_window() -> None:
    a = one(feed(SamplerMismatch(), [{"mismatch/kl_k3": 0.01}] * 5))
    assert (a.step, a.fired_at, a.severity) == (3, 3, "warning")  # the window mean first exceeds kl_max at step 3
    assert a.evidence["mismatch_kl"] == 0.01
    assert "importance sampling" in a.fix and "token_truncate" in a.fix
    assert a.actions == ["algo.is_correction=token_truncate"]


def test_sampler_mismatch_ratio_tail_and_max_logp_gap_fire_at_once() -> None:
    ok = {"mismatch/kl_k3": 1e-6, "mismatch/frac_high": 0.0, "mismatch/abs_diff_max": 0.01}
    a = one(feed(SamplerMismatch(), [ok, ok, {**ok, "mismatch/frac_high": 0.05}]))
    assert (a.step, a.fired_at) == (3, 3) and a.evidence["frac_rho_above_C"] == 0.05
    a = one(feed(SamplerMismatch({"is_correction": "token_truncate"}), [ok, {**ok, "mismatch/abs_diff_max": 3.0}]))
    assert a.step == 2 and a.evidence["abs_logp_diff_max"] == 3.0 and a.actions == []


def test_sampler_mismatch_quiet_in_range_and_thresholds() -> None:
    ok = {"mismatch/kl_k3": 5e-4, "mismatch/frac_high": 0.005, "mismatch/abs_diff_max": 1.5}
    assert feed(SamplerMismatch(), [ok] * 20) == []
    assert one(feed(SamplerMismatch(kl_max=1e-4), [ok] * 3)).fired_at == 3
    assert one(feed(SamplerMismatch(abs_max=1.0), [ok])).fired_at == 1
    assert feed(SamplerMismatch(kl_max=0.1, frac_max=0.1, abs_max=5.0), [{"mismatch/kl_k3": 0.05}] * 10) == []


# ---------------------------------------------------------------------------------------------- noisy reward


def test_noisy_reward_repeated_completions_scored_differently() -> None:
    rows = [{"reward/dup_inconsistency": v} for v in (0.0, NAN, 0.0, 0.25, 0.5)]
    a = one(feed(NoisyReward(), rows))
    assert (a.step, a.fired_at, a.severity) == (4, 4, "critical")
    assert a.evidence == {"dup_inconsistency": 0.25}
    assert "audit the verifier" in a.fix


def test_noisy_reward_tracking_length_more_than_correctness() -> None:
    rows = [{"reward/length_corr": 0.9, "reward/acc_corr": NAN}] * 6
    a = one(feed(NoisyReward(), rows))
    assert (a.step, a.fired_at, a.severity) == (1, 5, "warning")
    assert a.evidence["length_corr"] == 0.9
    # a reward that tracks correctness even more closely is fine; a weak length correlation too
    assert feed(NoisyReward(), [{"reward/length_corr": 0.9, "reward/acc_corr": 0.95}] * 10) == []
    assert feed(NoisyReward(), [{"reward/length_corr": 0.4, "reward/acc_corr": NAN}] * 10) == []
    assert feed(NoisyReward(), [{"reward/length_corr": -0.9, "reward/acc_corr": 0.1}] * 5)[0].fired_at == 5


def test_noisy_reward_thresholds() -> None:
    rows = [{"reward/length_corr": 0.9, "reward/acc_corr": NAN}] * 6
    assert feed(NoisyReward(corr_max=0.95), rows) == []
    assert one(feed(NoisyReward(window=2), rows)).fired_at == 2


# ------------------------------------------------------------------------------------------------- numerical


def test_numerical_non_finite_loss_reward_or_gradient() -> None:
    a = one(feed(Numerical(), [{"train/nonfinite_loss": 0.0}] * 6 + [{"train/nonfinite_loss": 1.0}] * 3))
    assert (a.step, a.fired_at, a.severity) == (7, 7, "critical")
    assert a.evidence == {"nonfinite_loss": 1} and "learning rate" in a.fix and "check rewards" in a.fix
    # a NaN that only means "not logged at this step" (how readers fill gaps) is not numerical trouble
    assert feed(Numerical(), [{"actor/loss": 0.1}] * 6 + [{"actor/loss": NAN, "reward/mean": NAN}] * 3) == []
    a = one(feed(Numerical(), [{"train/grad_norm": 1.0, "train/nonfinite_grad": 0.0}, {"train/nonfinite_grad": 1.0}]))
    assert a.step == 2 and a.evidence == {"nonfinite_grad": 1} and a.actions == ["train.lr*=0.5"]


def test_numerical_grad_norm_spike() -> None:
    norms = [1.0] * 6 + [50.0] + [1.0] * 3 + [40.0]
    alerts = feed(Numerical(cooldown=0), [{"train/grad_norm": g} for g in norms])
    assert [(a.step, a.severity) for a in alerts] == [(7, "warning"), (11, "warning")]
    assert [a.step for a in feed(Numerical(), [{"train/grad_norm": g} for g in norms])] == [7]  # cooldown
    assert alerts[0].evidence == {"grad_norm": 50.0, "median": 1.0}
    assert "lower the learning rate" in alerts[0].fix


def test_numerical_quiet_below_spike_or_without_history() -> None:
    assert feed(Numerical(), [{"train/grad_norm": g, "actor/loss": 0.1} for g in [1.0] * 6 + [9.0]]) == []
    # fewer than 5 earlier norms: 50x their median is needed (from 2 on), one earlier norm is no history
    assert feed(Numerical(), [{"train/grad_norm": g} for g in [1.0] * 4 + [40.0]]) == []
    assert one(feed(Numerical(), [{"train/grad_norm": g} for g in [1.0] * 4 + [100.0]])).step == 5
    assert feed(Numerical(), [{"train/grad_norm": g} for g in [1.0, 1000.0]]) == []
    assert feed(Numerical(early_spike=200.0), [{"train/grad_norm": g} for g in [1.0] * 4 + [100.0]]) == []
    assert feed(Numerical(spike=100.0), [{"train/grad_norm": g} for g in [1.0] * 6 + [50.0]]) == []
    assert one(feed(Numerical(spike=3.0), [{"train/grad_norm": g} for g in [1.0] * 6 + [5.0]])).step == 7


# ----------------------------------------------------------------------------------- absent inputs, healthy rows

# the system doctor's detectors (phase times, memory, throughput, no-op updates, a mismatch after a sync) read keys
# the training-signal rows below do not carry; tests/monitor/test_system_detectors.py sets each of them off
SYSTEM = {"time_split", "memory_headroom", "throughput_regression", "noop_update", "sync_mismatch"}

# one row that sets off every training-signal detector (with short windows) when fed long enough
STORM = {
    "zv/acc_frac": 1.0,
    "zv/frac": 1.0,
    "zv/sample_frac": 1.0,
    "zv/all_wrong": 1.0,
    "zv/all_correct": 0.0,
    "entropy/token_mean": 0.01,
    "kl_ref/k3": 5.0,
    "kl_ref/k1": 5.0,
    "actor/kl_loss": 5.0,
    "length/incorrect_mean": 500.0,
    "length/correct_mean": 10.0,
    "length/mean": 2.0,
    "reward/accuracy": 0.0,
    "length/truncation_rate": 1.0,
    "actor/clipfrac": 0.9,
    "actor/clipfrac_high": 0.5,
    "actor/clipfrac_low": 0.4,
    "mismatch/kl_k3": 1.0,
    "mismatch/frac_high": 0.5,
    "mismatch/abs_diff_max": 10.0,
    "reward/dup_inconsistency": 1.0,
    "reward/length_corr": 0.99,
    "actor/loss": NAN,
    "train/grad_norm": NAN,
    "train/nonfinite_grad": 1.0,
    "train/nonfinite_loss": 1.0,
    "reward/mean": NAN,
    "sampling/short_batch": 1.0,
    "rollout/staleness": 1.0,
    # multi-turn: calls that do not parse, tools that fail, episodes cut, a context full of tool output
    "episode/n": 16.0,
    "episode/call_attempts": 20.0,
    "episode/parse_fail_rate": 0.9,
    "episode/tool_calls": 10.0,
    "episode/tool_calls_mean": 0.6,
    "episode/tool_error_rate": 0.9,
    "episode/tool_timeout_rate": 0.1,
    "episode/turn_limit_frac": 0.5,
    "episode/context_limit_frac": 0.5,
    "episode/length_limit_frac": 0.0,
    "episode/env_tokens_mean": 5000.0,
    "episode/env_token_frac": 0.95,
}


def storm_rows(n: int) -> list[dict[str, float]]:
    # growing incorrect length and KL so the trend conditions hold too
    # (entropy falls from 2.0 after the first row: a collapse is a fall)
    h = [2.0] + [STORM["entropy/token_mean"]] * (n - 1)
    return [
        {**STORM, "length/incorrect_mean": 500.0 + i, "kl_ref/k3": 5.0 + i, "entropy/token_mean": h[i]}
        for i in range(n)
    ]


def test_storm_sets_off_every_detector() -> None:
    mon = Monitor({"epochs": 1})
    fired = {a.detector for a in feed(mon, storm_rows(60))}
    # a storm at 0% accuracy is the opposite of saturation, and its collapsed entropy the opposite of an explosion;
    # it is past every threshold from its first rows, so there is nothing left to forecast
    forecasts = {"entropy_forecast", "zero_variance_forecast", "kl_forecast"}
    assert fired == set(DETECTORS) - {"saturation", "entropy_explosion"} - forecasts - SYSTEM


@pytest.mark.parametrize("name", sorted(DETECTORS))
def test_detector_without_its_inputs_is_not_measurable_and_never_fires(name: str) -> None:
    cls = DETECTORS[name]
    absent = {k for alts in cls.requires for k in alts}
    rows = [{k: v for k, v in r.items() if k not in absent} for r in storm_rows(60)]
    mon = Monitor({"epochs": 4, "eps_low": 0.2, "eps_high": 0.28})
    available = set(rows[0])
    assert name in mon.not_measurable(available)
    assert mon.not_measurable(available)[name] == [" or ".join(alts) for alts in cls.requires]
    assert name not in {a.detector for a in feed(mon, rows)}
    assert set(mon.not_measurable(set(STORM))) <= SYSTEM  # phase times, memory, throughput: not in these rows


def test_empty_log_is_not_measurable_anywhere_and_raises_nothing() -> None:
    mon = Monitor()
    multi_turn = {"malformed_tool_calls", "tool_failures", "episode_limits", "env_token_share"}  # need episode/*
    assert set(mon.not_measurable(set())) == set(DETECTORS) - multi_turn
    assert multi_turn <= set(DETECTORS) and set(mon.not_measurable({"episode/n"})) == set(DETECTORS)
    assert feed(mon, [{"step": i} for i in range(100)]) == [] and mon.active() == []


def test_healthy_rows_raise_nothing() -> None:
    """In-range values of every signal, with the noise of a real run, for 120 steps."""
    import random

    rng = random.Random(0)
    rows = []
    for i in range(120):
        rows.append(
            {
                "zv/acc_frac": rng.choice([0.0, 0.25]),
                "zv/all_correct": 0.0,
                "zv/all_wrong": 0.0,
                "entropy/token_mean": 1.5 + 0.2 * rng.random(),
                "kl_ref/k3": 0.01 + 0.002 * rng.random(),
                "actor/kl_loss": 0.01,
                "actor/pg_loss": 1e-8,
                "adv/abs_mean": 0.7,
                "kl/coef": 0.04,
                "length/incorrect_mean": 60 + 5 * rng.random(),
                "length/correct_mean": 55 + 5 * rng.random(),
                "length/mean": 58 + 5 * rng.random(),
                "reward/accuracy": 0.4 + 0.001 * i,
                "reward/mean": 0.4 + 0.001 * i + 0.05 * rng.random(),
                "length/truncation_rate": 0.05 * rng.random(),
                "actor/clipfrac_high": 0.02 * rng.random(),
                "actor/clipfrac_low": 0.02 * rng.random(),
                "mismatch/kl_k3": 1e-5 * rng.random(),
                "mismatch/frac_high": 0.0,
                "mismatch/abs_diff_max": 0.05,
                "reward/dup_inconsistency": rng.choice([0.0, NAN]),
                "reward/length_corr": 0.2 * rng.random() - 0.1,
                "reward/acc_corr": 0.9,
                "actor/loss": 0.01 * rng.random(),
                "train/grad_norm": 1.0 + rng.random(),
                "train/nonfinite_grad": 0.0,
                "sampling/short_batch": 0.0,
                "episode/n": 16.0,
                "episode/call_attempts": 20.0 + rng.randint(0, 8),
                "episode/parse_fail_rate": 0.1 * rng.random(),
                "episode/tool_calls": 18.0 + rng.randint(0, 8),
                "episode/tool_calls_mean": 1.2 + 0.3 * rng.random(),
                "episode/tool_error_rate": 0.1 * rng.random(),
                "episode/tool_timeout_rate": rng.choice([0.0, 0.0, 0.05]),
                "episode/turn_limit_frac": rng.choice([0.0, 0.0625, 0.125]),
                "episode/context_limit_frac": rng.choice([0.0, 0.0625]),
                "episode/length_limit_frac": rng.choice([0.0, 0.0625]),
                "episode/env_tokens_mean": 300 + 50 * rng.random(),
                "episode/env_token_frac": 0.4 + 0.2 * rng.random(),
            }
        )
    mon = Monitor(
        {"epochs": 1, "eps_low": 0.2, "eps_high": 0.28, "policy_loss": "ppo_clip"},
    )
    assert feed(mon, rows) == [] and mon.active() == []
    assert set(mon.not_measurable(set(rows[0]))) <= SYSTEM


def test_noisy_reward_fires_when_reward_follows_a_format_component() -> None:
    """A weighted reward dominated by its `format` component (r = 0.9) rather than correctness (r = 0.2)."""
    rows = [{"reward/corr/format": 0.9, "reward/acc_corr": 0.2}] * 5
    a = one(feed(NoisyReward(), rows))
    assert a.fired_at == 5 and "format" in a.message and "weight" in a.fix
    assert feed(NoisyReward(), [{"reward/corr/format": 0.9, "reward/acc_corr": 0.95}] * 5) == []


@pytest.mark.parametrize("policy_loss", ["gspo", "gspo_token", "cispo"])
def test_clipping_mostly_clipped_is_not_an_anomaly_for_losses_that_clip_by_design(policy_loss: str) -> None:
    """GSPO and GSPO-token clip a sequence ratio at ~3e-4 (most tokens clip by design); CISPO's clipped tokens
    keep their gradient (only the IS weight is capped), so a high clip fraction throws nothing away."""
    assert feed(ClippingAnomaly({"policy_loss": policy_loss}), [clip_row(0.4, 0.3)] * 40) == []
    # the same fractions under PPO clipping are an anomaly
    assert one(feed(ClippingAnomaly({"policy_loss": "ppo_clip"}), [clip_row(0.4, 0.3)] * 40)).mode == "clipping anomaly"


# ------------------------------------------------------------------- issue 13: real logs, sparse logging, advice


def test_grad_norm_zero_in_most_rows_is_no_level_to_compare_with() -> None:
    """A run whose grad norm is 0 in most rows (every group had equal rewards): median 0 once divided by zero, then
    read "gradient norm 1.72 is from a recent median of 0" (issue 47). A zero norm is a step without an update: the
    first real updates after them are judged against the non-zero norms only, and none is a spike here."""
    norms = [0.0] * 8 + [0.05] + [0.0] * 5 + [3.0] + [0.0] * 2 + [1.72]
    assert feed(Numerical(), [{"train/grad_norm": g} for g in norms]) == []
    # a real spike among zero rows: 30 against the non-zero norms' median 0.5 (the zeros left out)
    norms = [0.0] * 8 + [0.5, 0.6, 0.4, 0.5, 0.55] + [0.0] * 3 + [30.0]
    a = one(feed(Numerical(), [{"train/grad_norm": g} for g in norms]))
    assert (a.step, a.evidence) == (17, {"grad_norm": 30.0, "median": 0.5})
    assert a.message == "gradient norm 30 is 60x its recent median 0.5"


def test_kl_growing_from_tiny_to_small_is_not_drift() -> None:
    """The false alarm of issue 13: KL 0.006 -> 0.031 in 10 steps ("grew 3.1x") is far below any harmful level."""
    rows = [{"kl_ref/k3": 0.006 + (0.031 - 0.006) * i / 9} for i in range(10)]
    assert feed(KLDrift(), rows) == []


def test_windows_are_in_steps_when_the_log_is_written_every_10_steps() -> None:
    """TRL logs every 10 steps by default: a 5-step window is one row; entropy below h* from step 10 to 60 has been
    below for 51 steps, not 6 rows."""
    det = AdvantageCollapse()
    a = one([x for s in range(10, 40, 10) if (x := det.observe(s, zv_row(0.9))) is not None])
    assert (a.step, a.fired_at) == (20, 20)  # the second row tells the interval; one row covers the window
    det = EntropyCollapse()
    det.observe(0, {"entropy/token_mean": 0.6})
    alerts = [(s, x) for s in range(10, 80, 10) if (x := det.observe(s, {"entropy/token_mean": 0.3}))]
    assert [s for s, _ in alerts] == [60] and alerts[0][1].evidence["steps_below"] == 51
    # a 20-step clipping window filled by two rows 10 steps apart
    clip = ClippingAnomaly()
    assert [x.fired_at for s in (10, 20, 30) if (x := clip.observe(s, clip_row(0.3, 0.2)))] == [20]


def test_advantage_collapse_alert_carries_its_current_value_and_escalates() -> None:
    """The demo's stale advice: onset at 63% (warning), last steps at 99% (above its own critical threshold)."""
    det = AdvantageCollapse()
    alerts = feed(det, [zv_row(0.63)] * 5 + [zv_row(0.99)] * 10)
    a = one(alerts)
    assert a.evidence["zero_variance_frac"] == 0.63  # what it was at onset
    assert a.current["step"] == 15 and a.current["evidence"]["zero_variance_frac"] == 0.99
    assert a.severity == "critical" and a.escalations[0]["to"] == "critical"
    feed(det, [zv_row(0.0)] * 6, start=16)
    assert a.cleared_at is not None and not det.active


def test_entropy_fix_never_offers_clip_higher_where_nothing_clips_or_it_is_on() -> None:
    rows = entropy_rows([0.6] + [0.3] * 5)
    on_policy = one(feed(EntropyCollapse({"epochs": 1, "mini_batches": 1}, patience=3), rows))
    assert "clip-higher cannot act" in on_policy.fix and "algo.eps_high" not in " ".join(on_policy.actions)
    assert on_policy.fix.startswith("an entropy bonus")
    already = one(feed(EntropyCollapse({"epochs": 2, "eps_low": 0.2, "eps_high": 0.28}, patience=3), rows))
    assert "clip-higher is on (eps_high=0.28)" in already.fix and "clip-higher (algo.eps_high=0.28)" not in already.fix
    bonus_on = one(feed(EntropyCollapse({"epochs": 2, "entropy_coef": 0.001}, patience=3), rows))
    assert "a larger entropy bonus (algo.entropy_coef is 0.001)" in bonus_on.fix
    unknown = one(feed(EntropyCollapse(patience=3), rows))
    assert "carries no config" in unknown.fix


def test_low_entropy_at_the_accuracy_ceiling_is_convergence_not_collapse() -> None:
    rows = [{"entropy/token_mean": 0.05, "reward/accuracy": 0.99}] * 5
    a = one(feed(EntropyCollapse(patience=3), rows))
    assert (a.mode, a.severity) == ("convergence", "info") and a.evidence["accuracy"] == 0.99
    assert "harder data" in a.fix and a.actions == []
    # a 0/1 reward (verl's score with min 0, max 1) is an accuracy too
    rows = [{"entropy/token_mean": 0.05, "reward/mean": 0.97, "reward/min": 0.0, "reward/max": 1.0}] * 5
    assert one(feed(EntropyCollapse(patience=3), rows)).mode == "convergence"
    # the same entropy at 40% accuracy, after a fall from 0.8, is a collapse
    rows = [{"entropy/token_mean": 0.8 if i == 0 else 0.05, "reward/accuracy": 0.4} for i in range(6)]
    assert one(feed(EntropyCollapse(patience=3), rows)).mode == "entropy collapse"


def test_saturation_verdict_on_accuracy_all_correct_groups_or_held_out_ceiling() -> None:
    a = one(feed(Saturation(), [{"reward/accuracy": 0.97}] * 12))
    assert (a.mode, a.severity, a.fired_at) == ("converged / saturated", "info", 10)
    assert a.evidence["accuracy"] == 0.97 and "harder data" in a.fix
    a = one(feed(Saturation(), [{"zv/all_correct": 0.9, "reward/accuracy": 0.9}] * 10))
    assert a.evidence["all_correct_groups"] == 0.9
    a = one(feed(Saturation(), [{"reward/accuracy": 0.6, "eval/accuracy": 1.0}]))
    assert a.evidence["held_out_accuracy"] == 1.0
    assert feed(Saturation(), [{"reward/accuracy": 0.9, "zv/all_correct": 0.5}] * 30) == []
    # a reward mean with no known range is not an accuracy
    assert feed(Saturation(), [{"reward/mean": 0.99}] * 30) == []
    # nor is a correctness reward that turned into a length reward (bench/latency_runs.py read "344% right")
    assert feed(Saturation(), [{"reward/accuracy": 3.44}] * 30) == []


def test_monitor_lists_the_alerts_that_escalated_at_this_step() -> None:
    mon = Monitor()
    rows = [zv_row(0.6)] * 5 + [zv_row(1.0)] * 3
    escalated_at = [s for s, r in enumerate(rows, 1) if (mon.observe(s, r), mon.escalated)[1]]
    # two rows in a row at 1.0 (steps 6, 7) are critical on the second, though the 5-step mean is 0.76 there
    assert escalated_at == [7]
    mon.observe(9, zv_row(1.0))
    assert mon.alerts[0].severity == "critical" and mon.escalated == []  # nothing new at step 9


def test_thresholds_cannot_name_methods_or_derived_properties() -> None:
    for bad in ("min_steps", "check", "observe", "_update"):
        with pytest.raises(ValueError, match="no threshold"):
            EntropyCollapse(None, **{bad: 1})


def test_short_batch_fires_when_partial_dynamic_sampling_keeps_training_on_short_batches() -> None:
    """`algo.ds_shortfall=partial` (opt-in): short batches in >= half of the last 5 steps is an alert saying why
    (all-correct groups: the task is learned) and what to do; full batches and non-DS runs stay quiet."""
    from grpokit.monitor.detectors import ShortBatch

    det = ShortBatch({"dynamic_sampling": True})
    full = {"sampling/rounds": 2.0, "sampling/short_batch": 0.0, "train/batch_size": 32.0}
    short = {**full, "sampling/rounds": 4.0, "sampling/short_batch": 1.0, "zv/all_correct": 0.9, "zv/all_wrong": 0.0}
    fired = [det.observe(s, short if s >= 3 else full) for s in range(1, 8)]
    alerts = [a for a in fired if a is not None]
    assert len(alerts) == 1 and alerts[0].fired_at == 5 and alerts[0].evidence["short_frac"] == 0.6
    assert "task is learned" in alerts[0].fix and "max_gen_rounds" in alerts[0].fix
    quiet = ShortBatch({"dynamic_sampling": True})
    assert all(quiet.observe(s, full) is None for s in range(1, 10))
    grpo = ShortBatch({"dynamic_sampling": False})
    assert all(grpo.observe(s, short) is None for s in range(1, 10))


def test_length_correlation_matched_by_correctness_is_not_a_noisy_reward() -> None:
    """The demo's end: short batches of one group where the wrong answers are one token longer give
    length_corr = -1 and acc_corr = 1 at the same steps; then accuracy is constant (both NaN). Correctness explains
    the reward as well as length does: no alert. A reward that moves with length while accuracy is constant fires."""
    det = NoisyReward()
    rows = [{"reward/length_corr": -1.0, "reward/acc_corr": 1.0}] * 3 + [{"reward/length_corr": NAN}] * 6
    assert [det.observe(s, r) for s, r in enumerate(rows, 1)] == [None] * 9
    hacked = NoisyReward()
    alerts = [hacked.observe(s, {"reward/length_corr": 0.9, "reward/acc_corr": NAN}) for s in range(1, 7)]
    assert [a for a in alerts if a is not None][0].evidence["length_corr"] == 0.9
