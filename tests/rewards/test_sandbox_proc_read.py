"""A sandboxed reward that reads another process's /proc entry (the trainer's command line) fails as a sandbox
refusal that names the layer, not a bare "permission denied"."""

from __future__ import annotations

import os
import sys

import pytest
from toy_rewards import reads_other_cmdline

from grpokit.data import Example
from grpokit.rewards import RewardManager
from grpokit.rewards.landlock import abi_version
from grpokit.rewards.sandbox import SandboxLimits

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or abi_version() < 1, reason="Landlock is what refuses another /proc entry"
)


def test_reading_the_trainers_command_line_is_a_named_sandbox_refusal() -> None:
    limits = SandboxLimits(memory_mb=512, max_procs=16, max_open_files=32, max_file_mb=8)
    with RewardManager([(reads_other_cmdline, 1.0)], max_fail_frac=1.0, sandbox=limits) as m:
        result = m.score(["x"], [Example(prompt="q", answer=str(os.getpid()))])
    [failure] = result.failures
    assert failure.kind == "sandbox", failure
    assert "refused by the sandbox's Landlock layer" in failure.message and f"/proc/{os.getpid()}" in failure.message
