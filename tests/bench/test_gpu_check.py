"""bench/gpu_check.py and bench/decode_table.py on this machine (no GPU): the offline GPU check's plumbing runs end
to end at tiny settings and prints one table that names the machine and the versions; no figure is asserted. The
smoke runs as the GPU box would: an interpreter with torch and transformers but no grpokit, offline."""

from __future__ import annotations

import argparse
import os
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


def test_the_most_specific_card_name_gives_the_peak() -> None:
    peak = {
        c: next(v for k, v in gpu_check.PEAK_BF16.items() if k in c)
        for c in ("NVIDIA H100 PCIe", "NVIDIA H100 80GB HBM3")
    }
    assert peak == {"NVIDIA H100 PCIe": 756e12, "NVIDIA H100 80GB HBM3": 989e12}


def test_no_model_and_no_tokenizer_is_a_skipped_row_for_each_part() -> None:
    args = argparse.Namespace(smoke=False, tokenizer=None)
    rows = {part: gpu_check.run_part(part, [], args, real=False) for part in gpu_check.PARTS}
    assert all(len(r) == 1 and r[0][1].startswith("skipped: no embedded model") for r in rows.values()), rows


def test_a_part_that_raises_is_a_failed_row() -> None:
    def broken() -> list[list[str]]:
        raise RuntimeError("CUDA error: out of memory\nlong trace")

    assert gpu_check.guarded("races", broken, None) == [["races", "failed: RuntimeError: long trace"]]
    assert gpu_check.guarded("model", broken, (False, "")) == (False, "failed: RuntimeError: long trace")


def bare_python(tmp_path: Path) -> Path:
    """A fresh venv that sees this venv's torch and transformers (a path line, whose own .pth files, grpokit's
    editable finder among them, are not read) and has no grpokit: the GPU box's interpreter."""
    import torch

    venv = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next((venv / "lib").glob("python*/site-packages"))
    (site / "torch_here.pth").write_text(str(Path(torch.__file__).resolve().parents[1]) + "\n")
    return venv / "bin" / "python"


@pytest.mark.slow
def test_smoke_run_without_grpokit_installed_prints_one_table(tmp_path: Path) -> None:
    python = bare_python(tmp_path)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"HF_HUB_OFFLINE": "1"}
    probe = subprocess.run([str(python), "-c", "import torch, transformers, grpokit"], env=env, capture_output=True)
    assert b"No module named 'grpokit'" in probe.stderr  # the interpreter is the box's: no grpokit
    out = tmp_path / "table.md"
    run = subprocess.run(
        [str(python), str(BENCH / "gpu_check.py"), "--smoke", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    table = out.read_text()
    assert all(line in run.stdout for line in table.splitlines())  # printed row by row as each part finished
    rows = {line.split(" | ")[0].strip("| "): line for line in table.splitlines()[2:]}
    assert {"machine", "wheels", "model", "race", "demo", "package gguf", "package triton"} <= set(rows), rows
    assert "failed" not in table, table
    for mode in ("eager", "static"):
        row = next(v for k, v in rows.items() if k.startswith(f"decode 135m {mode}"))
        assert "recompiles after warm-up " in row and "cudagraph skips 0" in row, row
    assert "torch " in table and "transformers " in table and ("TRL " in table)
    assert "same tokens 100%" in table  # the static decode drew the eager tokens
