"""The sandbox says what it is, and fails closed: run where the kernel offers less (user namespaces and/or
Landlock refused by a seccomp filter, as a container's default profile or an older kernel does; an ordinary user
without cgroups), the worker reports what is active and what is not with the reason, refuses user code where
only the Python audit hook would remain (unless `python_only` accepts it), and a training run prints the line
and records it in run.json."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from grpokit.rewards import landlock

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or os.uname().machine not in ("x86_64", "aarch64"),
    reason="seccomp filters here are written for Linux on x86_64 and aarch64",
)

PROBE = """
import json, sys
from grpokit.data import Example
from grpokit.rewards import RewardManager
from grpokit.rewards.sandbox import SandboxLimits

def reads(completions, examples):
    out = []
    for path in completions:
        try:
            open(path, "rb").read(1)
            out.append(1.0)
        except OSError:
            out.append(0.0)
    return out

limits = SandboxLimits(memory_mb=1024, python_only=sys.argv[1] == "python_only")
try:
    m = RewardManager([(reads, 1.0)], sandbox=limits, max_fail_frac=1.0)
except ValueError as e:
    print(json.dumps({"refused": str(e)}))
    raise SystemExit(0)
with m:
    paths = sys.argv[2:]
    print(json.dumps({"sandbox": m.sandbox, "read": m.score(paths, [Example("q", "1")] * len(paths)).rewards}))
"""

DENY = (
    "import os, sys\n"
    "from grpokit.rewards.linux import deny_sandbox_features\n"
    "assert deny_sandbox_features(unshare={unshare}, landlock={landlock})\n"
    "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])\n"
)


def _denied(unshare: bool, landlock: bool) -> list[str]:
    """The command prefix that runs a Python script with those kernel features refused."""
    return [sys.executable, "-c", DENY.format(unshare=unshare, landlock=landlock)]


def _probe(prefix: list[str], where: Path, mode: str, *paths: str, **kwargs) -> dict:
    """Run PROBE (from its own folder, which is on its sys.path and so readable) and read its report."""
    script = where / "probe" / "probe.py"
    script.parent.mkdir(exist_ok=True)
    script.parent.chmod(0o755)
    script.write_text(PROBE)
    out = subprocess.run([*prefix, str(script), mode, *paths], capture_output=True, text=True, timeout=120, **kwargs)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.fixture
def secret(tmp_path: Path) -> str:
    path = tmp_path / "home" / ".ssh" / "id_ed25519"
    path.parent.mkdir(parents=True)
    path.write_text("-----BEGIN OPENSSH PRIVATE KEY-----")
    return str(path)


def test_without_landlock_or_user_namespaces_user_code_is_refused_in_one_line(tmp_path: Path, secret: str) -> None:
    got = _probe(_denied(unshare=True, landlock=True), tmp_path, "default", secret)
    message = got["refused"]
    assert "\n" not in message and "Landlock" in message and "reward.sandbox_python_only=true" in message
    assert "user namespaces" in message  # the reason each protection is missing
    # accepted by name: it runs, and says which protections are missing and why
    ran = _probe(_denied(unshare=True, landlock=True), tmp_path, "python_only", secret)
    report = ran["sandbox"]
    assert report["filesystem"] == "audit hook (Python code only)" and report["reading"].startswith("audit hook")
    assert "Landlock (" in report["unavailable"] and "user namespaces (" in report["unavailable"]
    assert report["directory"] == "private directory on disk (no size limit)"
    assert ran["read"] == [0.0]  # Python-level reads are still refused by the hook


def test_without_landlock_alone_user_code_is_refused(tmp_path: Path) -> None:
    got = _probe(_denied(unshare=False, landlock=True), tmp_path, "default")
    assert "only a Python audit hook would remain" in got["refused"]


def test_without_user_namespaces_landlock_still_confines_and_the_report_says_what_is_missing(
    tmp_path: Path, secret: str
) -> None:
    if landlock.abi_version() < 1:
        pytest.skip("no Landlock on this kernel")
    ran = _probe(_denied(unshare=True, landlock=False), tmp_path, "default", secret, sys.executable)
    report = ran["sandbox"]
    assert report["filesystem"] == "landlock" and ran["read"] == [0.0, 1.0]
    assert "user namespaces (Operation not permitted" in report["unavailable"]
    assert "process tree" not in report and report["directory"] == "private directory on disk (no size limit)"


def _reachable_by_others(path: Path) -> bool:
    """Whether every folder above `path` lets other users through (o+x)."""
    return all(p.stat().st_mode & 0o001 for p in path.resolve().parents)


def test_as_an_ordinary_user_rlimits_stand_in_for_the_memory_cgroup() -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to start the probe as another user")
    if landlock.abi_version() < 1:
        pytest.skip("no Landlock on this kernel")
    shared = Path(tempfile.mkdtemp(prefix="grpokit-as-nobody-", dir="/tmp"))
    shared.chmod(0o755)
    for needed in (Path(sys.executable), shared, Path(landlock.__file__)):
        if not _reachable_by_others(needed):
            pytest.skip(f"{needed} is not reachable by other users on this machine (a folder above it is private)")
    try:
        ran = _probe([sys.executable], shared, "default", user=65534, group=65534, env={**os.environ, "HOME": "/"})
    finally:
        shutil.rmtree(shared, ignore_errors=True)
    report = ran["sandbox"]
    assert report["memory"].startswith("RLIMIT_AS 1024 MiB per process (no memory cgroup")
    assert "memory cgroup (not root)" in report["unavailable"]
    assert report["processes"].startswith("RLIMIT_NPROC") and report["filesystem"] == "landlock"


def test_a_training_run_prints_its_sandbox_line_and_records_it(tmp_path: Path) -> None:
    (tmp_path / "my_reward.py").write_text("def reward(completions, examples):\n    return [0.5] * len(completions)\n")
    args = ["--model", "tiny", "--set", "model.precision=fp32", "--set", "rollout.prompts_per_step=2"]
    args += ["--set", "rollout.group_size=2", "--set", "rollout.max_new_tokens=4", "--set", "data.eval_size=2"]
    out = subprocess.run(
        [sys.executable, "-m", "grpokit.cli", "train", "--steps", "1", "--out", str(tmp_path), "--name", "r", *args,
         "--set", "reward.functions=[my_reward.py:reward]", "--set", "train.save_every=0"],
        capture_output=True, text=True, timeout=600, cwd=tmp_path,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    [line] = [ln for ln in (out.stdout + out.stderr).splitlines() if ln.startswith("reward sandbox: ")]
    assert "files landlock" in line or "files audit hook" in line
    assert "unavailable: " in line and "environment allow-list" in line
    recorded = json.loads((tmp_path / "r" / "run.json").read_text())["sandbox"]
    assert recorded["line"] == line and recorded["filesystem"] in ("landlock", "audit hook (Python code only)")
    # without Landlock and user namespaces the same run stops before training, in one line naming the switch
    refused = subprocess.run(
        [*_denied(True, True), "-m", "grpokit.cli", "train", "--steps", "1", "--out", str(tmp_path), "--name", "s",
         *args, "--set", "reward.functions=[my_reward.py:reward]"],
        capture_output=True, text=True, timeout=600, cwd=tmp_path,
    )  # fmt: skip
    assert refused.returncode != 0 and "Traceback" not in refused.stderr
    errors = [ln for ln in refused.stderr.splitlines() if "reward.sandbox_python_only=true" in ln]
    assert len(errors) == 1, refused.stderr[-3000:]
