"""What a reward, its libraries and the trainer's libraries print reaches the terminal escaped, cut and said once
(issue 45 item 1): the worker's stdout and stderr are a pipe of the trainer's (`rewards/launch.py`,
`common/foreign_output.py`), and every log record in the trainer passes `common/safe_logging.py`.

A library that logs a 2,000,000-character message carrying OSC 52 (clipboard write) five times used to put 8 MB and
4 raw OSC 52 sequences on the terminal of a 2-step `grpokit train`; math_verify's parser, when its timeout fires,
logs the whole text it gave up on (a 2,000,000-digit answer, once per batch).
"""

from __future__ import annotations

import io
import logging
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from grpokit.common import safe_logging
from grpokit.common.foreign_output import LINE_LIMIT, ForeignOutput

OSC52 = "\x1b]52;c;ZXZpbA==\x07"
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # any control character but \n and \t
TRAIN = [
    *("train", "--steps", "2", "--model", "tiny", "--set", "model.precision=fp32", "--set", "rollout.max_new_tokens=4"),
    *("--set", "rollout.group_size=2", "--set", "rollout.prompts_per_step=2", "--set", "train.eval_every=0"),
    *("--set", "train.save_every=0", "--set", "data.eval_size=2"),
]


def train(tmp_path: Path, reward: str, *args: str) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])
    cmd = [sys.executable, "-m", "grpokit.cli", *TRAIN, "--out", str(tmp_path / "runs"), *args]
    cmd += ["--set", f"reward.functions=[{reward}]"]
    return subprocess.run(cmd, capture_output=True, cwd=tmp_path, env=env, timeout=600, check=False)


def no_raw_control(out: bytes) -> str:
    text = out.decode("utf-8", "surrogateescape")
    hit = RAW.search(text)
    assert hit is None, f"raw {hit.group()!r}: {text[max(hit.start() - 80, 0) :][:200]!r}"
    return text


# ------------------------------------------------------------------------------- the stream, in process


def test_a_long_line_is_cut_as_it_is_read_escaped_and_said_once() -> None:
    said: list[str] = []
    out = ForeignOutput(said.append)
    line = ("Timeout during parsing: " + "7" * 2_000_000 + OSC52 + "\n").encode()
    for _ in range(5):
        for i in range(0, len(line), 65536):  # as the pipe delivers it
            out.feed(line[i : i + 65536])
        assert len(out._buf) == 0  # noqa: SLF001 (nothing of a finished line is held)
    out.feed(b"no newline at the end " + OSC52.encode())
    out.close()
    assert len(said) == 2
    assert said[0].startswith("Timeout during parsing: 7777") and len(said[0]) <= LINE_LIMIT + 64
    assert said[0].endswith(f"…[cut {2_000_000 + 24 + len(OSC52) - LINE_LIMIT:,} more characters or bytes]")
    assert said[1] == "no newline at the end \\x1b]52;c;ZXZpbA==\\x07"
    assert out.summary() == "4 repeat(s) of 1 line(s) already shown not shown"


def test_past_max_lines_the_rest_is_counted() -> None:
    said: list[str] = []
    out = ForeignOutput(said.append, max_lines=3)
    out.feed(b"".join(f"line {i}\n".encode() for i in range(10)) + b"line 0\n")
    assert said == ["line 0", "line 1", "line 2"]
    assert out.summary() == "1 repeat(s) of 1 line(s) already shown and 7 further line(s) past the first 3 not shown"


def test_a_library_handler_added_after_install_writes_escaped_cut_and_once() -> None:
    """A library with its own handler (as transformers and vLLM add when first imported): its records too."""
    records = safe_logging.install()
    stream = io.StringIO()
    lib = logging.getLogger("a_library_of_test_worker_output")
    lib.propagate = False
    lib.addHandler(logging.StreamHandler(stream))  # added after install(): guarded by the record factory
    try:
        for _ in range(3):
            lib.warning("Timeout during parsing: %s%s", "7" * 2_000_000, OSC52)
        try:
            raise ValueError("boom " + OSC52)
        except ValueError:
            lib.exception("failed")
    finally:
        lib.handlers.clear()
        safe_logging.uninstall()
    text = stream.getvalue()
    assert RAW.search(text) is None and len(text) < 2 * safe_logging.LIMIT + 200
    assert text.count("Timeout during parsing: 7777") == 1 and "[cut " in text
    assert "ValueError: boom \\x1b]52;c;ZXZpbA==\\x07" in text  # the traceback, escaped
    assert records.repeats[("a_library_of_test_worker_output", logging.WARNING, text.split("\n")[0])] == 2
    lib.propagate = True
    assert logging.getLogRecordFactory() is logging.LogRecord  # uninstalled: logging as it was


# ------------------------------------------------------------------------------ the real worker and CLI

CHATTY = textwrap.dedent(
    f"""
    import logging, sys
    OSC52 = {OSC52!r}
    log = logging.getLogger("chatty_library")  # a library's logger: logging's last resort writes it to stderr

    def reward(completions, examples):
        big = "x" * 2_000_000
        log.warning("2 MB of context " + OSC52 + big + OSC52)
        print("printed " + OSC52 + "\\x1b[2J" + big)
        sys.stderr.write("no newline " + OSC52 + big)
        sys.stderr.flush()
        return [float(len(c) % 2) for c in completions]
    """
)

SLOW_PARSE = textwrap.dedent(
    """
    import time
    import math_verify.parser
    from math_verify import parse

    _extract = math_verify.parser.extract_target_from_pred

    def slow(pred, *args, **kwargs):  # a parse made slow: math_verify's own 1 s timeout fires, every time
        if len(pred) > 1_000_000:
            time.sleep(1.5)
        return _extract(pred, *args, **kwargs)

    math_verify.parser.extract_target_from_pred = slow

    def reward(completions, examples):
        gold = parse(examples[0].answer, parsing_timeout=1)  # times out: math_verify logs the whole text
        return [float(bool(gold))] * len(completions)
    """
)


@pytest.mark.slow
def test_a_reward_library_logging_two_megabytes_and_escapes_reaches_the_terminal_cut_once(tmp_path: Path) -> None:
    (tmp_path / "chatty.py").write_text(CHATTY)
    p = train(tmp_path, "chatty:reward")
    err = no_raw_control(p.stderr)
    assert p.returncode == 0, err[-3000:]
    assert len(p.stderr) + len(p.stdout) < 30_000, f"{len(p.stderr):,} bytes on stderr"
    no_raw_control(p.stdout)
    shown = [ln for ln in err.splitlines() if "reward worker (pid" in ln and "printed:" in ln]
    shown = sorted(ln.split("printed: ", 1)[1] for ln in shown)
    esc = "\\x1b]52;c;ZXZpbA==\\x07"
    # each once, though the reward ran on both steps (and its batch and held-out calls)
    assert len(shown) == 3, shown
    assert shown[0].startswith(f"2 MB of context {esc}xxx")
    assert shown[1].startswith(f"no newline {esc}xxx")
    assert shown[2].startswith(f"printed {esc}\\x1b[2Jxxx")
    assert all("more characters or bytes]" in ln for ln in shown)


@pytest.mark.slow
def test_math_verify_timing_out_on_a_two_million_digit_answer_logs_it_cut_once(tmp_path: Path) -> None:
    """The timeout path forced: not the machine's load but a parse made slower than math_verify's timeout."""
    (tmp_path / "slow_parse.py").write_text(SLOW_PARSE)
    data = tmp_path / "d.jsonl"
    data.write_text(('{"prompt": "What is big?", "answer": "' + "7" * 2_000_000 + '"}\n') * 4)
    p = train(tmp_path, "slow_parse:reward", "--task", str(data), "--set", "data.eval_size=1")
    err = no_raw_control(p.stderr)
    assert p.returncode == 0, err[-3000:]
    timeouts = [ln for ln in err.splitlines() if "printed: Timeout during parsing: 7777" in ln]
    assert len(timeouts) == 1 and len(timeouts[0]) < LINE_LIMIT + 200, timeouts
    assert len(p.stderr) < 20_000
    assert "repeat(s) of 1 line(s) already shown not shown" in err  # the other timeouts, counted
