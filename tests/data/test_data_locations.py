"""Bad data is named by file and line (issue 38): a prompt line too long for the model, refused or skipped, says
which line of which file (it used to say only "every held-out prompt"); an empty reference answer is a data error
before training, not a reward exception at step 1; a 2,000,000-digit reference answer is cut in the reward's error
message, not printed whole. Real files, the tiny model and the command line in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from grpokit.data.example import Example
from grpokit.rewards.numeric import exact_numeric

SMALL = ["--model", "tiny", "--set", "model.precision=fp32", "--set", "rollout.max_new_tokens=4"]
SMALL += ["--set", "rollout.group_size=2", "--set", "train.eval_every=0", "--set", "train.steps=1"]
LONG = 200_000  # characters: past the tiny model's 4092-token limit x 32 characters per token, so never tokenized


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def sums(n: int) -> list[dict]:
    return [{"prompt": f"What is {i} + 1?", "answer": str(i + 1)} for i in range(n)]


def grpokit(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "grpokit.cli", "train", *SMALL, "--out", str(tmp_path / "runs"), *args],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )


def last_line(stderr: str) -> str:
    assert "Traceback" not in stderr, stderr[-3000:]
    return [ln for ln in stderr.splitlines() if ln.strip()][-1]


@pytest.mark.slow
def test_a_long_prompt_line_is_named_by_file_and_line(tmp_path: Path) -> None:
    train = write_jsonl(tmp_path / "train.jsonl", [*sums(5), {"prompt": "x " * (LONG // 2), "answer": "1"}, *sums(3)])
    held_out = write_jsonl(tmp_path / "eval.jsonl", [{"prompt": "y" * LONG, "answer": "2"}])
    size = "characters (more than 130944, not tokenized)"  # the rendered prompt: the line and the template
    # every held-out prompt too long: the run cannot measure anything; the line is named
    p = grpokit(tmp_path, "--task", str(train), "--set", f"data.eval_data={held_out}")
    line = last_line(p.stderr)
    assert p.returncode == 2 and line.startswith(
        "error: every held-out prompt (1) is longer than 4092 tokens (model context 4096 - rollout.max_new_tokens 4);"
        f" the first: {held_out}, line 1 (example eval/1): "
    )
    assert line.endswith(f" {size}. Shorten the prompts, raise data.max_prompt_tokens, or lower rollout.max_new_tokens")
    # a skipped training prompt: the warning names its line
    skipped = next(ln for ln in p.stderr.splitlines() if ln.startswith("skipped 1 training prompts over 4092 tokens"))
    assert f"; first: {train}, line 6 (example train/6): " in skipped and skipped.endswith(f" {size})")
    # refused by switch: the line is named too
    p = grpokit(tmp_path, "--task", str(train), "--set", "data.on_long_prompt=error")
    line = last_line(p.stderr)
    assert p.returncode == 2 and line.startswith(f"error: {train}, line 6: ")  # a training or held-out example
    assert "example train/6: the prompt has " in line and f" {size}, over the limit of 4092" in line


@pytest.mark.slow
@pytest.mark.parametrize("answer", ["", "   "])
def test_an_empty_reference_answer_is_a_data_error_naming_file_and_line(answer: str, tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "d.jsonl", [*sums(3), {"prompt": "What is 0 + 0?", "answer": answer}, *sums(2)])
    p = grpokit(tmp_path, "--task", str(data), "--set", "rollout.prompts_per_step=6")
    assert p.returncode == 2
    assert last_line(p.stderr) == (
        f"error: {data}, line 4: field 'answer' is empty; the rewards check completions against the reference "
        "answer: give one or drop this record (or set data.answer_key=null if no reward needs a reference answer)"
    )
    assert "step 1/" not in p.stdout and "reward failure" not in p.stderr  # refused before training


@pytest.mark.slow
def test_a_two_million_digit_reference_answer_is_cut_in_the_rewards_error(tmp_path: Path) -> None:
    digits = "7" * 2_000_000
    data = write_jsonl(tmp_path / "d.jsonl", [*sums(3), {"prompt": "What is big?", "answer": digits}])
    p = grpokit(tmp_path, "--task", str(data), "--set", "rollout.prompts_per_step=4", "--set", "data.eval_size=1")
    assert p.returncode == 0, p.stderr[-3000:]
    failure = next(ln for ln in p.stderr.splitlines() if "reward failure" in ln)
    assert "math_verify: cannot parse the reference answer '" + "7" * 80 + "'... (2000000 characters) of " in failure
    assert f"{data}, line 4 (example d/4)" in failure
    assert len(p.stderr) < 20_000


def test_exact_numeric_names_the_line_and_cuts_the_answer() -> None:
    bad = Example(prompt="?", answer="x" * 5000, id="d/9", origin="d.jsonl, line 9")
    with pytest.raises(ValueError) as e:
        exact_numeric(["1"], [bad])
    assert str(e.value) == (
        "exact_numeric: the reference answer '" + "x" * 80 + "'... (5000 characters) of d.jsonl, line 9 (example d/9) "
        "is not a number; use the math_verify reward for symbolic answers"
    )
