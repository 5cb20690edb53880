"""Kill -9 anywhere, then `--resume`: the run's logs end up with the rows of a run that was never killed.

A real `grpokit train` (tiny model, 3 steps, a checkpoint every step, an evaluation at step 2) kills itself with
SIGKILL at a named point (`grpokit.common.faults`: `GRPOKIT_TEST_KILL_AT=POINT:N`, the N-th passage of the point), in
the middle of a step, of a checkpoint and of the final save; `grpokit train --resume` then finishes it. Its metrics rows
(timings aside) and its completion rows' steps must equal those of the same run never killed, and its checkpoints
and final model must be complete.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

TESTS = Path(__file__).parents[1]
ARGS = [
    "--model", "tiny", "--steps", "3",
    "--set", "model.precision=fp32",
    "--set", "rollout.prompts_per_step=2",
    "--set", "rollout.group_size=2",
    "--set", "rollout.max_new_tokens=4",
    "--set", "data.eval_size=2",
    "--set", "train.eval_every=2",
    "--set", "train.save_every=1",
]  # fmt: skip

# (point, N): metrics rows are logged as eval before (1), steps 1-3 (2-4), eval after (5); one completions write per
# step; `model_saved` passes once per checkpoint (3) and once for the final model
KILL_POINTS = [
    ("log", 3),  # step 2 computed, its row not written yet
    ("samples", 2),  # step 2's metrics row written, its completions not
    ("checkpoint", 2),  # checkpoint 2 half written (.tmp-step_2)
    ("checkpoint_saved", 2),  # checkpoint 2 in place, older ones not pruned yet
    ("checkpoint", 3),  # the last checkpoint half written
    ("log", 5),  # every step done and checkpointed, the final evaluation row not written
    ("model_saved", 4),  # the final model half written (weights, no tokenizer): the row after it was doubled
    ("final_saved", 1),  # the final model written, the run not closed
]


def run_grpokit(*args: str, kill_at: str | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(TESTS)}
    env.pop("GRPOKIT_TEST_KILL_AT", None)
    if kill_at:
        env["GRPOKIT_TEST_KILL_AT"] = kill_at
    cmd = [sys.executable, "-m", "grpokit.cli", *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)


def rows(run: Path, name: str = "metrics.jsonl") -> list[dict[str, Any]]:
    return [json.loads(x) for x in (run / name).read_text().splitlines() if x.strip()]


def timeless(row: dict[str, Any]) -> dict[str, Any]:
    """A metrics row without what depends on the clock (durations, throughputs, reward call seconds)."""
    return {k: v for k, v in row.items() if not k.startswith("time/") and not k.endswith(("_per_s", "seconds"))}


def assert_same_rows(got: list[dict[str, Any]], want: list[dict[str, Any]]) -> None:
    assert [r["step"] for r in got] == [r["step"] for r in want]
    for g, w in zip(got, want):
        g, w = timeless(g), timeless(w)
        assert sorted(g) == sorted(w), (g["step"], set(g) ^ set(w))
        for key, value in w.items():
            if isinstance(value, float):
                assert g[key] == pytest.approx(value, rel=1e-5, abs=1e-6, nan_ok=True), (g["step"], key)
            else:
                assert g[key] == value, (g["step"], key)


def final_model_complete(run: Path) -> bool:
    final = run / "final"
    return (final / "model.safetensors").is_file() and (final / "tokenizer.json").is_file()


@pytest.fixture(scope="module")
def never_killed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("never_killed") / "run"
    done = run_grpokit("train", *ARGS, "--output-dir", str(run))
    assert done.returncode == 0, done.stderr
    return run


@pytest.mark.slow
@pytest.mark.parametrize(("point", "n"), KILL_POINTS, ids=[f"{p}:{n}" for p, n in KILL_POINTS])
def test_resume_after_kill_gives_the_rows_of_a_run_never_killed(
    point: str, n: int, never_killed: Path, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    killed = run_grpokit("train", *ARGS, "--output-dir", str(run), kill_at=f"{point}:{n}")
    assert killed.returncode == -signal.SIGKILL, killed.stderr  # it reached the point and died there
    resumed = run_grpokit("train", "--resume", str(run))
    assert resumed.returncode == 0, resumed.stderr
    assert_same_rows(rows(run), rows(never_killed))
    assert [r["step"] for r in rows(run, "completions.jsonl")] == [
        r["step"] for r in rows(never_killed, "completions.jsonl")
    ]
    checkpoints = sorted(p.name for p in (run / "checkpoints").iterdir())
    assert checkpoints == sorted(p.name for p in (never_killed / "checkpoints").iterdir())
    assert final_model_complete(run)
