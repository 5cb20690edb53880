"""The `grpokit` command line, run as a real subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(Path(__file__).parents[1])}


def grpokit(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "grpokit.cli", *args], capture_output=True, text=True, env=ENV, cwd=cwd, timeout=600
    )


def test_recipes_lists_every_published_method() -> None:
    out = grpokit("recipes")
    assert out.returncode == 0, out.stderr
    names = {line.split()[0] for line in out.stdout.splitlines() if line.strip()}
    assert {"grpo", "dr_grpo", "dapo", "gpg", "gspo", "gmpo", "cispo", "ppo", "vapo", "orz", "t1"} <= names


def test_recipes_show_prints_resolved_config() -> None:
    out = grpokit("recipes", "show", "dapo")
    assert out.returncode == 0, out.stderr
    assert "eps_high: 0.28" in out.stdout and "group_filter: dynamic_sampling" in out.stdout


@pytest.mark.parametrize(
    ("override", "needle"),
    [
        ("algo.eps_hgh=0.3", "Did you mean 'algo.eps_high'"),
        ("algo.eps_high=abc", "algo.eps_high='abc' must be a number"),
        ("algo.policy_loss=gspoo", "Did you mean 'gspo'"),
        ("rollout.group_size=0", "rollout.group_size=0 is invalid"),
    ],
)
def test_bad_override_is_one_clear_error(override: str, needle: str, tmp_path: Path) -> None:
    out = grpokit("train", "--recipe", "dapo", "--model", "tiny", "--out", str(tmp_path), "--set", override)
    assert out.returncode == 2
    assert needle in out.stderr
    assert "Traceback" not in out.stderr
    assert not any(tmp_path.iterdir())  # nothing was started


def test_train_tiny_then_resume_then_eval(tmp_path: Path) -> None:
    common = [
        "--set",
        "rollout.prompts_per_step=2",
        "--set",
        "rollout.group_size=4",
        "--set",
        "rollout.max_new_tokens=4",
        "--set",
        "data.eval_size=4",
        "--set",
        "train.save_every=1",
        "--set",  # the optimizer state in the finished run's last checkpoint too: it is continued with --steps 2
        "train.save_only_model=false",
    ]
    out = grpokit(
        "train", "--recipe", "grpo", "--model", "tiny", "--steps", "1", "--out", str(tmp_path), "--name", "run", *common
    )
    assert out.returncode == 0, out.stderr
    run = tmp_path / "run"
    assert "held-out accuracy before" in out.stdout and str(run) in out.stdout
    assert (run / "checkpoints" / "step_1").is_dir()
    out = grpokit("train", "--resume", str(run), "--steps", "2")
    assert out.returncode == 0, out.stderr
    assert "resumed from step 1" in out.stdout
    steps = [json.loads(x)["step"] for x in (run / "metrics.jsonl").read_text().splitlines() if "time/step" in x]
    assert steps == [1, 2]
    # resumed again at its last step: nothing left to train, said in one line; nothing trained, saved or evaluated
    files = {p: p.stat().st_mtime_ns for p in run.rglob("*") if p.is_file()}
    out = grpokit("train", "--resume", str(run))
    assert out.returncode == 0, out.stderr
    assert f"nothing left to train: {run} has trained 2 steps (checkpoint step_2), train.steps is" in out.stdout
    assert "--steps N with N > 2" in out.stdout and "held-out accuracy" not in out.stdout
    assert {p: p.stat().st_mtime_ns for p in run.rglob("*") if p.is_file()} == files
    out = grpokit("eval", "--model", str(run / "final"), "--task", "add1", "--n", "4", "--json")
    assert out.returncode == 0, out.stderr
    res = json.loads(out.stdout.strip().splitlines()[-1])
    assert 0.0 <= res["eval/accuracy"] <= 1.0 and res["eval/n"] == 4


def test_a_finished_model_only_run_is_not_continued_silently(tmp_path: Path) -> None:
    """train.save_only_model=true: a finished run's last checkpoint holds the model only. `--resume` says there is
    nothing left to train and points to `--model RUN/final`; `--resume --steps 2`, which would need the optimizer
    state, is refused in one line before the run is claimed: its recorded end stays as it was."""
    sets = ["rollout.prompts_per_step=2", "rollout.group_size=2", "rollout.max_new_tokens=4", "data.eval_size=2"]
    sets.append("train.save_only_model=true")
    small = [x for s in sets for x in ("--set", s)]
    out = grpokit("train", "--model", "tiny", "--steps", "1", "--out", str(tmp_path), "--name", "run", *small)
    assert out.returncode == 0, out.stderr
    run = tmp_path / "run"
    assert not (run / "checkpoints" / "step_1" / "trainer_state" / "optimizer.pt").exists()
    ended = (run / "outcome.json").read_text()
    out = grpokit("train", "--resume", str(run))
    assert out.returncode == 0, out.stderr
    assert "nothing left to train" in out.stdout and f"--model {run / 'final'}" in out.stdout
    out = grpokit("train", "--resume", str(run), "--steps", "2")
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert "step_1 holds the model only" in out.stderr and "train.save_only_model=false" in out.stderr
    assert (run / "outcome.json").read_text() == ended


def test_missing_model_path_is_clear(tmp_path: Path) -> None:
    out = grpokit("train", "--model", str(tmp_path / "nope"), "--out", str(tmp_path), "--steps", "1")
    assert out.returncode != 0
    assert "nope" in out.stderr and "local Hugging Face model directory" in out.stderr


def test_train_help_explains_every_field_of_the_health_line() -> None:
    """Each label the health line prints (cli/console.py) is explained in `grpokit train --help`."""
    from grpokit.cli.console import health_line
    from grpokit.data.registry import TASKS

    out = subprocess.run(
        [sys.executable, "-m", "grpokit", "train", "--help"], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    every = {"kl_ref/k3": 0.0, "sampling/rounds": 2.0, "actor/clipfrac_high": 0.01, "time/step": 3.0}
    labels = [part.split(" ")[0] for part in health_line(1, 2, every, alerts=1).split("  ")]
    assert labels == ["step", "reward", "acc", "H", "zv", "kl", "clip", "len", "rounds", "3.0s", "⚠1"]
    assert "  zv – all✓– all✗–  " in health_line(1, 2, every)
    for label in ["step s/N", "reward", "acc", "H", "zv", "all✓ all✗", "kl", "clip lo/hi", "len", "rounds", "Ns"]:
        assert f"\n  {label} " in out, label
    assert "\n  eta " in out and "\n  ⚠n " in out
    assert all(name in out for name in TASKS.primary())  # --task lists the registered tasks
