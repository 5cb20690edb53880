"""`grpokit watch` started on a long log (issue 47 item 3): the live detectors see a bounded seed of the old rows (a
head and a tail), the follower starts at the log's end, and every detector's verdicts on the old rows still come,
from the background pass, as the doctor's would be. Started before the trainer's first metric (an empty file, a
console with only its start-up lines), it waits for rows instead of exiting 2."""

from __future__ import annotations

import io
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from grpokit.monitor.detectors import Monitor
from grpokit.monitor.follow import LineLog
from grpokit.monitor.readers import read_run
from grpokit.monitor.tail import CHECK, tail_text
from grpokit.monitor.watch import Watcher

ENV = {**os.environ, "HF_HUB_OFFLINE": "1"}


def jsonl_row(step: int, grad: float = 0.0) -> str:
    data = {
        "actor/entropy": 1.1 + 0.001 * (step % 13),
        "actor/grad_norm": "NaN" if math.isnan(grad) else (grad or 0.5 + 0.01 * (step % 3)),
        "critic/score/mean": 0.4 + 0.001 * (step % 11),
        "response_length/mean": 300.0,
        "actor/pg_loss": -0.01,
    }
    return json.dumps({"step": step, "data": data}) + "\n"


def jsonl(first: int, last: int, nan_at: frozenset[int] = frozenset()) -> str:
    return "".join(jsonl_row(s, math.nan if s in nan_at else 0.0) for s in range(first, last + 1))


def _episodes(alerts: list[dict]) -> list[tuple[str, int, str, int | None]]:
    return [(a["mode"], a["step"], a["severity"], a["cleared_at"]) for a in alerts]


def test_a_long_log_seeds_the_live_detectors_with_a_bounded_head_and_tail_and_keeps_the_old_verdicts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "verl_run.jsonl"
    path.write_text(jsonl(1, 3000, nan_at=frozenset({100, 1500})))
    seen: list[int] = []
    observe = Monitor.observe

    def counted(self: Monitor, step: int, metrics: dict) -> list:
        seen.append(step)
        return observe(self, step, metrics)

    monkeypatch.setattr(Monitor, "observe", counted)
    out = io.StringIO()
    w = Watcher(path, out=out, seed=(20, 100))
    w.poll()
    # the live detectors ran on 120 old rows: the first 20 and the last 100, nothing of the 2880 between
    assert seen == [*range(1, 21), *range(2901, 3001)]
    assert isinstance(w.log, LineLog) and w.log.tail.bytes_read == 4 * CHECK  # the follower read no old row
    assert w.seeded == 119 and w.last_step == 3000  # the newest, held back by the seed, went out at this poll
    assert "at step 100" not in out.getvalue()  # the seed's own alerts are not printed: the backlog has them

    with path.open("a") as f:
        f.write(jsonl(3001, 3001, nan_at=frozenset({3001})) + jsonl(3002, 3002))
    w.poll()
    w.poll(final=True)
    assert seen[120:] == [3001, 3002]
    assert "at step 3001" in out.getvalue() and w.critical_seen

    w.close()  # waits for the backlog: every detector on every old row
    assert w.backlog is None
    monkeypatch.setattr(Monitor, "observe", observe)
    whole = Monitor(read_run(path).context)
    for r in read_run(path).rows:
        if r["step"] <= 3000:
            whole.observe(int(r["step"]), r)
    expected = _episodes([a.to_dict() for a in whole.alerts])
    assert [(m, s) for m, s, _, _ in expected][:2] == [(expected[0][0], 100), (expected[0][0], 1500)]
    assert _episodes(w.old_alerts) == expected  # the doctor's verdicts on the old rows, all of them
    text = out.getvalue()
    assert "before the watch began: [CRITICAL]" in text and "at step 100" in text and "at step 1500" in text
    assert w.alert_count() == len(expected) + 1


def test_a_log_shorter_than_the_seed_is_fed_whole_and_printed(tmp_path: Path) -> None:
    path = tmp_path / "verl_run.jsonl"
    path.write_text(jsonl(1, 60, nan_at=frozenset({30})))
    out = io.StringIO()
    w = Watcher(path, out=out, seed=(20, 100))
    w.poll(final=True)
    assert w.backlog is None and w.seeded == 0 and w.last_step == 60
    assert "at step 30" in out.getvalue() and w.critical_seen


def test_tail_text_reads_back_the_last_lines_only(tmp_path: Path) -> None:
    path = tmp_path / "log"
    path.write_bytes(b"".join(b"line %d\n" % i for i in range(1, 1001)))
    end = path.stat().st_size
    start, text = tail_text(path, end, 3)
    assert text == "line 998\nline 999\nline 1000\n" and start == end - len(text)
    assert tail_text(path, end, 1000) == (0, path.read_text())
    start, text = tail_text(path, end, 5000, max_bytes=100)  # bounded in bytes too: whole lines within the bound
    assert start > 0 and len(text) <= 100 and text.startswith("line ") and text.endswith("line 1000\n")


def test_an_empty_file_and_a_console_with_only_start_up_lines_are_waited_for(tmp_path: Path) -> None:
    empty = tmp_path / "verl_run.jsonl"
    empty.write_text("")
    out = io.StringIO()
    w = Watcher(empty, out=out)
    assert w.poll() == 0 and w.poll() == 0 and w.log is None
    assert out.getvalue().count("waiting for training metrics") == 1  # said once
    empty.write_text(jsonl(1, 3))
    assert w.poll(final=True) == 3 and w.last_step == 3

    console = tmp_path / "train.log"
    console.write_text("2026-01-01 12:00:00 INFO ray started\nLoading checkpoint shards: 100%|###| 2/2\n")
    w = Watcher(console, out=io.StringIO())
    assert w.poll() == 0 and w.log is None
    with console.open("a") as f:
        f.write("(TaskRunner pid=7) step:1 - actor/entropy:1.1 - actor/grad_norm:nan - critic/score/mean:0.4\n")
    assert w.poll(final=True) == 1 and w.critical_seen


def test_the_cli_waits_on_an_empty_file_and_alerts_once_rows_come(tmp_path: Path) -> None:
    log = tmp_path / "verl_run.jsonl"
    log.write_text("")
    cmd = [sys.executable, "-m", "grpokit.cli", "watch", str(log), "--interval", "0.1", "--idle-exit", "5"]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
    assert p.stdout is not None
    lines = [p.stdout.readline(), p.stdout.readline()]
    assert "waiting for training metrics" in lines[1], lines
    log.write_text(jsonl(1, 4, nan_at=frozenset({3})))
    out, err = p.communicate(timeout=60)
    assert p.returncode == 1, (out, err)  # a critical seen, not bad input
    assert "at step 3" in out and err == ""


def test_the_cli_gives_up_on_a_path_that_never_became_a_log(tmp_path: Path) -> None:
    log = tmp_path / "notes.txt"
    log.write_text("just some notes\n")
    cmd = [sys.executable, "-m", "grpokit.cli", "watch", str(log), "--interval", "0.1", "--idle-exit", "0.5"]
    p = subprocess.run(cmd, capture_output=True, text=True, env=ENV, timeout=60)
    assert p.returncode == 2
    assert p.stderr.count("\n") == 1 and "still no training metrics after 0.5 s" in p.stderr and "notes.txt" in p.stderr
