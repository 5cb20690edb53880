"""The system detectors (issue 47 item 2) on real logs and on system failures spliced into real healthy runs
(`bench/system_latency.py`, `bench/latency.py`'s method): each fires on its splice within a few logged rows and stays
quiet on the unbent run."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from grpokit.monitor.detectors import Monitor
from grpokit.monitor.detectors.system_memory import explain_oom
from grpokit.monitor.doctor.corpus import diagnoses_by_key
from grpokit.monitor.readers.canonical import canonicalise

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))
import system_latency as S  # noqa: E402
from latency import CORPUS, Base, read_base  # noqa: E402

SYSTEM = {"time_split", "memory_headroom", "throughput_regression", "noop_update", "sync_mismatch"}


@pytest.fixture(scope="module")
def verl179() -> Base:
    base = read_base(CORPUS / "verl_grpo_opd_qwen2p5_3b_179_steps", "output.log", "verl")
    assert base is not None and len(base.steps) >= 150
    return base


def _alerts(base: Base, raw: dict[int, dict[str, float]]) -> list:
    rows, _, _ = canonicalise(raw, base.mapper)
    mon = Monitor(dict(base.context))
    for r in rows:
        mon.observe(int(r["step"]), r)
    return [a for a in mon.alerts if a.detector in SYSTEM]


def _inj(name: str) -> S.Sys:
    return next(i for i in S.INJECTIONS if i.name == name)


def test_the_healthy_verl_run_gets_no_system_alert(verl179: Base) -> None:
    # its generation is 45% of a step, its update 11%, memory flat at 46 GB, tokens/s steady, grad norm never 0
    assert _alerts(verl179, verl179.raw) == []


@pytest.mark.parametrize(
    ("name", "mode", "severity"),
    [
        ("generation-bound", "generation-bound", "info"),
        ("learner-bound", "learner-bound", "info"),
        ("memory growth", "memory headroom", None),
        ("throughput halved", "throughput regression", "warning"),
        ("no-op update", "no-op update", "critical"),
        ("mismatch jump after sync", "sampler != learner after sync", None),
    ],
)
def test_each_system_failure_spliced_into_the_real_run_is_named_within_a_window(
    verl179: Base, name: str, mode: str, severity: str | None
) -> None:
    inj = _inj(name)
    k, raw = S.splice(inj, verl179)
    mine = [a for a in _alerts(verl179, raw) if a.detector == inj.detector and a.fired_at >= k]
    assert mine, f"{name}: no alert"
    first = min(mine, key=lambda a: a.fired_at)
    assert first.mode == mode
    assert first.fired_at - k <= 10  # within the detectors' 10-step windows
    if severity is not None:
        assert first.severity == severity
    assert first.fix and first.evidence
    # before the splice the same run raised nothing of this detector (the mismatch signal added at its level)
    assert S.false_alarms(inj, verl179) == []


def test_the_time_verdict_reads_the_shares_and_names_the_trainers_knobs(verl179: Base) -> None:
    k, raw = S.splice(_inj("generation-bound"), verl179)
    a = next(a for a in _alerts(verl179, raw) if a.mode == "generation-bound")
    assert a.evidence["generation_key"] == "time/generate"
    assert 0.6 <= a.evidence["generation_share"] <= 1.0  # 6x generation: 45% of a step becomes ~83%
    assert "use_vllm=True" in a.fix and "rollout.name" in a.fix and "rollout.max_new_tokens" in a.fix


def test_a_real_skyrl_run_is_generation_bound_and_that_is_not_a_failure_mode() -> None:
    """SkyRL's tau-bench run logs its generation at ~78% of each step: the verdict is given, as info, and the corpus
    scoring does not count it as a false alarm."""
    diag = diagnoses_by_key(CORPUS / "skyrl_grpo_tau_bench_kl_blowup")["output.log"]
    verdict = [a for a in diag["alerts"] if a["detector"] == "time_split"]
    assert [a["mode"] for a in verdict] == ["generation-bound"]
    assert verdict[0]["severity"] == "info" and verdict[0]["evidence"]["generation_share"] > 0.7


def test_memory_forecast_is_the_arithmetic_of_its_evidence(verl179: Base) -> None:
    k, raw = S.splice(_inj("memory growth"), verl179)
    a = next(a for a in _alerts(verl179, raw) if a.detector == "memory_headroom")
    assert 0 < a.evidence["slope_gb_per_step"] <= 0.5  # its first window still holds rows from before k
    ev, at = a.current["evidence"], a.current["step"]  # the latest window: all grown rows
    assert ev["slope_gb_per_step"] == pytest.approx(0.5, rel=0.05)  # the 0.5 GB per step spliced in
    left = (ev["capacity_gb"] - ev["memory_gb"]) / ev["slope_gb_per_step"]
    assert ev["reaches_capacity_at"] - at == pytest.approx(left, abs=1)
    # the assumed card is the smallest that holds the peak seen: 80 GB at first, 94 GB once the peak passed 80
    assert (a.evidence["capacity_gb"], ev["capacity_gb"]) == (80.0, 94.0)
    assert ev["capacity"].startswith("assumed")  # verl logs no card size
    assert "verl" in a.fix and "TRL" in a.fix


def test_an_oom_at_the_logs_end_is_explained_with_the_memory_arithmetic(verl179: Base) -> None:
    k, raw = S.splice(_inj("memory growth"), verl179)
    rows, _, _ = canonicalise({s: r for s, r in raw.items() if s <= k + 20}, verl179.mapper)
    line = explain_oom(rows, capacity_gb=80.0)
    assert line is not None
    assert f"after step {k + 20}" in line and "of a 80 GB card" in line and "growing 0.50 GB per step" in line
    tight = explain_oom(rows, capacity_gb=57.0)  # a card the growth fills at the next step
    assert tight is not None and "(the growth explains it)" in tight
    flat, _, _ = canonicalise(verl179.raw, verl179.mapper)
    assert "not growing" in (explain_oom(flat) or "")
    assert explain_oom([{"step": 1, "reward/mean": 0.5}]) is None


def test_memory_that_jumped_once_and_held_is_not_a_forecast() -> None:
    """verl's GUI-cursor run: peak 68.6 GB at step 1, 76.3 GB from step 2 on, flat (truth: no failure)."""
    diag = diagnoses_by_key(CORPUS / "verl_grpo_gui_cursor_10_steps")["verl_demo.log"]
    assert [a for a in diag["alerts"] if a["detector"] == "memory_headroom"] == []


def test_a_zero_gradient_with_zero_advantages_is_a_collapse_not_a_no_op() -> None:
    """TRL's constant-reward run: grad_norm 0 and reward_std 0 on every step: no no-op alert."""
    diag = diagnoses_by_key(REPO / "tests" / "fixtures" / "logs" / "trl_constant_reward")
    alerts = [a for d in diag.values() for a in d["alerts"]]
    assert not [a for a in alerts if a["detector"] == "noop_update"]
    assert any(a["mode"] == "advantage collapse" for a in alerts)


def test_a_throughput_dip_on_validation_steps_is_not_a_regression() -> None:
    """verl's converged GSM8K run: tokens/s drops to 94 on its last row (a validation step), median 350."""
    diag = diagnoses_by_key(CORPUS / "verl_ppo_gsm8k_converged")["verl_demo.log"]
    assert [a for a in diag["alerts"] if a["detector"] == "throughput_regression"] == []


def test_a_mismatch_jump_off_the_sync_interval_is_left_to_the_level_rule(verl179: Base) -> None:
    inj = _inj("mismatch jump after sync")
    k, raw = S.splice(inj, verl179)
    rows, _, _ = canonicalise(raw, verl179.mapper)
    from grpokit.monitor.detectors import SyncMismatchJump

    def fired(ctx: dict) -> list[int]:
        det = SyncMismatchJump(ctx)
        return [a.fired_at for r in rows if (a := det.observe(int(r["step"]), r)) is not None]

    assert fired({}) and fired({"weight_sync_steps": 1})
    n = 7 if k % 7 not in (0, 1) else 11
    assert k % n not in (0, 1)
    on_sync = fired({"weight_sync_steps": n})
    assert not on_sync or min(on_sync) > k  # not at k itself: k is not right after a sync


def test_the_doctor_explains_an_oom_at_a_verl_logs_end(verl179: Base, tmp_path: Path) -> None:
    """The spliced memory growth written back as verl's console (`step:N - key:value`), cut 20 steps after the onset
    with the CUDA out-of-memory traceback a crashed run ends with: the doctor's finding gives the arithmetic."""
    from grpokit.monitor.doctor import diagnose_all

    k, raw = S.splice(_inj("memory growth"), verl179)
    lines = [f"step:{s} - " + " - ".join(f"{n}:{v}" for n, v in raw[s].items()) for s in sorted(raw) if s <= k + 20]
    tail = ["Traceback (most recent call last):", '  File "main_ppo.py", line 1, in <module>']
    tail.append("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.")
    log = tmp_path / "verl_oom.log"
    log.write_text("\n".join(lines + tail) + "\n", encoding="utf-8")
    (diag,) = diagnose_all(log)
    oom = [f for f in diag["findings"] if f["kind"] == "out_of_memory"]
    assert len(oom) == 1, diag["findings"]
    msg = oom[0]["message"]
    assert f"after step {k + 20}" in msg and "growing 0.50 GB per step" in msg
    # 56.9 GB at +0.5 GB/step fills the assumed 80 GB only ~46 steps later: the arithmetic says growth alone is not it
    assert "of a 80 GB card" in msg and "a spike, or a smaller card than 80 GB" in msg
    healthy = tmp_path / "verl_ok.log"
    healthy.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert not [f for f in diagnose_all(healthy)[0]["findings"] if f["kind"] == "out_of_memory"]
