"""The step watchdog (issue 47 item 2): a stall alert when the end of a step is overdue by k times the median step
time, naming the last phase logged; on its own clock, on its thread, and inside TRL's HealthCallback."""

from __future__ import annotations

import io
import json
import time
from pathlib import Path

import pytest

from grpokit.integrations.step_watchdog import StepWatchdog


def test_a_step_overdue_by_k_times_the_median_is_a_stall_naming_the_last_phase() -> None:
    got: list[dict] = []
    wd = StepWatchdog(got.append, k=5.0, min_steps=3)
    for step, t in enumerate([0.0, 2.0, 4.0, 6.5], start=1):  # durations 2, 2, 2.5: median 2 s
        wd.step_end(step, now=t)
    wd.saw("timing/generate")
    assert wd.check(now=6.5 + 9.9) is None  # 9.9 s < 5 x 2 s
    a = wd.check(now=6.5 + 10.5)
    assert a is not None and a["mode"] == "stall" and a["severity"] == "critical"
    assert a["evidence"] == {"waited_s": 10.5, "median_step_s": 2.0, "k": 5.0, "last_phase": "timing/generate"}
    assert "since step 4" in a["message"] and "last phase logged: timing/generate" in a["message"]
    assert wd.check(now=30.0) is None  # once per stall
    wd.step_end(5, now=31.0)  # the step ended: re-armed; the 24.5 s step moves the median to 2.25 s
    assert wd.check(now=31.0 + 11.0) is None and wd.check(now=31.0 + 11.5) is not None


def test_too_few_steps_or_a_bad_k_never_alert() -> None:
    wd = StepWatchdog(lambda a: None, min_steps=3)
    wd.step_end(1, now=0.0)
    wd.step_end(2, now=1.0)
    assert wd.check(now=1000.0) is None  # one duration, three needed
    with pytest.raises(ValueError, match="k > 1"):
        StepWatchdog(lambda a: None, k=1.0)


def test_the_thread_alerts_on_a_loop_that_hangs() -> None:
    got: list[dict] = []
    wd = StepWatchdog(got.append, k=3.0, min_steps=2, poll_s=0.02).start()
    try:
        for s in range(1, 5):
            wd.step_end(s)
            time.sleep(0.03)
        deadline = time.monotonic() + 3.0
        while not got and time.monotonic() < deadline:  # the loop now hangs
            time.sleep(0.02)
    finally:
        wd.stop()
    assert len(got) == 1 and got[0]["step"] == 4


def test_health_callback_reports_a_stall_between_steps(tmp_path: Path) -> None:
    from transformers import TrainerControl, TrainerState
    from trl import GRPOConfig

    from grpokit.integrations.trl import HealthCallback

    out = io.StringIO()
    cb = HealthCallback(out=out)
    args = GRPOConfig(output_dir=str(tmp_path / "out"), use_cpu=True, report_to=[], num_generations=4)
    state, control = TrainerState(), TrainerControl()
    cb.on_train_begin(args, state, control)
    assert cb.watchdog is not None
    cb.watchdog.stop()  # drive its clock by hand
    for s, t in enumerate([0.0, 1.0, 2.0, 3.0], start=1):
        state.global_step = s
        cb.watchdog.step_end(s, now=t)
        cb.on_log(args, state, control, logs={"reward": 0.5, "reward_std": 0.2, "loss": 0.1, "grad_norm": 0.3})
    alert = cb.watchdog.check(now=3.0 + 6.0)
    assert alert is not None
    cb.watchdog.on_stall(alert)
    assert ("stall", alert) in cb.events
    assert "the log of step 4 (then step 5 began)" in alert["message"]
    assert "CRITICAL: stall" in out.getvalue()
    lines = (tmp_path / "out" / "grpokit_alerts.jsonl").read_text().splitlines()
    assert json.loads(lines[-1])["event"] == "stall"
    cb.on_train_end(args, state, control)
