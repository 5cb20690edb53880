"""`grpokit eval` says what it is doing while it works (issue 39): progress lines on stderr, the result alone on
stdout; a phase still running says so every few seconds."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

from grpokit.cli.eval_progress import EvalProgress

ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(Path(__file__).parents[1])}


def test_eval_prints_its_phases_on_stderr_and_only_the_result_on_stdout(tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "grpokit.cli", "eval", "--model", "tiny", "--task", "add1", "--n", "3"]
    p = subprocess.run([*argv, "--samples", "2", "--json"], capture_output=True, text=True, env=ENV, timeout=300)
    assert p.returncode == 0, p.stderr
    res = json.loads(p.stdout)  # stdout is the JSON alone
    assert res["eval/n"] == 6.0 and 0.0 <= res["eval/accuracy"] <= 1.0
    lines = [ln for ln in p.stderr.splitlines() if ln.startswith("eval: ")]
    assert lines[0] == "eval: loading model tiny and task add1 ..."
    assert lines[1].startswith("eval: model ready in ") and lines[1].endswith(
        "; 3 held-out prompts, temperature 1.0, at most 48 new tokens"
    )
    assert lines[2] == "eval: sampling 3 prompts x 2 samples ..."
    assert lines[3].startswith("eval: sampling 3 prompts x 2 samples: done in ")
    assert lines[4] == "eval: scoring 6 completions ..."
    assert lines[5].startswith("eval: scoring 6 completions: done in ")


class Lines:
    """A text stream that keeps what is written and signals when a line containing `wanted` arrives."""

    def __init__(self, wanted: str) -> None:
        self.text, self.wanted, self.seen = "", wanted, threading.Event()

    def write(self, s: str) -> int:
        self.text += s
        if self.wanted in s:
            self.seen.set()
        return len(s)

    def flush(self) -> None:
        pass


def test_a_phase_still_running_says_so() -> None:
    out = Lines("so far")
    progress = EvalProgress(out=out, every=0.01)  # type: ignore[arg-type]
    with progress.phase("sampling 100 prompts x 5 samples"):
        assert out.seen.wait(30), out.text  # the phase is still running: a heartbeat line comes
    lines = out.text.splitlines()
    assert lines[0] == "eval: sampling 100 prompts x 5 samples ..."
    assert lines[1].startswith("eval: sampling 100 prompts x 5 samples: ") and lines[1].endswith("s so far")
    assert lines[-1].startswith("eval: sampling 100 prompts x 5 samples: done in ")
