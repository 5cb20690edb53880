"""`grpokit watch` on a verl-format log that another process is still appending: the alert is raised while the
writer runs (the writer waits for the `--on-critical` command before it writes on), the exit status says what it
saw, and bad input is one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ENV = {**os.environ, "HF_HUB_OFFLINE": "1"}

# verl's JSONL file logger: one {"step": N, "data": {...}} object per line, appended as training goes
WRITER = textwrap.dedent(
    """
    import json, math, sys, time
    from pathlib import Path

    log, go = Path(sys.argv[1]), Path(sys.argv[2])

    def row(step, grad_norm):
        data = {"actor/entropy": 1.2, "critic/score/mean": 0.4 + 0.01 * step, "actor/grad_norm": grad_norm,
                "actor/pg_loss": -0.01, "response_length/mean": 40.0}
        with log.open("a") as f:
            f.write(json.dumps({"step": step, "data": data}) + "\\n")
            f.flush()
        time.sleep(0.2)

    for step in (1, 2, 3):
        row(step, 0.8)
    row(4, math.inf)     # an infinite gradient norm: critical in any numerics
    row(5, 0.8)
    deadline = time.time() + 120
    while not go.exists():  # the run goes on only once the watcher's --on-critical command has run
        if time.time() > deadline:
            sys.exit(3)
        time.sleep(0.1)
    for step in (6, 7):
        row(step, 0.8)
    """
)


def test_watch_raises_the_alert_while_the_log_is_written_and_runs_on_critical(tmp_path: Path) -> None:
    log, go = tmp_path / "verl_run.jsonl", tmp_path / "go"
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(log), str(go)], env=ENV)
    watcher = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "grpokit.cli",
            "watch",
            str(log),
            "--interval",
            "0.2",
            "--idle-exit",
            "4",
            "--on-critical",
            f"touch {go}",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
    )
    lines: list[str] = []
    alerted = threading.Event()
    writer_alive_at_alert: list[bool] = []

    def read() -> None:
        assert watcher.stdout is not None
        for line in watcher.stdout:
            lines.append(line)
            if "CRITICAL" in line and not alerted.is_set():
                writer_alive_at_alert.append(writer.poll() is None)
                alerted.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert alerted.wait(90), "".join(lines) + (watcher.stderr.read() if watcher.poll() is not None else "")
        assert writer.wait(90) == 0  # it went on after --on-critical ran
        assert watcher.wait(90) == 1  # a critical alert was seen
    finally:
        for p in (writer, watcher):
            if p.poll() is None:
                p.kill()
    reader.join(10)
    out = "".join(lines)
    assert writer_alive_at_alert == [True], "the alert came while the log was still being written"
    assert "numerical" in out or "gradient" in out
    assert "running --on-critical" in out and go.exists()
    assert "up to step 7" in out  # every row was read, the held-back newest one included
    assert len([x for x in log.read_text().splitlines() if json.loads(x)]) == 7


def test_watch_of_an_unreadable_log_is_one_line_with_status_2(tmp_path: Path) -> None:
    bad = tmp_path / "notes.txt"
    bad.write_text("nothing here looks like a training log\n")
    p = subprocess.run(
        [sys.executable, "-m", "grpokit.cli", "watch", str(bad), "--interval", "0.1", "--idle-exit", "0.5"],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=120,
    )
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "not a supported training log" in p.stderr
