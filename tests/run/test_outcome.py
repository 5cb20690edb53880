"""A run's end is in its run directory (`outcome.json`), and every reader of runs says it first: `doctor`, `report`,
`compare`, `--resume`. A new run that fails before its first step leaves nothing behind, so the retry may use the
same `--output-dir`; a comparison is written beside `runs/`, never read back as a run. Real CLI processes, the
tiny model, real rewards."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tiny_config import tiny_overrides

from grpokit.run.outcome import outcome_line, read_outcome, status_of
from grpokit.training.guard import Diverged
from grpokit.training.interrupts import Interrupted

TESTS = Path(__file__).parents[1]
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(TESTS)}


def grpokit(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "grpokit.cli", *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=ENV, timeout=600, cwd=cwd)


def train_args(*extra: str) -> list[str]:
    sets = [x for o in tiny_overrides("train.steps=4", *extra) for x in ("--set", o)]
    return ["train", *sets]


def test_each_stop_has_its_status() -> None:
    assert status_of(None) == "completed"
    assert status_of(Interrupted(15, "stopped")) == "interrupted"
    assert status_of(KeyboardInterrupt()) == "interrupted"
    assert status_of(Diverged("loss is nan")) == "diverged"
    assert status_of(ValueError("bad")) == "error"


def test_a_run_that_dies_says_how_in_its_directory_and_every_reader_says_it_first(tmp_path: Path) -> None:
    run = tmp_path / "run"
    died = grpokit(*train_args("reward.functions=[toy_rewards:fails_after_two_calls]"), "--output-dir", str(run))
    assert died.returncode == 1 and "reward service unreachable" in died.stderr
    outcome = read_outcome(run)
    logged = [json.loads(x)["step"] for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert outcome is not None and outcome["status"] == "error" and outcome["step"] == max(logged) >= 1
    last = outcome["step"]
    assert "RewardFailureError" in outcome["message"] and "reward service unreachable" in outcome["message"]
    line = outcome_line(outcome)
    assert line is not None and line.startswith(f"ended: error after step {last}: RewardFailureError")

    doctor = grpokit("doctor", str(run))
    lines = doctor.stdout.splitlines()
    assert lines[1].strip() == line[: len(lines[1].strip())] and lines[2].startswith("  verdict: ended in error")
    as_json = json.loads(grpokit("doctor", "--json", str(run)).stdout)
    assert as_json["outcome"]["status"] == "error"

    report = grpokit("report", str(run), "--out", str(tmp_path / "report"))
    assert report.returncode == 0, report.stderr
    html = (tmp_path / "report" / "report.html").read_text()
    assert html.index(f"ended: error after step {last}") < html.index("verdict: ended in error")

    done = tmp_path / "done"
    ok = grpokit(*train_args(), "--output-dir", str(done))
    assert ok.returncode == 0, ok.stderr
    assert read_outcome(done)["status"] == "completed" and read_outcome(done)["step"] == 4

    # compare: written beside runs/ by default, with each run's end in its table; doctor on runs/ sees 2 runs
    runs = tmp_path / "runs"
    runs.mkdir()
    (run).rename(runs / "died")
    (done).rename(runs / "done")
    cmp = grpokit("compare", str(runs / "died"), str(runs / "done"), "--x", "steps", cwd=tmp_path)
    assert cmp.returncode == 0, cmp.stderr
    page = next((tmp_path / "comparisons").glob("compare-*/compare.html")).read_text()
    assert f"ended: error after step {last}" in page and "ended: completed after step 4" in page
    (tmp_path / "comparisons").rename(runs / "comparisons")  # even a comparison inside runs/ is not read as runs
    assert len(json.loads(grpokit("doctor", "--json", str(runs)).stdout)) == 2


def test_a_run_that_fails_before_its_first_step_leaves_nothing_and_the_retry_uses_the_directory(
    tmp_path: Path,
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("the user's own file")  # --output-dir may hold files of the user's
    # the reward fails in the first evaluation: config.yaml, run.json and tb/ were written, no step was
    failed = grpokit(
        *train_args("reward.functions=[toy_rewards:always_raises]", "train.eval_every=2"), "--output-dir", str(out)
    )
    assert failed.returncode == 1, failed.stderr
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]
    retry = grpokit(*train_args(), "--output-dir", str(out))
    assert retry.returncode == 0, retry.stderr
    assert read_outcome(out)["status"] == "completed"
    # a resume says how the run ended before it continues
    resumed = grpokit("train", "--resume", str(out), "--steps", "5")
    assert resumed.returncode == 0, resumed.stderr
    assert f"{out} ended: completed after step 4" in resumed.stdout.splitlines()[0]
    assert read_outcome(out)["step"] == 5
