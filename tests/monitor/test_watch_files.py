"""`grpokit watch` when its file is swapped under it (issue 46): a FIFO or `/dev/zero` at the path is one line naming
the file (exit 2), never a hang; a log replaced by a symlink is followed to its target, a deleted one waited for,
each said in one line; and a slow `--on-critical` command never blocks the watch, bounded and its outcome said."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from grpokit.monitor.tail import NotALogFile
from grpokit.monitor.watch import Watcher

ENV = {**os.environ, "HF_HUB_OFFLINE": "1"}


def rows(first: int, last: int, nan_at: int = -1) -> str:
    out = []
    for s in range(first, last + 1):
        data = {"actor/entropy": 1.1, "actor/grad_norm": "NaN" if s == nan_at else 0.5, "critic/score/mean": 0.4}
        out.append(json.dumps({"step": s, "data": data}) + "\n")
    return "".join(out)


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _dev_zero(path: Path) -> None:
    path.symlink_to("/dev/zero")


@pytest.mark.parametrize(("make", "kind"), [(_fifo, "a FIFO (named pipe)"), (_dev_zero, "a character device")])
def test_a_special_file_given_or_swapped_in_is_one_line_not_a_hang(tmp_path: Path, make, kind: str) -> None:
    given = tmp_path / "given.jsonl"
    make(given)
    cmd = [sys.executable, "-m", "grpokit.cli", "watch", str(given), "--interval", "0.1", "--idle-exit", "3"]
    p = subprocess.run(cmd, capture_output=True, text=True, env=ENV, timeout=60)
    assert p.returncode == 2 and p.stderr.count("\n") == 1, p.stderr
    assert f"{given} is {kind}, not a log file" in p.stderr

    log = tmp_path / "verl_run.jsonl"
    log.write_text(rows(1, 3))
    swap = tmp_path / "swap"
    make(swap)
    w = Watcher(log, out=io.StringIO())
    w.poll()
    os.replace(swap, log)  # rotated away, a FIFO or a link to /dev/zero put in its place
    with pytest.raises(NotALogFile, match=re.escape(f"{kind}, not a log file")):
        w.poll()


def test_the_cli_says_a_swap_to_a_fifo_in_one_line(tmp_path: Path) -> None:
    log = tmp_path / "verl_run.jsonl"
    log.write_text(rows(1, 3))
    cmd = [sys.executable, "-m", "grpokit.cli", "watch", str(log), "--interval", "0.1", "--idle-exit", "20"]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
    assert p.stdout is not None
    while "following new rows" not in p.stdout.readline():
        pass
    swap = tmp_path / "swap"
    os.mkfifo(swap)
    os.replace(swap, log)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 2 and err.count("\n") == 1 and "is a FIFO (named pipe), not a log file" in err


def test_a_log_replaced_by_a_symlink_is_followed_and_a_deleted_one_waited_for(tmp_path: Path) -> None:
    log = tmp_path / "verl_run.jsonl"
    log.write_text(rows(1, 5))
    out = io.StringIO()
    w = Watcher(log, out=out)
    w.poll(final=True)
    assert w.last_step == 5

    target = tmp_path / "rotated_in.jsonl"
    target.write_text(rows(1, 8, nan_at=7))  # the trainer's log now lives elsewhere; the name links to it
    tmp_link = tmp_path / "link"
    tmp_link.symlink_to(target)
    os.replace(tmp_link, log)
    w.poll(final=True)
    text = out.getvalue()
    assert "was truncated or replaced" in text and "reading the new file from its start (steps up to 5" in text
    assert w.last_step == 8 and "at step 7" in text  # only steps 6..8 are new

    log.unlink()
    w.poll()
    w.poll()
    assert out.getvalue().count("is gone (deleted or moved away); waiting for a file of that name") == 1
    log.write_text(rows(9, 10))
    w.poll(final=True)
    assert w.last_step == 10


def test_a_slow_on_critical_command_runs_beside_the_watch_bounded(tmp_path: Path) -> None:
    log = tmp_path / "verl_run.jsonl"
    log.write_text(rows(1, 3))
    out = io.StringIO()
    w = Watcher(log, out=out, on_critical="sleep 600", hook_timeout_s=1.0)
    w.poll(final=True)
    with log.open("a") as f:
        f.write(rows(4, 5, nan_at=4))
    w.poll(final=True)
    assert w.hook is not None and w.hook.outcome == "running" and w.hook.proc is not None
    proc = w.hook.proc
    with log.open("a") as f:
        f.write(rows(6, 8))
    assert w.poll(final=True) == 3 and w.last_step == 8  # the watch read on while the command runs
    assert proc.poll() is None
    w.close()  # waits what is left of the 1 s bound, then stops the command's group
    assert proc.poll() is not None and w.hook.outcome.startswith("stopped after")
    assert "--on-critical did not end within 1 s: stopped it" in out.getvalue()


def test_an_on_critical_command_that_ends_has_its_status_said(tmp_path: Path) -> None:
    log = tmp_path / "verl_run.jsonl"
    log.write_text(rows(1, 4, nan_at=2))
    out = io.StringIO()
    w = Watcher(log, out=out, on_critical="exit 3")
    w.poll(final=True)
    w.close()
    assert w.hook is not None and w.hook.outcome == "exit 3"
    assert "--on-critical ended with status 3 after" in out.getvalue()
