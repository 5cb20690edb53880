"""Nothing grpokit reads can block it or take its memory (issue 46 item 5): a FIFO or `/dev/zero` given as
`--config`, `--recipe`, `--labeled`, a data file, `run.json` or `outcome.json` is one line naming the file (or,
for a run's own files, read as absent), never a hang or gigabytes read; a file over its byte limit or a line
that grows without a newline is refused naming the limit; a 10^5-step TRL trainer_state.json is bounded."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from grpokit.cli.main import main
from grpokit.common import bounded_read
from grpokit.common.bounded_read import UnreadableInput, read_bytes

BOUND_S = 20  # every case answers in well under this; the code before the change blocked here forever


class Hung(Exception):
    pass


@pytest.fixture
def deadline() -> Iterator[Callable[..., Any]]:
    """Run a call with an alarm: a call that blocks (on a FIFO with no writer) raises Hung after BOUND_S."""

    def ring(signum: int, frame: Any) -> None:
        raise Hung(f"blocked for {BOUND_S} s")

    old = signal.signal(signal.SIGALRM, ring)

    def call(fn: Callable[..., Any], *args: Any) -> Any:
        signal.alarm(BOUND_S)
        try:
            return fn(*args)
        finally:
            signal.alarm(0)

    yield call
    signal.signal(signal.SIGALRM, old)


def fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def one_line(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert "Traceback" not in err, err
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.parametrize("special", ["fifo", "/dev/zero"])
def test_config_file_that_is_a_fifo_or_dev_zero_is_one_line(
    special: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], deadline: Callable[..., Any]
) -> None:
    src = str(fifo(tmp_path / "cfg.yaml")) if special == "fifo" else special
    t0 = time.monotonic()
    code = deadline(main, ["train", "--config", src, "--out", str(tmp_path / "runs")])
    err = one_line(capsys.readouterr().err)
    assert code == 2
    assert src in err and "not a regular file" in err
    assert ("FIFO" if special == "fifo" else "character device") in err
    assert time.monotonic() - t0 < 5
    assert not (tmp_path / "runs").exists()


def test_recipe_path_that_is_a_fifo_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], deadline: Callable[..., Any]
) -> None:
    src = str(fifo(tmp_path / "r.yaml"))
    code = deadline(main, ["train", "--recipe", src])
    err = one_line(capsys.readouterr().err)
    assert code == 2 and src in err and "FIFO" in err


def test_config_file_over_the_limit_names_the_limit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    big = tmp_path / "big.yaml"
    big.write_text("train:\n  steps: 1\n" + "# pad\n" * 400)
    monkeypatch.setattr("grpokit.config.recipes.CONFIG_LIMIT", 1024)
    code = main(["train", "--config", str(big)])
    err = one_line(capsys.readouterr().err)
    assert code == 2 and str(big) in err and "larger than 1024 bytes" in err


def test_labeled_file_that_is_a_fifo_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], deadline: Callable[..., Any]
) -> None:
    src = str(fifo(tmp_path / "labeled.jsonl"))
    code = deadline(main, ["audit-reward", "--reward", "exact_numeric", "--labeled", src])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert code == 2 and src in err and "FIFO" in err


@pytest.mark.parametrize("name", ["data.jsonl", "data.csv"])
def test_data_file_that_is_a_fifo_is_refused(name: str, tmp_path: Path, deadline: Callable[..., Any]) -> None:
    from grpokit.data.loaders import load_hf_dataset, load_jsonl

    src = fifo(tmp_path / name)
    with pytest.raises(UnreadableInput, match="FIFO"):
        deadline(load_jsonl if name.endswith(".jsonl") else load_hf_dataset, src)


def test_data_line_that_grows_without_a_newline_is_refused_at_the_line_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from grpokit.data.loaders import load_jsonl

    p = tmp_path / "data.jsonl"
    p.write_text('{"prompt": "1+1", "answer": "2"}\n' + '{"prompt": "' + "x" * 5000)
    monkeypatch.setattr(bounded_read, "LINE_LIMIT", 1000)
    with pytest.raises(UnreadableInput, match=r"data.jsonl: a line larger than 1000 bytes"):
        load_jsonl(p)


def _grpokit_run(run: Path) -> Path:
    run.mkdir()
    rows = [{"step": s, "reward/mean": 0.1 * s, "entropy/token_mean": 0.5, "length/mean": 10.0} for s in range(1, 6)]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (run / "config.yaml").write_text("recipe: grpo\nmodel: {precision: auto}\nalgo: {policy_loss: grpo}\n")
    return run


def test_run_json_and_outcome_json_that_are_fifos_are_read_as_absent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], deadline: Callable[..., Any]
) -> None:
    from grpokit.run.outcome import read_outcome

    run = _grpokit_run(tmp_path / "run")
    fifo(run / "run.json")
    fifo(run / "outcome.json")
    assert deadline(read_outcome, run) is None
    assert deadline(main, ["doctor", str(run)]) == 0
    assert "5 steps" in capsys.readouterr().out
    assert deadline(main, ["report", str(run), "--out", str(tmp_path / "rep")]) == 0
    assert (tmp_path / "rep" / "report.html").is_file()


def test_read_bytes_refuses_dev_zero_and_a_file_past_the_limit(tmp_path: Path) -> None:
    with pytest.raises(UnreadableInput, match="/dev/zero: a character device, not a regular file"):
        read_bytes("/dev/zero")
    p = tmp_path / "f.json"
    p.write_bytes(b"1" * 100)
    assert read_bytes(p, 100) == b"1" * 100
    with pytest.raises(UnreadableInput, match="larger than 99 bytes"):
        read_bytes(p, 99)


def test_trl_state_with_100000_steps_is_bounded(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from grpokit.monitor.readers.trl_state import MAX_STEPS

    n = 100_000
    hist = [{"step": s, "loss": 0.1, "reward": 0.5, "kl": 0.01, "entropy": 0.5} for s in range(1, n + 1)]
    state = tmp_path / "trainer_state.json"
    state.write_text(json.dumps({"log_history": hist, "global_step": n}))
    t0 = time.process_time()
    assert main(["doctor", str(state)]) == 0
    took = time.process_time() - t0
    out = capsys.readouterr().out
    assert f"{MAX_STEPS} steps, steps {n - MAX_STEPS + 1}..{n}" in out
    assert f"{n} logged steps; the last {MAX_STEPS}" in out
    assert took < 30, took  # the whole history replayed took ~45 s of CPU here; the last 20,000 about 5


def test_log_readers_refuse_a_fifo_swapped_in_after_discovery(tmp_path: Path, deadline: Callable[..., Any]) -> None:
    """The doctor's readers check `is_file()` when they find a log; a FIFO swapped in before the read is refused
    by the read itself, not waited on."""
    from grpokit.monitor.readers.console import read_text_file
    from grpokit.monitor.readers.console_text import read_text
    from grpokit.monitor.readers.jsonl import read_jsonl_objects

    f = fifo(tmp_path / "log.txt")
    for reader in (read_text, read_text_file, read_jsonl_objects):
        with pytest.raises(UnreadableInput, match="FIFO"):
            deadline(reader, f)
