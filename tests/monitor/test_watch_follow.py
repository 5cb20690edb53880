"""`grpokit watch` reads only what was appended to a log (issue 40): appends in chunks, a line split across two
appends included, give the rows and alerts of one read of the whole file (and the doctor's); a truncated or
replaced log is read again from its start; the bytes read are the appended ones (counted by `Tail.bytes_read`);
memory does not grow with the log's length; and a log that grows under a running `grpokit watch` raises its alert."""

from __future__ import annotations

import io
import json
import math
import os
import re
import subprocess
import sys
import textwrap
import threading
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import pytest

from grpokit.monitor.detectors import Monitor
from grpokit.monitor.follow import LineLog, WholeLog, open_log
from grpokit.monitor.readers import read_run
from grpokit.monitor.readers.canonical import NONFINITE_FLAGS
from grpokit.monitor.tail import CHECK, Tail
from grpokit.monitor.watch import Watcher

ENV = {**os.environ, "HF_HUB_OFFLINE": "1"}

VERL_CONFIG = (
    "(TaskRunner pid=7) {'actor_rollout_ref': {'actor': {'ppo_mini_batch_size': 32, 'ppo_epochs': 1, "
    "'clip_ratio_low': 0.2, 'clip_ratio_high': 0.28, 'entropy_coeff': 0}}, 'data': {'train_batch_size': 128}, "
    "'algorithm': {'adv_estimator': 'grpo'}}\n"
)


def _values(step: int, fail_at: int) -> tuple[float, float]:
    """(entropy, grad norm) of a step: healthy, then a NaN gradient at `fail_at` and entropy collapsing after."""
    entropy = 1.1 + 0.001 * (step % 13) if step < fail_at else 0.01
    grad = 0.5 + 0.01 * (step % 3)
    return entropy, (math.nan if step == fail_at else grad)


def verl_console_line(step: int, fail_at: int = 10**9) -> str:
    h, g = _values(step, fail_at)
    return (
        f"(TaskRunner pid=7) step:{step} - actor/entropy:{h:.4f} - actor/grad_norm:{g} - actor/pg_loss:-0.01 - "
        f"critic/score/mean:{0.3 + step / 1000:.4f} - response_length/mean:300.0 - actor/ppo_kl:0.001\n"
    )


def verl_console(n: int, fail_at: int = 10**9) -> str:
    lines = [VERL_CONFIG, "(TaskRunner pid=7) Ünïcode ▌ progress: not a metric line\n"]
    return "".join(lines + [verl_console_line(s, fail_at) for s in range(1, n + 1)])


def verl_jsonl(n: int, fail_at: int = 10**9) -> str:
    out = []
    for s in range(1, n + 1):
        h, g = _values(s, fail_at)
        data = {"actor/entropy": h, "actor/grad_norm": "NaN" if math.isnan(g) else g, "critic/score/mean": 0.4}
        out.append(json.dumps({"step": s, "data": {**data, "response_length/mean": 300.0, "actor/pg_loss": -0.01}}))
    return "\n".join(out) + "\n"


def trl_console(n: int, fail_at: int = 10**9) -> str:
    """transformers' printed output: progress-bar renders (carriage returns, a multi-byte bar) and the dicts."""
    out = ["***** Running training *****\n  Num examples = 640\n"]
    for s in range(1, n + 1):
        h, g = _values(s, fail_at)
        out.append(f"\r {100 * s // n:3d}%|▌         | {s}/{n} [00:0{s % 10}<00:30,  1.00s/it]")
        out.append(
            f"{{'loss': 0.01, 'grad_norm': {g}, 'learning_rate': 1e-06, 'reward': 0.4, 'reward_std': 0.3, "
            f"'frac_reward_zero_std': 0.1, 'kl': 0.001, 'entropy': {h:.4f}, 'completion_length': 300.0, "
            f"'epoch': {s / n:.2f}}}\n"
        )
    return "".join(out)


FORMATS: dict[str, tuple[str, Callable[..., str]]] = {
    "verl-console": ("train.log", verl_console),
    "verl-jsonl": ("metrics.jsonl", verl_jsonl),
    "trl-console": ("train.log", trl_console),
}


def _cuts(data: bytes) -> list[int]:
    """Byte offsets to split a log at: arbitrary places (most inside a line), one inside a multi-byte character
    when the log has one."""
    cuts = {len(data) * k // 9 + 3 for k in range(1, 9)}
    mb = data.find("▌".encode())
    if mb > 0:
        cuts.add(mb + 1)
    return sorted(cuts)


def _same(a: list[dict[str, float]], b: list[dict[str, float]]) -> bool:
    def key(rows: list[dict[str, float]]) -> list[dict[str, object]]:
        return [{k: ("nan" if isinstance(v, float) and math.isnan(v) else v) for k, v in r.items()} for r in rows]

    return key(a) == key(b)


def _watch_in_chunks(path: Path, data: bytes, cuts: list[int]) -> tuple[Watcher, str]:
    out = io.StringIO()
    w = Watcher(path, out=out)
    prev = 0
    for cut in [*cuts, len(data)]:
        with path.open("ab") as f:
            f.write(data[prev:cut])
        prev = cut
        w.poll()
    w.poll(final=True)
    return w, out.getvalue()


def _alerts(w: Watcher) -> list[dict[str, object]]:
    assert w.monitor is not None
    return [a.to_dict() for a in w.monitor.alerts]


def _untimed(text: str) -> str:
    return re.sub(r"^\[\d\d:\d\d:\d\d\] ", "", text, flags=re.M)


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_appends_in_chunks_give_the_rows_and_alerts_of_one_whole_read(tmp_path: Path, fmt: str) -> None:
    name, build = FORMATS[fmt]
    data = build(60, fail_at=40).encode()
    whole = tmp_path / "whole" / name
    whole.parent.mkdir()
    whole.write_bytes(data)
    chunked = tmp_path / "chunked" / name
    chunked.parent.mkdir()
    chunked.write_bytes(data[:1])  # the log exists (one byte of its first line) before the watch starts

    w_whole = Watcher(whole, out=io.StringIO())
    w_whole.poll(final=True)
    w_chunked, printed = _watch_in_chunks(chunked, data, [c for c in _cuts(data) if c > 1])

    assert isinstance(w_chunked.log, LineLog) and isinstance(w_whole.log, LineLog)
    assert w_chunked.last_step == w_whole.last_step == 60
    assert _alerts(w_chunked) == _alerts(w_whole)
    assert _untimed(printed) == _untimed(w_whole.out.getvalue())  # type: ignore[attr-defined]
    onsets = re.findall(r"^\[\S+\] \[\w+\] .+ at step \d+:", printed, flags=re.M)
    assert len(onsets) == len(_alerts(w_chunked))  # each alert's onset said once
    # and what the doctor's readers see in the whole file: the same rows' values, the same alerts
    doctor = read_run(whole)
    monitor = Monitor(doctor.context)
    for r in doctor.rows:
        monitor.observe(int(r["step"]), r)
    assert _alerts(w_chunked) == [a.to_dict() for a in monitor.alerts]
    assert any(a["severity"] == "critical" and a["step"] == 40 for a in _alerts(w_chunked))
    assert w_chunked.context == doctor.context


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_rows_of_chunked_appends_equal_the_readers_rows(tmp_path: Path, fmt: str) -> None:
    name, build = FORMATS[fmt]
    data = build(30, fail_at=20).encode()
    path = tmp_path / name
    path.write_bytes(data[:1])
    log = None
    rows: list[dict[str, float]] = []
    prev = 1
    for cut in [c for c in _cuts(data) if c > 1] + [len(data)]:
        with path.open("ab") as f:
            f.write(data[prev:cut])
        prev = cut
        if log is None:
            try:
                log = open_log(path)
            except ValueError:
                continue  # not yet a recognisable log (a part of its first line)
        rows += list(log.rows())
    assert log is not None
    rows += list(log.rows(final=True))
    doctor = read_run(path).rows
    assert [int(r["step"]) for r in rows] == list(range(1, 31))
    # every value the readers give is there, but for the 0 they give a non-finite flag before its first 1 (a live
    # row cannot know that a later one will set the flag; the numerical detector reads missing and 0 alike)
    flags = set(NONFINITE_FLAGS.values())
    early = [{k: v for k, v in d.items() if not (k in flags and k not in r and v == 0.0)} for r, d in zip(rows, doctor)]
    assert _same([{k: r[k] for k in d if k in r} for r, d in zip(rows, early, strict=True)], early)
    assert any(k in flags for k in doctor[-1])  # the flag the NaN gradient sets is there


def test_a_split_line_is_not_read_until_its_end_arrives(tmp_path: Path) -> None:
    path = tmp_path / "train.log"
    line = verl_console_line(5)
    path.write_text(verl_console(4) + line[:60])  # the writer is part-way through step 5's line
    log = open_log(path)
    assert [r["step"] for r in log.rows()] == [1, 2, 3]  # step 4 held: the file is still changing
    assert [r["step"] for r in log.rows()] == [4]  # quiet: step 4 goes out, and no half of step 5
    with path.open("a") as f:
        f.write(line[60:])
    assert list(log.rows()) == []  # step 5 is held: it may still grow
    (five,) = list(log.rows())  # quiet again: out it goes, whole
    assert five["step"] == 5 and five["train/grad_norm"] == 0.52 and five["length/mean"] == 300.0


def test_truncation_and_rotation_read_the_log_again_from_its_start(tmp_path: Path) -> None:
    path = tmp_path / "train.log"
    path.write_text(verl_console(10))
    log = open_log(path)
    assert isinstance(log, LineLog)
    assert [r["step"] for r in log.rows(final=True)] == list(range(1, 11))

    # truncated in place, then written on (a `copytruncate` rotation): a shorter file
    path.write_text(verl_console_line(11) + verl_console_line(12))
    assert [r["step"] for r in log.rows(final=True)] == [11, 12]
    assert log.tail.restarts == 1

    # moved away and a new file made in its place (another inode), longer than what was read
    path.rename(tmp_path / "train.log.1")
    path.write_text("".join(verl_console_line(s) for s in range(13, 40)))
    assert [r["step"] for r in log.rows(final=True)] == list(range(13, 40))
    assert log.tail.restarts == 2

    # rewritten in place from its start, longer than before: its first bytes changed
    with path.open("r+") as f:
        f.write(VERL_CONFIG + "".join(verl_console_line(s) for s in range(40, 80)))
    assert [r["step"] for r in log.rows(final=True)] == list(range(40, 80))
    assert log.tail.restarts == 3

    # a restart of the training into the same path: steps already seen are not fed again
    path.write_text(verl_console(90))
    assert [r["step"] for r in log.rows(final=True)] == list(range(80, 91))


def test_only_the_appended_bytes_are_read(tmp_path: Path) -> None:
    path = tmp_path / "train.log"
    path.write_text(verl_console(2000))
    w = Watcher(path, out=io.StringIO())
    w.poll()
    assert isinstance(w.log, LineLog)
    # a long log is followed from its end: the follower read only the 2 x CHECK bytes it compares (twice)
    start = w.log.tail.bytes_read
    assert start == 4 * CHECK
    w.poll()
    assert w.log.tail.bytes_read == start  # nothing new: nothing read
    assert w.last_step == 2000

    more = "".join(verl_console_line(s) for s in (2001, 2002)).encode()
    with path.open("ab") as f:
        f.write(more)
    w.poll()
    w.poll()
    assert w.log.tail.bytes_read == start + 2 * CHECK + len(more)  # the new bytes, and the 2 x CHECK compared
    assert w.last_step == 2002


def test_tail_hands_out_complete_lines_only_and_skips_an_endless_one(tmp_path: Path) -> None:
    path = tmp_path / "log"
    path.write_bytes(b"a\nb")
    t = Tail(path, block=4, max_line=16)
    assert list(t.blocks()) == ["a\n"]
    with path.open("ab") as f:
        f.write(b"c\r\n" + b"x" * 40 + b"\nd\n")  # a tqdm-style \r ends a line too; the 40-byte line is skipped
    assert "".join(t.blocks()).splitlines() == ["bc", "d"]
    assert t.skipped == 1 and t.bytes_read == path.stat().st_size + 3 + 3  # and "a\nb" compared twice


def test_memory_does_not_grow_with_the_logs_length(tmp_path: Path) -> None:
    def peak(n: int) -> int:
        path = tmp_path / f"train{n}.log"
        path.write_text(verl_console(n))
        log = open_log(path)  # its detection reads the first 4 MB, as the doctor's does
        assert isinstance(log, LineLog)
        log.tail.block = 64 << 10
        tracemalloc.start()
        try:
            monitor = Monitor(log.context)
            steps = 0
            for r in log.rows(final=True):
                monitor.observe(int(r["step"]), r)
                steps += 1
            assert steps == n
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    short, long = peak(2_000), peak(16_000)  # 0.3 MB and 2.6 MB of log
    assert long < 1.3 * short, (short, long)


def test_other_logs_are_still_read_whole(tmp_path: Path) -> None:
    state = {"log_history": [{"step": s, "loss": 0.1, "grad_norm": 0.5, "reward": 0.3} for s in (1, 2, 3)]}
    path = tmp_path / "trainer_state.json"
    path.write_text(json.dumps(state))
    log = open_log(path)
    assert isinstance(log, WholeLog)
    assert [r["step"] for r in log.rows(final=True)] == [1, 2, 3]


def test_a_second_training_in_a_followed_console_log_names_the_runs(tmp_path: Path) -> None:
    path = tmp_path / "train.log"
    path.write_text(verl_console(5))
    log = open_log(path)
    list(log.rows(final=True))
    with path.open("a") as f:
        f.write(verl_console_line(1))  # the step goes back: a new training in the same file, as the doctor reads it
    with pytest.raises(ValueError, match="holds 2 runs .*--run NAME"):
        list(log.rows())


# a verl run printing to its console log: a long healthy past, then rows every 0.1 s, a NaN gradient among them; it
# goes on only once the watcher's --on-critical command has run
WRITER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path

    log, go = Path(sys.argv[1]), Path(sys.argv[2])

    def line(step):
        g = "nan" if step == 3004 else "0.5"
        return (f"(TaskRunner pid=7) step:{step} - actor/entropy:1.1 - actor/grad_norm:{g} - actor/pg_loss:-0.01 - "
                "critic/score/mean:0.4 - response_length/mean:300.0 - actor/ppo_kl:0.001\\n")

    def write(text):
        with log.open("a") as f:
            f.write(text)
            f.flush()

    for step in range(3001, 3006):
        write(line(step)[:40])  # a line written in two parts, a poll apart
        time.sleep(0.4)
        write(line(step)[40:])
        time.sleep(0.1)
    deadline = time.time() + 120
    while not go.exists():
        if time.time() > deadline:
            sys.exit(3)
        time.sleep(0.1)
    for step in (3006, 3007):
        write(line(step))
    """
)


@pytest.mark.slow
def test_watch_raises_the_alert_of_a_log_growing_under_it(tmp_path: Path) -> None:
    log, go = tmp_path / "train.log", tmp_path / "go"
    log.write_text(verl_console(3000))
    watcher = subprocess.Popen(
        [sys.executable, "-m", "grpokit.cli", "watch", str(log), "--interval", "0.2", "--idle-exit", "3"]
        + ["--on-critical", f"touch {go}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
    )
    lines: list[str] = []
    caught_up, alerted = threading.Event(), threading.Event()

    def read() -> None:
        assert watcher.stdout is not None
        for line in watcher.stdout:
            lines.append(line)
            if "following new rows" in line:
                caught_up.set()
            if "CRITICAL" in line:
                alerted.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    writer = None
    try:
        assert caught_up.wait(120), "".join(lines)
        writer = subprocess.Popen([sys.executable, "-c", WRITER, str(log), str(go)], env=ENV)
        assert alerted.wait(120), "".join(lines)
        assert writer.wait(120) == 0  # it went on after --on-critical ran
        assert watcher.wait(120) == 1
    finally:
        for p in (writer, watcher):
            if p is not None and p.poll() is None:
                p.kill()
    reader.join(10)
    out = "".join(lines)
    # the past: a log this long is followed from its end, its newest row held back until the file was seen quiet
    assert "following from the log's end (step 2999)" in out and "read up to step 3000" in out
    assert re.search(r"\[CRITICAL\] numerical trouble at step 3004", out), out
    assert "running --on-critical" in out and "up to step 3007" in out
