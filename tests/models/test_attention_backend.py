"""An attention backend this machine cannot run is one line naming the key, the value and the fix (was a
46-212-line traceback from inside transformers), from the model loader and on the command line."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from grpokit.models import ModelSpecError
from grpokit.models.attention import check_attn_implementation


def test_flash_attention_on_cpu_is_one_line() -> None:
    with pytest.raises(ModelSpecError) as e:
        check_attn_implementation("flash_attention_2", "cpu")
    msg = str(e.value)
    assert msg.startswith("model.attn_implementation='flash_attention_2' runs on CUDA GPUs only and the model is on")
    assert "--set model.attn_implementation=sdpa" in msg and "\n" not in msg


@pytest.mark.skipif(importlib.util.find_spec("flash_attn") is not None, reason="flash-attn is installed here")
def test_flash_attention_without_the_package_is_one_line() -> None:
    with pytest.raises(ModelSpecError, match=r"needs the flash-attn package \('flash_attn' is not installed\)"):
        check_attn_implementation("flash_attention_2", "cuda:0")


def test_backends_transformers_runs_everywhere_pass() -> None:
    for value in (None, "eager", "sdpa"):
        check_attn_implementation(value, "cpu")


def test_the_command_line_says_it_in_one_line(tmp_path: Path) -> None:
    """TRL's --attn_implementation flag and grpokit's key alike."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    cmd = [sys.executable, "-m", "grpokit.cli", "train", "--model", "tiny", "--steps", "1", "--out", str(tmp_path)]
    flags = (["--set", "model.attn_implementation=flash_attention_2"], ["--attn_implementation", "flash_attention_2"])
    for extra in flags:
        proc = subprocess.run([*cmd, *extra], capture_output=True, text=True, env=env, timeout=300)
        assert proc.returncode != 0 and "Traceback" not in proc.stderr
        (line,) = [ln for ln in proc.stderr.splitlines() if "attn_implementation='flash_attention_2'" in ln]
        assert "runs on CUDA GPUs only" in line and "model.attn_implementation=sdpa" in line
