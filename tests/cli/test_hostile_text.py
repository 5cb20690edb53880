"""No byte from a run reaches the terminal raw (issue 38, item 6): a hostile string carrying OSC 52 (clipboard
write), OSC 0 (window title), CSI 2J (clear screen), a one-byte C1 CSI and BEL is walked through every output path
that prints or stores text grpokit did not write, and none of those characters comes out raw; each comes out as a
visible escape (`\\x1b`), so the text is still there to read.

Paths: a reward's exception message (20 MB of it) and a completion -> the console, the failure records and the
error that ends a run; a run folder's name -> train, doctor, report, compare; a foreign (verl) log whose metric
names and folder name carry the string, and alert names in a run's alerts.jsonl -> doctor, watch, report, compare;
a notification's payload.
"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from grpokit.cli.console import Display
from grpokit.data import Example
from grpokit.monitor.notify import payload
from grpokit.rewards import RewardManager
from grpokit.rewards.result import MESSAGE_CHARS, failure_error

HOSTILE = "\x1b]52;c;ZXZpbA==\x07" + "\x1b]0;pwned\x07" + "\x1b[2J" + "\x9b" + "\x07"
SHOWN = "\\x1b]52;c;ZXZpbA==\\x07\\x1b]0;pwned\\x07\\x1b[2J\\x9b\\x07"  # how it must come out: visible escapes
# ESC, BEL and every other C0 but \n and \t, DEL, C1; surrogates stand for bytes that were not UTF-8 (a raw 0x9b)
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")
FOLDER = "run" + HOSTILE.replace("/", "_")  # a folder name may hold every one of them
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}

REWARD = textwrap.dedent(
    f"""
    HOSTILE = {HOSTILE!r}

    def hostile(completions, examples):
        '''Raises on every sample, with a 20 MB message carrying terminal sequences at both ends.'''
        raise ValueError("boom " + HOSTILE + "y" * 20_000_000 + HOSTILE)

    def batch_only(completions, examples):
        '''Raises on a whole batch only: the manager's warning quotes the message, no failure is recorded.'''
        if len(completions) > 1:
            raise ValueError("batch " + HOSTILE)
        return [0.5] * len(completions)
    """
)
TRAIN = [
    "--steps",
    "2",
    *("--set", "model.name=tiny", "--set", "rollout.prompts_per_step=2", "--set", "rollout.group_size=4"),
    *("--set", "rollout.max_new_tokens=6", "--set", "data.eval_size=4", "--set", "train.eval_every=0"),
    *("--set", "train.save_every=0", "--set", "reward.functions=[hostile_reward:hostile]"),
]


def clean(out: bytes | str, where: str) -> str:
    """`out` as text, asserting that no control character (but a line break or a tab) is in it."""
    text = out.decode("utf-8", "surrogateescape") if isinstance(out, bytes) else out
    hit = RAW.search(text)
    assert hit is None, f"{where}: raw {hit.group()!r} at {hit.start()}: {text[max(hit.start() - 80, 0) :][:200]!r}"
    return text


def grpokit(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
    """The real command line, its output as bytes (a raw 0x9b byte is not UTF-8 and would be lost as text)."""
    cmd = [sys.executable, "-m", "grpokit.cli", *args]
    return subprocess.run(cmd, capture_output=True, cwd=cwd, env=env or ENV, timeout=300, check=False)


def strings(value: Any) -> list[str]:
    """Every string in a JSON value, keys included."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (*strings(k), *strings(v))]
    if isinstance(value, list):
        return [s for v in value for s in strings(v)]
    return []


def verl_log(root: Path) -> Path:
    """A verl JSONL log in a folder with the hostile name, with hostile metric names and a critical alert."""
    folder = root / FOLDER
    folder.mkdir()
    rows = []
    for step in range(1, 9):
        data = {"actor/entropy": 1.2, "critic/score/mean": 0.4, "actor/pg_loss": -0.01, "response_length/mean": 40.0}
        data["actor/grad_norm"] = float("inf") if step == 4 else 0.8  # non-finite: a critical alert at step 4
        data[f"actor/{HOSTILE}"] = 0.5
        data[HOSTILE] = 1.0
        rows.append(json.dumps({"step": step, "data": data}))
    log = folder / "metrics.jsonl"
    log.write_text("\n".join(rows) + "\n")
    return log


# ------------------------------------------------------------------------------------- in-process paths


def test_a_reward_exception_and_a_completion_reach_the_record_and_the_console_escaped() -> None:
    def hostile(completions: list[str], examples: list[Any]) -> list[float]:
        if any(HOSTILE in c for c in completions):
            raise ValueError("boom " + HOSTILE + "y" * 20_000_000 + HOSTILE)
        return [1.0] * len(completions)

    with RewardManager([(hostile, 1.0)], isolation="inline", max_fail_frac=1.0) as m:
        result = m.score(["fine", "x" + HOSTILE + "\nsecond line"], [Example(prompt="q", answer="1")] * 2)
    (failure,) = result.failures
    assert SHOWN in clean(failure.message, "failure message") and len(failure.message) <= MESSAGE_CHARS
    assert re.search(r"…\[cut [\d,]+ characters\]…", failure.message)  # 20 MB kept as head and tail
    assert SHOWN in clean(failure.completion, "failure completion") and "\nsecond line" in failure.completion
    err = failure_error(["hostile"], result.failures, 2, 0.0)
    clean(str(err), "the error that ends the run")
    buf = io.StringIO()
    display = Display(3, console=Console(file=buf, force_terminal=False))
    display.message(f"reward failed: {failure.message} on {failure.completion}")
    display.message(str(err))
    display.close()
    assert SHOWN in clean(buf.getvalue(), "console")


def test_a_notification_payload_holds_no_control_character() -> None:
    alert = {
        "mode": HOSTILE,
        "detector": "d",
        "severity": "warning",
        "fired_at": 3,
        "message": f"{HOSTILE} rose",
        "fix": HOSTILE,
        "evidence": {HOSTILE: HOSTILE, "sample_episodes": [HOSTILE * 3]},
    }
    for event in ("onset", "escalated", "cleared"):
        body = payload(event, alert, f"runs/{FOLDER}")
        for s in strings(body):
            clean(s, f"{event} payload")
        assert SHOWN in body["text"] and body["content"] == body["text"]
        clean(json.dumps(body, ensure_ascii=False), "payload as sent")


# -------------------------------------------------------------------------------------- command lines


@pytest.mark.slow
def test_train_doctor_report_and_compare_of_a_hostile_run_and_log(tmp_path: Path) -> None:
    (tmp_path / "hostile_reward.py").write_text(REWARD)
    env = {**ENV, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    runs = tmp_path / "runs"

    # a reward that fails every sample: the run ends on the error, one bounded line quoting the message escaped
    done = grpokit("train", *TRAIN, "--out", str(runs), "--name", "ends", cwd=tmp_path, env=env)
    assert done.returncode != 0
    err = clean(done.stderr, "train stderr (failed run)")
    assert SHOWN in err and len(done.stderr) < 200_000, f"{len(done.stderr):,} bytes on stderr"

    # the same reward, its failures tolerated: the run (in a hostile folder) completes and records them
    tolerated = [*TRAIN, "--set", "reward.max_fail_frac=1.0"]
    tolerated[tolerated.index("reward.functions=[hostile_reward:hostile]")] = (
        "reward.functions=[hostile_reward:hostile, hostile_reward:batch_only]"
    )
    refused = grpokit("train", *tolerated, "--out", str(runs), "--name", FOLDER, cwd=tmp_path, env=env)
    assert refused.returncode == 2 and "is not a plain folder name" in clean(refused.stderr, "--name refused")
    done = grpokit("train", *tolerated, "--output-dir", str(runs / FOLDER), cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "\\x1b]0;pwned" in clean(done.stdout, "train stdout")  # the run directory's name, escaped
    assert SHOWN in clean(done.stderr, "train stderr") and len(done.stderr) < 200_000
    assert "but on no single sample" in done.stderr.decode()  # the manager's warning, through the logging filter
    run = runs / FOLDER
    records = [json.loads(x) for x in (run / "completions.jsonl").read_text().splitlines()]
    failures = [r["reward_failure"] for r in records if "reward_failure" in r]
    assert failures and all(len(f["message"]) <= MESSAGE_CHARS for f in failures)
    for f in failures:
        for s in strings(f):
            clean(s, "stored failure record")
    # a log carrying a hostile alert name and a hostile metric name, as a foreign or edited run directory can
    alert = {"mode": HOSTILE, "detector": HOSTILE, "severity": "warning", "step": 1, "message": HOSTILE, "fix": "x"}
    (run / "alerts.jsonl").write_text(json.dumps(alert) + "\n")
    with (run / "metrics.jsonl").open("a") as f:
        f.write(json.dumps({"step": 2, HOSTILE: 1.0}) + "\n")
    log = verl_log(tmp_path)

    for path in (run, log, log.parent):
        done = grpokit("doctor", str(path), cwd=tmp_path)
        assert done.returncode in (0, 1), done.stderr
        assert "\\x1b]0;pwned" in clean(done.stdout, f"doctor {path.name} stdout")
        clean(done.stderr, f"doctor {path.name} stderr")
        done = grpokit("doctor", "--json", str(path), cwd=tmp_path)
        clean(done.stdout, f"doctor --json {path.name}")

    for path in (run, log):
        done = grpokit("report", str(path), cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        clean(done.stdout, "report stdout")
        clean(done.stderr, "report stderr")
        page = path / "report" / "report.html" if path.is_dir() else path.parent / "report" / "report.html"
        assert SHOWN in clean(page.read_text(), f"report of {path.name}")

    done = grpokit("compare", str(run), str(log), "--x", "steps", "--out", str(tmp_path / "cmp"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    clean(done.stdout, "compare stdout")
    clean(done.stderr, "compare stderr")
    clean((tmp_path / "cmp" / "compare.html").read_text(), "compare page")

    watch = ["watch", str(log), "--interval", "0.2", "--idle-exit", "0.5"]
    done = grpokit(*watch, cwd=tmp_path)
    assert done.returncode == 1, done.stderr  # the critical alert was seen
    assert "\\x1b]0;pwned" in clean(done.stdout, "watch stdout") and "CRITICAL" in done.stdout.decode()
    clean(done.stderr, "watch stderr")
