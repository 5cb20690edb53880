"""bench/vs_trl.py: its command line and its table/ratio on figures it measured (no timing here)."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import vs_trl  # noqa: E402

# one measured step of each side, from `bench/vs_trl.py --steps 1 --rounds 1` on the 2-core Xeon
GRPOKIT_ROW = {"step": 25.40, "generate": 10.69, "score": 0.00, "forward": 4.33, "backward": 6.96, "tokens": 1536.0}
TRL_BF16_ROW = {"step": 58.76, "generate": 19.09, "score": 0.01, "fwd+bwd": 39.40, "optimizer": 0.27, "tokens": 1536.0}


def result(rows: list[dict[str, float]], precision: str, rss: float, rc: int = 0) -> dict:
    return {"rows": rows, "rss_mib": [rss], "setup_s": [3.5], "facts": {"precision": precision}, "rc": rc}


def test_help_parses_without_torch() -> None:
    out = subprocess.run([sys.executable, str(BENCH / "vs_trl.py"), "--help"], capture_output=True, text=True)
    assert out.returncode == 0
    assert "--variants" in out.stdout and "--rounds" in out.stdout
    # the orchestrating process never imports torch (it only holds the lock between workers)
    code = f"import sys; sys.path.insert(0, {str(BENCH)!r}); import vs_trl; print('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "False"


def test_variants_are_checked() -> None:
    assert vs_trl.parse_variant("grpokit:hf/bf16-autocast") == vs_trl.Variant("grpokit", "hf/bf16-autocast")
    assert vs_trl.parse_variant("trl:vllm-bf16").name == "trl:vllm-bf16"
    for bad in ("trl:bf16/fp32", "grpokit:sglang", "verl:hf", "grpokit:hf/fp8"):
        with pytest.raises(argparse.ArgumentTypeError, match="--variants"):
            vs_trl.parse_variant(bad)


def test_table_ratio_against_the_fastest_trl() -> None:
    g = {**GRPOKIT_ROW, "fwd+bwd": 11.29, "optimizer": 0.45, "rest": 2.97}
    slow_trl = {**TRL_BF16_ROW, "step": 61.0}
    results = {
        "grpokit:hf": result([g, {**g, "step": 23.0}], "fp32", 4974.0),
        "trl:bf16": result([TRL_BF16_ROW], "bf16", 6676.0),
        "trl:fp32": result([slow_trl], "fp32", 7000.0),
        "trl:vllm-bf16": result([], "bf16", 900.0, rc=1),
    }
    assert vs_trl.best_trl(results) == "trl:bf16"
    lines = vs_trl.table(results).splitlines()
    assert "speed-up vs trl:bf16" in lines[0]
    grpokit = lines[2].split(" | ")
    assert grpokit[2] == "24.20 (23.00-25.40)"  # median (min-max) s/step over both steps
    assert grpokit[-1] == f"{58.76 / 24.20:.2f}x |"  # TRL's best median over grpokit's median: 2.43x
    assert grpokit[-3] == "4974"  # peak RSS MiB
    assert "1.00x" in lines[3] and f"{58.76 / 61.0:.2f}x" in lines[4]
    assert "failed (exit 1)" in lines[5]
    assert vs_trl.summarize([TRL_BF16_ROW])["tokens_per_s"] == pytest.approx(1536 / 58.76)
