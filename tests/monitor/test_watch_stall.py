"""The watch's stall alert (issue 47 item 2): no new row for k times the run's median row interval is a warning that
names the last phase the log recorded and a fix, registered in `WATCH_RULES`, cleared by the next row."""

from __future__ import annotations

import io
import json
import os
import time
from pathlib import Path

import pytest

from grpokit.monitor.stall import WATCH_RULES, Stall
from grpokit.monitor.watch import Watcher

PHASES = {"timing_s/gen": 9.0, "timing_s/old_log_prob": 1.0, "timing_s/update_actor": 4.5, "timing_s/step": 15.0}


def row(step: int) -> str:
    data = {"actor/entropy": 1.1, "actor/grad_norm": 0.5, "critic/score/mean": 0.4, **PHASES}
    return json.dumps({"step": step, "data": data}) + "\n"


def test_stall_is_registered_with_its_thresholds() -> None:
    assert WATCH_RULES["stall"] is Stall
    assert {"k", "min_s"} <= set(WATCH_RULES.params("stall"))
    with pytest.raises(ValueError, match="k > 1"):
        Stall(k=0.5)


def test_stall_fires_past_k_median_intervals_names_the_last_phase_and_clears() -> None:
    rule = Stall(k=4, min_s=0)
    phases = {"timing_s/gen": 9.0, "timing_s/update_actor": 4.5}
    for i, at in enumerate((100.0, 110.0, 120.0, 131.0, 140.0)):  # rows 10 s apart (the median)
        rule.seen([(i + 1, {})], at, arrived=True, last=phases)
    assert rule.median() == 10.0
    assert rule.check(179.0) is None  # 39 s: under 4 x 10 s
    event, alert = rule.check(181.0)
    assert event == "onset" and alert.mode == "stall" and alert.severity == "warning" and alert.step == 5
    assert "no new row for 41 s, 4.1 x the run's median row interval (10.0 s)" in alert.message
    assert "timing_s/update_actor (4.5 s) at step 5" in alert.message and "py-spy dump" in alert.fix
    assert rule.check(500.0) is None  # said once per stall
    rule.seen([(6, {})], 501.0, arrived=True)
    assert rule.check(501.0) == ("cleared", alert) and alert.cleared_at == 6


def test_stall_floor_and_the_logged_step_time_before_rows_arrive() -> None:
    rule = Stall(k=5, min_s=60)
    rule.seen([(s, {"time/step": 2.0}) for s in (10, 20, 30)], 0.0, arrived=False)  # logged every 10 steps
    assert rule.median() == 20.0  # 2 s a step x 10 steps a row
    assert rule.check(99.0) is None and rule.check(101.0)[0] == "onset"
    quick = Stall(k=5, min_s=60)
    quick.seen([(1, {"time/step": 0.1})], 0.0, arrived=False)
    assert quick.check(59.0) is None and quick.check(61.0) is not None  # never under `min_s`


def test_watch_raises_a_stall_on_a_log_that_stopped_before_it_started_and_clears_it(tmp_path: Path) -> None:
    path = tmp_path / "verl_run.jsonl"
    path.write_text("".join(row(s) for s in range(1, 6)))
    old = time.time() - 300
    os.utime(path, (old, old))  # the trainer's last row was written 5 minutes ago; it logs a 15 s step
    out = io.StringIO()
    w = Watcher(path, out=out, rules={"stall": {"k": 5, "min_s": 60}})
    w.poll()
    text = out.getvalue()
    assert "[warning] stall at step 5: no new row for 300 s, 20.0 x the run's median row interval (15.0 s)" in text
    assert "the last phase it logged is timing_s/step (15 s) at step 5" in text and "fix: see where" in text
    with path.open("a") as f:
        f.write(row(6) + row(7))
    w.poll()
    assert "stall cleared at step 6" in out.getvalue() and w.alert_count() == 1
