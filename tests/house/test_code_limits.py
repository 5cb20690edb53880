"""The code stays within the house limits (issue 9, item 4): no function over 60 lines, no file over 400, as
`scripts/long_code.py` measures them. Fast: a subprocess that parses the sources, no torch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "long_code.py"


def _long_code(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, cwd=ROOT, timeout=60, check=False
    )


def test_no_function_over_60_lines_and_no_file_over_400_in_src():
    done = _long_code("src")
    assert done.stdout == "" and done.returncode == 0, f"over the limits:\n{done.stdout}{done.stderr}"


def test_the_check_lists_a_long_function_and_a_long_file(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(60))
    (tmp_path / "long.py").write_text(f"def too_long():\n{body}\n" + "\n" * 340)
    done = _long_code(str(tmp_path))
    assert done.returncode == 1
    lines = done.stdout.splitlines()
    assert len(lines) == 2
    assert lines[0].split()[:2] == ["function", "61"] and lines[0].endswith("too_long")
    assert lines[1].split()[:2] == ["file", "401"]
