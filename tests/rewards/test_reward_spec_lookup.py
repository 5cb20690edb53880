"""`module:function` reward specs resolve from the working directory, as TRL users pass functions of the script
beside them (issue 39): through the installed `grpokit` command (whose sys.path does not hold the working
directory), in the sandboxed worker, with no PYTHONPATH; a failure says where it looked. The sandbox still grants
only the module's own file, never the working directory around it (docs/threat_model.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

GRPOKIT = str(Path(sys.executable).with_name("grpokit"))  # the console script, as a user runs it
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"HF_HUB_OFFLINE": "1"}

REWARDS = """
def accuracy_reward(completions, answer, **kwargs):
    return [1.0 if c.strip() == a else 0.0 for c, a in zip(completions, answer)]


def reads_env(completions, **kwargs):
    import os
    try:
        open(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".env")).read()
        return [1.0] * len(completions)
    except PermissionError:
        return [0.0] * len(completions)
"""
LABELED = [
    {"completion": "7", "answer": "7", "expected": True},
    {"completion": "8", "answer": "7", "expected": False},
    {"completion": "12", "answer": "12", "expected": True},
]


def _audit(folder: Path, spec: str) -> subprocess.CompletedProcess:
    cmd = [GRPOKIT, "audit-reward", "--reward", spec, "--labeled", "labeled.jsonl", "--json"]
    return subprocess.run(cmd, capture_output=True, text=True, env=ENV, cwd=folder, timeout=180)


def _folder(tmp_path: Path) -> Path:
    (tmp_path / "my_rewards.py").write_text(REWARDS)
    (tmp_path / "labeled.jsonl").write_text("".join(json.dumps(r) + "\n" for r in LABELED))
    (tmp_path / ".env").write_text("HF_TOKEN=hf_canary\n")
    return tmp_path


def test_a_module_in_the_working_directory_is_found_without_pythonpath(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    out = _audit(folder, "my_rewards:accuracy_reward")
    assert "cannot import" not in out.stderr, out.stderr
    report = json.loads(out.stdout)
    labeled = report["labeled"]
    assert (labeled["positives"], labeled["negatives"]) == (2, 1)
    assert (labeled["false_positives"], labeled["false_negatives"]) == (0, 0)


def test_a_package_and_a_relative_file_path_in_the_working_directory(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    (folder / "mypkg").mkdir()
    (folder / "mypkg" / "__init__.py").write_text("")
    (folder / "mypkg" / "scores.py").write_text(REWARDS)
    (folder / "sub").mkdir()
    (folder / "sub" / "r.py").write_text(REWARDS)
    for spec in ("mypkg.scores:accuracy_reward", "./sub/r.py:accuracy_reward"):
        out = _audit(folder, spec)
        labeled = json.loads(out.stdout)["labeled"]
        assert (labeled["false_positives"], labeled["false_negatives"]) == (0, 0), (spec, out.stderr)


def test_a_module_found_nowhere_says_where_it_looked(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    out = _audit(folder, "no_such_rewards:score")
    assert out.returncode == 2
    line = out.stderr.strip().splitlines()[-1]
    assert "no_such_rewards.py" in line and repr(str(folder.resolve())) in line and "Python path" in line
    out = _audit(folder, "./nowhere/r.py:score")
    assert out.returncode == 2 and repr(str(folder.resolve() / "nowhere" / "r.py")) in out.stderr


def test_a_module_found_in_the_working_directory_still_cannot_read_beside_it(tmp_path: Path) -> None:
    """Only the module's file is granted: its sibling .env stays unreadable (the reward returns 0 on
    PermissionError, 1 if it read the file)."""
    folder = _folder(tmp_path)
    code = (
        "from grpokit.rewards import RewardManager\n"
        "from grpokit.data.example import Example\n"
        "with RewardManager([('my_rewards:reads_env', 1.0)]) as m:\n"
        "    print(m.sandbox.get('reading', '')[:8], m.score(['x'], [Example(prompt='p', answer='1')]).rewards)\n"
    )
    # -I: the interpreter's path holds neither the working directory nor PYTHONPATH, as the grpokit command
    out = subprocess.run(
        [sys.executable, "-I", "-c", code], capture_output=True, text=True, env=ENV, cwd=folder, timeout=120
    )
    assert out.returncode == 0, out.stderr
    reading, rewards = out.stdout.split(" ", 1)
    if reading != "landlock":
        pytest.skip("no Landlock here: reads are not confined")
    assert rewards.strip() == "[0.0]", out.stdout


@pytest.mark.slow
def test_train_finds_the_reward_module_beside_it(tmp_path: Path) -> None:
    """The README's command, run from the folder holding my_rewards.py, with no PYTHONPATH: 2 steps."""
    folder = _folder(tmp_path)
    tiny = ["model.name=tiny", "rollout.prompts_per_step=2", "rollout.group_size=4", "rollout.max_new_tokens=6"]
    tiny += ["train.eval_every=0", "train.save_every=0", "data.eval_size=4"]
    cmd = [GRPOKIT, "train", "--steps", "2", "--out", "runs", "--set", "reward.functions=[my_rewards:accuracy_reward]"]
    cmd += [arg for kv in tiny for arg in ("--set", kv)]
    out = subprocess.run(cmd, capture_output=True, text=True, env=ENV, cwd=folder, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    [run] = (folder / "runs").iterdir()
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines() if '"reward/mean"' in x]
    assert [r["step"] for r in rows] == [1, 2] and all(r["reward/fail_frac"] == 0.0 for r in rows)
    assert all("reward/accuracy_reward_mean" in r for r in rows)
