"""Commands that only read, list or explain answer at once: they never import torch or transformers (about 2 s of
imports on a 2-core CPU). Their wall time is measured by bench/cli_startup.py; this test holds the cause."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

LOGS = Path(__file__).parents[1] / "fixtures" / "logs"
PROBE = """
import json, sys
from grpokit.cli import main
try:
    code = main(sys.argv[1:])
except SystemExit as e:  # --help and --version exit from argparse
    code = e.code
print(json.dumps({"code": code, "heavy": sorted(m for m in ("torch", "transformers", "vllm") if m in sys.modules)}),
      file=sys.stderr)
"""


def _heavy_imports(args: list[str]) -> tuple[int, list[str]]:
    out = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, timeout=120)
    last = json.loads(out.stderr.strip().splitlines()[-1])
    return last["code"], last["heavy"]


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["--version"],
        ["recipes"],
        ["train", "--help"],
        ["preflight", "--help"],
        ["audit-reward", "--help"],
        ["config", "--help"],
        ["watch", "--help"],
        ["doctor", str(LOGS / "trl_healthy")],
        ["doctor", "--json", str(LOGS / "verl_console.log")],
    ],
    ids=lambda a: " ".join(Path(x).name if "/" in x else x for x in a),
)
def test_light_commands_import_no_torch(args: list[str]) -> None:
    code, heavy = _heavy_imports(args)
    assert code in (0, None, 1), code  # doctor exits 1 when it finds a critical mode
    assert heavy == [], f"`grpokit {' '.join(args)}` imported {heavy}"


def test_report_and_compare_import_no_torch(tmp_path: Path) -> None:
    run = str(LOGS / "trl_healthy")
    code, heavy = _heavy_imports(["report", run, "--out", str(tmp_path / "report")])
    assert (code, heavy) == (0, [])
    cmp = ["compare", run, str(LOGS / "trl_constant_reward"), "--x", "steps", "--out", str(tmp_path / "cmp")]
    code, heavy = _heavy_imports(cmp)
    assert (code, heavy) == (0, [])


def test_training_commands_do_import_torch() -> None:
    """The probe can fail: `recipes show` binds the algorithm components, which are torch code."""
    code, heavy = _heavy_imports(["recipes", "show", "grpo"])
    assert code == 0 and "torch" in heavy
