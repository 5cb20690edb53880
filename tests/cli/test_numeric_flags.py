"""Every numeric flag is range-checked like `--set` (issue 46 item 5): a value out of range, infinity or NaN is one
line naming the flag, the value and the range, exit 2, before anything runs (these were OverflowError tracebacks,
a watch that never exits, an untrained final/, "max() arg is an empty sequence")."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from grpokit.cli.main import main

CASES = [
    (["watch", "PATH", "--interval", "1e308"], "--interval", "1e308", "at most 86400"),
    (["watch", "PATH", "--idle-exit", "nan"], "--idle-exit", "nan", "at most 86400"),
    (["audit-reward", "--reward", "exact_numeric", "--timeout", "inf"], "--timeout", "inf", "at most 86400"),
    (["audit-reward", "--reward", "exact_numeric", "--labeled", "L", "--threshold", "nan"], "--threshold", "nan", ""),
    (["train", "--eval-samples", "-1"], "--eval-samples", "-1", "1 or more"),
    (["train", "--eval-samples", "0"], "--eval-samples", "0", "1 or more"),
    (["train", "--steps", "0"], "--steps", "0", "1 or more"),
    (["preflight", "--prompts", "0"], "--prompts", "0", "1 or more"),
    (["eval", "--n", "0"], "--n", "0", "1 or more"),
    (["eval", "--temperature", "0"], "--temperature", "0", "> 0"),
    (["train", "--seed", "-3"], "--seed", "-3", "0 or more"),
]


@pytest.mark.parametrize(("argv", "flag", "value", "fix"), CASES, ids=[" ".join(c[0][-2:]) for c in CASES])
def test_numeric_flag_out_of_range_is_one_line(
    argv: list[str], flag: str, value: str, fix: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [str(tmp_path / "log.jsonl") if a == "PATH" else str(tmp_path / "l.jsonl") if a == "L" else a for a in argv]
    with pytest.raises(SystemExit) as stop:
        main([*argv, "--out", str(tmp_path / "runs")] if argv[0] in ("train", "preflight") else argv)
    assert stop.value.code == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(err) == 1, err
    assert f"argument {flag}" in err[0] and f"{value} is out of range" in err[0] and fix in err[0], err
    assert not (tmp_path / "runs").exists()


def test_a_read_only_run_directory_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    from grpokit.cli.exits import exit_line

    for code in (errno.EROFS, errno.EACCES):
        e = OSError(code, "Read-only file system" if code == errno.EROFS else "Permission denied", "/runs/r/x.json")
        assert exit_line(e) == 1
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "/runs/r/x.json" in err[0] and "--resume" in err[0], err
