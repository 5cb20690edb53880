"""What `grpokit doctor` prints (issue 39): a multi-turn detector is "not applicable" to a single-turn log, never
"too few steps to judge"; a folder of many runs starts with a summary table, one row per run, and each run's
diagnosis comes with `--details` (or `--run NAME`); unreadable input is one short line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from grpokit.monitor.doctor import diagnose, diagnose_all, render, summary_table

LOGS = Path(__file__).parents[1] / "fixtures" / "logs"
REAL = LOGS / "real"
MULTI_TURN_MODES = {
    "malformed tool calls",
    "failing tool calls",
    "episodes cut by limits",
    "context spent on tool output",
}
ENV = {**os.environ, "HF_HUB_OFFLINE": "1"}


def doctor(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "grpokit.cli", "doctor", *args], capture_output=True, text=True, env=ENV, timeout=300
    )


def short_trl_run(tmp_path: Path, steps: int) -> Path:
    """The real single-turn TRL run of tests/fixtures/logs/trl_healthy, cut after `steps` logged steps (a run that
    stopped early): shorter than every detector's window."""
    state = json.loads((LOGS / "trl_healthy" / "trainer_state.json").read_text(encoding="utf-8"))
    state["log_history"] = [r for r in state["log_history"] if r.get("step", 0) <= steps]
    (tmp_path / "trainer_state.json").write_text(json.dumps(state), encoding="utf-8")
    return tmp_path


def too_few(diag: dict) -> set[str]:
    return {f["mode"] for f in diag["findings"] if f["kind"] == "too_few_steps"}


def test_multi_turn_detectors_are_not_applicable_to_a_single_turn_log_not_short_of_steps(tmp_path: Path) -> None:
    diag = diagnose(short_trl_run(tmp_path, 3))
    assert diag["steps"] == 3
    assert not too_few(diag) & MULTI_TURN_MODES, too_few(diag)
    assert {"truncation", "advantage collapse"} <= too_few(diag)  # the single-turn modes are still too short to judge
    assert set(diag["not_applicable"]) == MULTI_TURN_MODES
    assert not set(diag["not_measurable"]) & {"malformed_tool_calls", "tool_failures"}
    text = render(diag)
    assert "not applicable (a single-turn log: no episode/* signal): " in text
    (line,) = [ln for ln in text.splitlines() if "too few steps to judge" in ln]  # one line, not one per detector
    assert "the log covers 3" in line and "truncation (5)" in line and "tool" not in line


def test_the_same_detectors_are_short_of_steps_on_a_short_multi_turn_log(tmp_path: Path) -> None:
    rows = [
        {
            "step": s,
            "reward/mean": 0.5,
            "episode/call_attempts": 8.0,
            "episode/parse_fail_rate": 0.0,
            "episode/tool_calls": 8.0,
            "episode/tool_error_rate": 0.0,
            "episode/tool_timeout_rate": 0.0,
            "episode/turn_limit_frac": 0.0,
            "episode/context_limit_frac": 0.0,
            "episode/length_limit_frac": 0.0,
            "episode/env_token_frac": 0.1,
        }
        for s in (1, 2, 3)
    ]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    diag = diagnose(tmp_path)
    assert diag["source"] == "grpokit" and diag["not_applicable"] == []
    assert MULTI_TURN_MODES <= too_few(diag)


def test_a_folder_of_runs_prints_a_summary_table_first_and_details_on_request() -> None:
    diags = diagnose_all(REAL)
    assert len(diags) >= 30
    out = doctor(str(REAL))
    assert out.returncode == 1, out.stderr  # some runs are failing
    lines = out.stdout.splitlines()
    assert lines[0] == f"{REAL}: {len(diags)} runs, each diagnosed on its own"
    header = next(i for i, ln in enumerate(lines) if ln.startswith("run "))
    table = lines[header + 1 : header + 1 + len(diags)]
    for d, row in zip(diags, table):
        assert row.startswith(d["run"] + " ") and f" {d['steps']}  " in row, row
        assert d["verdict"].split(";")[0] in row
        if d["alerts"]:
            assert f"{d['alerts'][0]['severity'].upper()} {d['alerts'][0]['mode']}" in row
    assert len(lines) < len(diags) + 10  # the table and a hint, not every diagnosis
    assert "what:" not in out.stdout and "--details" in lines[-1]
    assert out.stdout.rstrip().endswith("One run's diagnosis: --run NAME; every run's: --details")
    run = "skyrl_grpo_tau_bench_kl_blowup/output.log"
    kl = next(ln for ln in table if ln.startswith(run))
    assert "failing" in kl and "CRITICAL KL drift" in kl

    full = doctor(str(REAL), "--details")
    assert full.returncode == 1
    assert full.stdout.startswith(out.stdout.split("\n\nOne run's")[0])  # the same table first
    for d in diags:
        assert render(d) in full.stdout  # then every run's own diagnosis, as before
    one = doctor(str(REAL), "--run", run)
    assert one.stdout.strip() == render(next(d for d in diags if d["run"] == run))


def test_summary_table_escapes_run_names_from_the_log(tmp_path: Path) -> None:
    diag = diagnose(short_trl_run(tmp_path, 2))
    diag["run"] = "evil\x1b[2Jname"
    table = summary_table([diag, diag])
    assert "\x1b" not in table and "evil\\x1b[2Jname" in table
    assert len(table.splitlines()) == 3


def test_unreadable_input_is_one_short_line(tmp_path: Path) -> None:
    missing = doctor(str(tmp_path / "no_such_run"))
    assert missing.returncode == 2 and missing.stdout == ""
    assert missing.stderr == f"error: {tmp_path / 'no_such_run'}: no such file or directory\n"
    junk = tmp_path / "notes.txt"
    junk.write_text("nothing a trainer wrote\n", encoding="utf-8")
    bad = doctor(str(junk))
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1
    assert "not a supported training log" in bad.stderr and "docs/doctor.md" in bad.stderr
    assert len(bad.stderr) < len(str(junk)) + 480  # the path, and the formats it could have been (W&B, MLflow, ...)


def test_a_reader_that_stops_reading_gets_no_traceback() -> None:
    """`grpokit doctor runs/ --json | head -1`: the pipe closes early (the output is larger than a pipe's 64 KiB
    buffer, so the doctor is still writing); the doctor ends with its own exit status."""
    p = subprocess.Popen(
        [sys.executable, "-m", "grpokit.cli", "doctor", str(REAL), "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=ENV,
        text=True,
    )
    assert p.stdout is not None and p.stderr is not None
    assert p.stdout.readline() == "{\n"
    p.stdout.close()
    err = p.stderr.read()
    assert p.wait(timeout=300) == 1 and "Traceback" not in err and "BrokenPipe" not in err, err


def test_the_report_says_not_applicable_too(tmp_path: Path) -> None:
    from grpokit.monitor.report import make_report

    (tmp_path / "run").mkdir()
    html = make_report(short_trl_run(tmp_path / "run", 3), tmp_path / "report").read_text(encoding="utf-8")
    assert "Not applicable (a single-turn log: no episode/* signal): malformed tool calls" in html
    assert "too few steps to judge malformed tool calls" not in html
    assert "too few steps to judge truncation" in html
