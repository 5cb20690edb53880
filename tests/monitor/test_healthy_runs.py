"""No false critical on a healthy run (issue 47 items 4 and 5): real corpus logs bent into the shapes of healthy runs
that got criticals (`bench/healthy_runs.py`), bursts of all-zero advantages against a collapse that holds, TRL's
`reward_std` read as zero-variance groups, and no ratio or `=None` taken from what a log lacks."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import healthy_runs  # noqa: E402
import latency  # noqa: E402

from grpokit import metric_names as mn  # noqa: E402
from grpokit.monitor.detectors import Monitor  # noqa: E402


@pytest.fixture(scope="module")
def base() -> latency.Base:
    return healthy_runs.base()


def _criticals(alerts: list) -> list:
    return [a for a in alerts if latency.critical_step(a) is not None]


def _by(alerts: list, detector: str) -> list:
    return [a for a in alerts if a.detector == detector]


def test_a_converged_run_of_all_correct_groups_is_convergence_not_a_critical_collapse(base: latency.Base) -> None:
    alerts = healthy_runs.alerts("converged", base)
    assert _criticals(alerts) == []
    (adv,) = _by(alerts, "advantage_collapse")
    assert (adv.mode, adv.severity) == ("convergence", "info")
    # four steps in five have every group all-correct (score min = max = 1 at the top of the run's scores)
    ev = adv.current["evidence"]
    assert ev["all_correct_frac"] == pytest.approx(0.8) and ev["all_wrong_frac"] == 0.0, ev
    assert ev["learned_share"] == 1.0 and "the task is learned" in adv.message


def test_entropy_falling_while_held_out_accuracy_rises_is_low_entropy_not_collapse(base: latency.Base) -> None:
    """verl's PPO reference run in shape: entropy 0.53 -> 0.05, train score flat, held-out accuracy 0.30 -> 0.58."""
    alerts = healthy_runs.alerts("held-out rising", base)
    assert _criticals(alerts) == []
    (ent,) = _by(alerts, "entropy_collapse")
    assert (ent.mode, ent.severity) == ("low entropy", "info")
    cur = ent.current["evidence"]
    assert cur["held_out_later"] > cur["held_out_earlier"] + 0.1, cur
    assert "held-out accuracy rose from" in ent.current["message"]
    # the train score is flat: without the held-out accuracy the same rows are a critical collapse
    b, raw = healthy_runs.shaped("held-out rising", base)
    blind = {s: {k: v for k, v in r.items() if k != healthy_runs.HELD_OUT} for s, r in raw.items()}
    assert [a.mode for a in _criticals(latency.feed(b, blind))] == ["entropy collapse"]


def test_one_prompt_per_step_with_low_entropy_by_design_raises_no_critical(base: latency.Base) -> None:
    alerts = healthy_runs.alerts("one prompt per step", base)
    assert _criticals(alerts) == []
    assert {a.mode for a in _by(alerts, "advantage_collapse")} == {"convergence"}


@pytest.mark.parametrize("shape", ["bursts", "bursts, a line cut"])
def test_isolated_bursts_of_zero_advantages_are_a_warning_not_a_critical(base: latency.Base, shape: str) -> None:
    alerts = healthy_runs.alerts(shape, base)
    assert _criticals(alerts) == []
    (adv,) = _by(alerts, "advantage_collapse")
    assert adv.severity == "warning" and adv.cleared_at is not None


def test_a_collapse_that_holds_after_bursts_is_critical_on_its_third_row(base: latency.Base) -> None:
    alerts = healthy_runs.alerts("bursts, then a collapse that holds", base)
    start = healthy_runs.B + 30  # 131: every advantage 0 from here on, in a run whose bursts cleared
    (crit,) = [a for a in _by(alerts, "advantage_collapse") if a.fired_at >= start]
    assert (crit.fired_at, crit.severity, crit.cleared_at) == (start + 1, "critical", None)
    assert "came and went in short bursts (from steps 101, 103, 107)" in crit.message  # a warning on row 2 ...
    assert latency.critical_step(crit) == start + 2  # ... critical on row 3: it holds


def test_a_collapse_in_a_clean_run_is_critical_on_its_second_row() -> None:
    """Every healthy corpus base that logs the signal, at every interval that keeps it (was 2-4 rows at interval 1:
    the window's mean, diluted by the healthy rows before the onset, overrode two rows in a row at 100%)."""
    inj = next(i for i in latency.INJECTIONS if i.name == "advantage collapse")
    measured = []
    for b in latency.healthy_runs():
        for iv in latency.INTERVALS:
            if len(b.raw) >= latency.MIN_BASE_ROWS and b.logs(*inj.needs):
                if (r := latency.measure(inj, b, iv, None)) is not None and r.onset is not None:
                    measured.append((b.run, iv, r.rows_to_alert, r.rows_to_critical))
    assert len(measured) == 7, measured  # 3 verl bases at intervals 1 and 5, one at 10 (SkyRL logs no advantages)
    assert all(alert is not None and alert <= 2 for _, _, alert, _ in measured), measured
    # critical on the 2nd row, except where a line cut before its advantages lies between the onset's rows (step 30
    # of the teacher-KL run: 29 and 31 are not in a row, as in the bursts with a line cut), then on the 3rd
    late = {(run, iv): crit for run, iv, _, crit in measured if crit != 2}
    assert late == {("verl_grpo_opd_qwen2p5_3b_teacher_kl_offset", 1): 3}, measured


def test_trl_reward_std_of_zero_feeds_the_zero_variance_signal() -> None:
    """TRL before `frac_reward_zero_std` logs `reward_std` only: the corpus' sparse-reward run without that key."""
    run = latency.CORPUS / "trl_grpo_finance_sparse_reward_collapse"
    b = latency.read_base(run, "trainer_state.json", "trl")
    assert b is not None
    raw = {s: {k: v for k, v in r.items() if k != "frac_reward_zero_std"} for s, r in b.raw.items()}
    assert sum(r["reward_std"] == 0.0 for r in raw.values()) == 84
    (adv,) = _by(latency.feed(b, raw), "advantage_collapse")
    assert (adv.mode, adv.severity, adv.fired_at) == ("advantage collapse", "critical", 4)
    assert adv.evidence["signal"] == "adv/min=max" and "reward std 0" in adv.message


def test_no_ratio_against_a_zero_baseline_and_no_none_in_evidence() -> None:
    mon = Monitor()
    for s in range(1, 13):
        mon.observe(s, {"step": s, mn.ENTROPY_TOKEN_MEAN: 0.0 if s <= 10 else 6.0, mn.MISMATCH_FRAC_HIGH: 0.2})
    by = {a.detector: a for a in mon.alerts}
    assert "baseline of 0.00: the policy" in by["entropy_explosion"].message, by["entropy_explosion"].message
    ev = by["sampler_mismatch"].evidence
    assert ev["frac_rho_above_C"] == 0.2 and "mismatch_kl" not in ev and "abs_logp_diff_max" not in ev
    assert all(v is not None for a in mon.alerts for v in a.evidence.values())
    assert not any(math.isinf(v) for a in mon.alerts for v in a.evidence.values() if isinstance(v, float))
