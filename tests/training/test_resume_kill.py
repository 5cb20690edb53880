"""Kill -9 anywhere, then `--resume`: the run's logs end up with the rows of a run that was never killed.

A real `grpokit train` (tiny model, 3 steps, a checkpoint every step, an evaluation at step 2) kills itself with
SIGKILL at a named point (`grpokit.common.faults`: `GRPOKIT_TEST_KILL_AT=POINT:N`, the N-th passage of the point), in
the middle of a step, of a checkpoint and of the final save; `grpokit train --resume` then finishes it. Its metrics rows
(timings aside) and its completion rows' steps must equal those of the same run never killed, and its checkpoints
and final model must be complete. The same holds when the kill tore the row being written (its bytes cut mid-line,
no newline). A finished run extended with `--resume RUN --steps M` (issue 45 item 6) trains on from its last
checkpoint, which keeps the optimizer state by default as in TRL, and logs the rows of a run trained to M at once.
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


# (kill point, the never-killed run's metrics row the kill was writing, how much of it reached the file)
TORN = [
    ("log:4", 3, "half"),  # step 3's row torn mid-line; checkpoint 2 is the newest
    ("log:5", 4, "all but its newline"),  # every step checkpointed, the final evaluation's row lacks its newline
]


@pytest.mark.slow
@pytest.mark.parametrize(("kill_at", "index", "reached"), TORN, ids=[f"{k}-{r}" for k, _, r in TORN])
def test_a_row_torn_by_a_kill_mid_write_is_dropped_and_no_whole_row_is_lost_or_doubled(
    kill_at: str, index: int, reached: str, never_killed: Path, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    killed = run_grpokit("train", *ARGS, "--output-dir", str(run), kill_at=kill_at)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    whole = (run / "metrics.jsonl").read_bytes()
    line = (never_killed / "metrics.jsonl").read_bytes().splitlines()[index]
    torn = line[: len(line) // 2] if reached == "half" else line
    assert whole.endswith(b"\n") and not torn.endswith(b"\n")
    (run / "metrics.jsonl").write_bytes(whole + torn)  # what the kill left: the row's first bytes, no newline
    resumed = run_grpokit("train", "--resume", str(run))
    assert resumed.returncode == 0, resumed.stderr
    said = "resume: metrics.jsonl: dropped 1 torn line(s) (its last line, cut by a kill mid-write)" in resumed.stdout
    assert said == (reached == "half")  # a row whole but for its newline is valid JSON: cut back with the checkpoint
    data = (run / "metrics.jsonl").read_bytes()
    assert data.startswith(whole) and data.endswith(b"\n")  # the rows written before the kill stay as they were
    assert torn not in data.splitlines()  # the fragment is gone, not glued to the next row
    assert_same_rows(rows(run), rows(never_killed))  # every line a row: none lost, none doubled
    assert final_model_complete(run)


# a run with a gradient at every step (a reward that varies within each group), so that each update, and the
# optimizer state it leaves for the next, shows in the rows of the steps after it
EXTEND = [
    "--model", "tiny",
    "--set", "model.precision=fp32",
    "--set", "rollout.prompts_per_step=2",
    "--set", "rollout.group_size=4",
    "--set", "rollout.max_new_tokens=6",
    "--set", "data.eval_size=2",
    "--set", "train.eval_every=0",
    "--set", "train.save_every=1",
    "--set", "train.lr=1e-2",
    "--set", "reward.functions=[toy_rewards:vowel_frac]",
]  # fmt: skip


@pytest.mark.slow
def test_a_finished_run_extended_with_steps_trains_on_as_one_run_and_loses_or_doubles_no_row(tmp_path: Path) -> None:
    """train.save_only_model unset: as in TRL, the last checkpoint of a finished run keeps the optimizer, scheduler
    and RNG state, so `--resume RUN --steps 4` on a run that ended at step 2 trains steps 3 and 4 and logs what a run
    trained 4 steps at once logs (timings aside): the state it continued from is the one that run had. The finished
    run's rows stay as they were, its final evaluation at step 2 too (nothing writes it again)."""
    run, straight = tmp_path / "run", tmp_path / "straight"
    done = run_grpokit("train", *EXTEND, "--steps", "2", "--output-dir", str(run))
    assert done.returncode == 0, done.stderr
    last = run / "checkpoints" / "step_2"
    assert (last / "trainer_state" / "optimizer.pt").is_file()
    assert "model_only" not in json.loads((last / "trainer_state" / "state.json").read_text())
    before = (run / "metrics.jsonl").read_bytes()
    samples = (run / "completions.jsonl").read_bytes()
    resumed = run_grpokit("train", "--resume", str(run), "--steps", "4")
    assert resumed.returncode == 0, resumed.stderr
    assert "resume: override train.steps: 2 -> 4" in resumed.stdout and "resumed from step 2" in resumed.stdout
    assert (run / "metrics.jsonl").read_bytes().startswith(before)
    assert (run / "completions.jsonl").read_bytes().startswith(samples)
    got = rows(run)
    assert [r["step"] for r in got if "time/step" in r] == [1, 2, 3, 4]  # each step once, continuing
    assert [r["step"] for r in got if "eval/accuracy" in r] == [0, 2, 4]  # before, the first end, the new end
    done = run_grpokit("train", *EXTEND, "--steps", "4", "--output-dir", str(straight))
    assert done.returncode == 0, done.stderr
    want = rows(straight)
    assert [r["step"] for r in want if "eval/accuracy" in r] == [0, 4]
    assert_same_rows([r for r in got if r["step"] != 2 or "time/step" in r], want)
    steps = [[r["step"] for r in rows(d, "completions.jsonl")] for d in (run, straight)]
    assert steps[0] == steps[1] and sorted(set(steps[0])) == [1, 2, 3, 4]
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["step_3", "step_4"]
    assert os.path.samefile(run / "final" / "model.safetensors", run / "checkpoints" / "step_4" / "model.safetensors")
    assert json.loads((run / "outcome.json").read_text())["status"] == "completed"
