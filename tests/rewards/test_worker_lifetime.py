"""A reward worker never outlives its trainer: `kill -9` of the trainer at any point of the worker's life (while it
boots, while it confines itself, idle, during a call) leaves no worker process behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="parent-death signals are Linux")

TRAINER = """
import sys, time
from grpokit.data import Example
from grpokit.rewards import RewardManager
from grpokit.rewards.sandbox import SandboxLimits

def nap(completions, examples):
    time.sleep(60)
    return [1.0] * len(completions)

print("ready", flush=True)
limits = None if sys.argv[1] == "none" else SandboxLimits(memory_mb=1024, env=("GRPOKIT_LIFETIME_TOKEN",))
m = RewardManager([(nap, 1.0)], timeout_s=120, sandbox=limits)
m.score(["x"], [Example("q", "1")])
"""


def _holding(token: str) -> list[int]:
    """Live processes (not zombies) whose environment holds `token`: the workers of one trainer."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes()
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if token.encode() in environ and state not in "ZX" and int(pid) != os.getpid():
            found.append(int(pid))
    return found


@pytest.mark.parametrize("sandbox", ["sandbox", "none"])
def test_killing_the_trainer_at_any_point_leaves_no_worker(tmp_path: Path, sandbox: str) -> None:
    script = tmp_path / "trainer.py"
    script.write_text(TRAINER)
    left: dict[float, list[int]] = {}
    for delay in (0.0, 0.03, 0.08, 0.15, 0.3, 1.5):  # booting, confining, loading, idle, in the call
        token = f"grpokit-lifetime-{uuid.uuid4().hex}"
        env = {**os.environ, "GRPOKIT_LIFETIME_TOKEN": token}
        trainer = subprocess.Popen([sys.executable, str(script), sandbox], env=env, stdout=subprocess.PIPE, text=True)
        assert trainer.stdout is not None and trainer.stdout.readline().strip() == "ready"
        time.sleep(delay)
        trainer.send_signal(signal.SIGKILL)
        trainer.wait()
        deadline = time.monotonic() + 5
        while _holding(token) and time.monotonic() < deadline:
            time.sleep(0.05)
        left[delay] = _holding(token)
        for pid in left[delay]:
            os.kill(pid, signal.SIGKILL)
    assert left == dict.fromkeys(left, [])
