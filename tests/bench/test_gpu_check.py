"""bench/gpu_check.py and bench/decode_table.py on this machine (no GPU): the offline GPU check's plumbing runs end
to end at tiny settings and prints one table that names the machine and the versions; no figure is asserted."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import gpu_check  # noqa: E402


def test_a_missing_package_without_wheels_is_one_line() -> None:
    paths, line = gpu_check.install(None, ("grpokit_no_such_package",))
    assert paths == [] and line.startswith("missing: grpokit_no_such_package") and "skipped" in line


def test_nothing_missing_installs_nothing(tmp_path: Path) -> None:
    assert gpu_check.install(tmp_path, ("json",)) == ([], "installed: nothing missing")


@pytest.mark.slow
def test_smoke_run_prints_one_table(tmp_path: Path) -> None:
    out = tmp_path / "table.md"
    run = subprocess.run(
        [sys.executable, str(BENCH / "gpu_check.py"), "--smoke", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    table = out.read_text()
    assert table.strip() in run.stdout
    rows = {line.split(" | ")[0].strip("| ") for line in table.splitlines()[2:]}
    assert {"machine", "wheels", "model", "race"} <= rows
    for mode in ("eager", "static"):
        assert any(r.startswith(f"decode 135m {mode}") for r in rows), rows
    assert "torch " in table and "transformers " in table and ("TRL " in table)
    assert "same tokens 100%" in table  # the static decode drew the eager tokens
