"""HealthCallback on rows a trainer (or a hand-written loop) can hand it: a `state.global_step` that is not a step
number is skipped, counted and said once; an int too large for a float reads as infinity, not an OverflowError; and
its alert log is never appended through a link planted in `output_dir`."""

from __future__ import annotations

import io
import math
from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip("trl")

from trl import GRPOConfig  # noqa: E402

from grpokit.integrations.trl import HealthCallback  # noqa: E402
from grpokit.monitor.readers.canonical import canonical_row  # noqa: E402

ZERO_VARIANCE = {"reward": 0.0, "reward_std": 0.0, "frac_reward_zero_std": 1.0, "loss": 0.0}


def started(tmp_path: Path) -> tuple[HealthCallback, io.StringIO, SimpleNamespace]:
    out = io.StringIO()
    cb = HealthCallback(thresholds={"advantage_collapse": {"window": 2}}, out=out)
    args = GRPOConfig(output_dir=str(tmp_path / "out"), report_to=[], use_cpu=True, bf16=False)
    state = SimpleNamespace(global_step=0, is_world_process_zero=True)
    cb.on_train_begin(args, state, SimpleNamespace())
    return cb, out, state


def test_a_step_that_is_not_a_number_is_skipped_counted_and_said_once(tmp_path: Path) -> None:
    cb, out, state = started(tmp_path)
    try:
        for bad in (None, "7", float("nan"), -1):
            state.global_step = bad
            cb.on_log(None, state, SimpleNamespace(), logs=dict(ZERO_VARIANCE))
            cb.on_step_end(None, state, SimpleNamespace())
    finally:
        cb.on_train_end(None, state, SimpleNamespace())
    assert cb.skipped_rows == 4 and out.getvalue().count("is skipped (not a step)") == 1
    assert "state.global_step=None" in out.getvalue()


def test_an_int_too_large_for_a_float_reads_as_infinity() -> None:
    row = canonical_row("trl", 3, {"grad_norm": 10**400, "loss": -(10**400), "reward": 0.5})
    assert row["train/grad_norm"] == math.inf and row["actor/loss"] == -math.inf and row["reward/mean"] == 0.5


def test_the_alert_log_is_never_appended_through_a_planted_link(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("the user's file\n")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "grpokit_alerts.jsonl").symlink_to(victim)
    cb, out, state = started(tmp_path)
    try:
        for step in (1, 2, 3):
            state.global_step = step
            cb.on_log(None, state, SimpleNamespace(), logs=dict(ZERO_VARIANCE))
    finally:
        cb.on_train_end(None, state, SimpleNamespace())
    assert any(e == "onset" for e, _ in cb.events)  # an alert was raised and would have been written
    assert victim.read_text() == "the user's file\n"
    assert out.getvalue().count("is a symbolic link grpokit did not make") == 1
    assert "advantage collapse" in out.getvalue()
