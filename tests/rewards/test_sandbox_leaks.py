"""The third round of sandbox probes: what a reward could still read of the trainer's secrets, of other
processes and of the project folder, each tried by a real hostile reward (no mocks).

Every test here failed on the worker that was forked from the trainer (its `/proc/self/environ` and memory held
the trainer's environment, `/proc` listed every process, and the working directory was readable).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from grpokit.data import Example
from grpokit.rewards import RewardManager
from grpokit.rewards.sandbox import SandboxLimits

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the sandbox's kernel parts are Linux")

LIMITS = SandboxLimits(memory_mb=1024, max_procs=16, max_open_files=64)
EX = Example(prompt="q", answer="1")
SECRET_NAMES = ("HF_TOKEN", "WANDB_API_KEY", "AWS_SECRET_ACCESS_KEY", "OPENAI_API_KEY", "DATABASE_URL", "GH_PAT")
PREFIX_CHARS = 10  # a reward knows a canary's first characters and its hash, never the whole value


def _canaries(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    values = {name: f"cnry{uuid.uuid4().hex}" for name in SECRET_NAMES}
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    return values


def _hunter(canaries: dict[str, str]):
    """A reward that looks for the canaries through every path of the probes, knowing only each one's first
    characters and hash (so the value itself is never in the worker's memory unless it leaked there). It
    returns, per path, how many canaries it found."""
    wanted = {v[:PREFIX_CHARS].encode(): (len(v), hashlib.sha256(v.encode()).hexdigest()) for v in canaries.values()}

    def count(data: bytes) -> int:
        found = set()
        for prefix, (n, digest) in wanted.items():
            at = data.find(prefix)
            while at >= 0:
                if hashlib.sha256(data[at : at + n]).hexdigest() == digest:
                    found.add(prefix)
                    break
                at = data.find(prefix, at + 1)
        return len(found)

    def memory() -> bytes:
        chunks = []
        with open("/proc/self/maps") as maps, open("/proc/self/mem", "rb", buffering=0) as mem:
            for line in maps:
                span, perms = line.split()[:2]
                if not perms.startswith("r") or "[vvar" in line or "[vsyscall" in line:
                    continue
                lo, hi = (int(x, 16) for x in span.split("-"))
                try:
                    mem.seek(lo)
                    chunks.append(mem.read(hi - lo))
                except (OSError, OverflowError, ValueError):
                    continue
        return b"".join(chunks)

    def read(path: str) -> bytes:
        try:
            with open(path, "rb") as f:
                return f.read()
        except OSError:
            return b""

    def hunt(completions, examples):
        seen = {
            "os.environ": count("\n".join(f"{k}={v}" for k, v in os.environ.items()).encode()),
            "/proc/self/environ": count(read("/proc/self/environ")),
            "/proc/thread-self/environ": count(read("/proc/thread-self/environ")),
            "/proc/self/mem": count(memory()),
            "child's environment": count(subprocess.run(["env"], capture_output=True).stdout),
        }
        return [float(seen[c]) for c in completions]

    return hunt


PATHS = ["os.environ", "/proc/self/environ", "/proc/thread-self/environ", "/proc/self/mem", "child's environment"]


def test_no_secret_of_the_trainer_reaches_the_worker_by_any_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """Canary credentials in the trainer's environment are found by none of the probes' paths: the worker is
    a fresh interpreter whose environment is the allow-list alone, so neither the kernel's copy of its
    environment nor its memory holds them. (Checked too: the hunter finds them where they are.)"""
    canaries = _canaries(monkeypatch)
    hunt = _hunter(canaries)
    assert hunt(["os.environ"], [EX]) == [float(len(canaries))]  # the hunter works: in the trainer it finds all
    with RewardManager([(hunt, 1.0)], timeout_s=30, max_fail_frac=0.0, sandbox=LIMITS) as m:
        result = m.score(PATHS, [EX] * len(PATHS))
        report = m.sandbox["environment"]
    assert result.failures == []
    assert dict(zip(PATHS, result.rewards)) == dict.fromkeys(PATHS, 0.0)
    assert "fresh interpreter" in report


def test_without_a_sandbox_the_worker_keeps_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """sandbox=None (Python API only) is unconfined, as documented: the same hunter finds every canary there."""
    canaries = _canaries(monkeypatch)
    with RewardManager([(_hunter(canaries), 1.0)], timeout_s=30, max_fail_frac=0.0, sandbox=None) as m:
        result = m.score(["os.environ", "/proc/self/environ"], [EX] * 2)
    assert result.rewards == [float(len(canaries))] * 2


def _landlock_or_skip(m: RewardManager) -> None:
    if m.sandbox.get("filesystem") != "landlock":
        pytest.skip(f"no Landlock here: {m.sandbox.get('filesystem')}")


def test_no_other_process_is_visible(tmp_path: Path) -> None:
    """A sibling process's command line (an API key passed as an argument) cannot be read, and /proc cannot be
    listed; the reward's own /proc/self still reads."""
    key = f"sk-{uuid.uuid4().hex}"
    sibling = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", f"--api-key={key}"])
    try:

        def snoop(completions, examples):
            out = []
            for what in completions:
                try:
                    if what == "list":
                        found = [p for p in os.listdir("/proc") if p.isdigit()]
                        out.append(float(len(found)))
                    elif what == "self":
                        out.append(float(len(Path("/proc/self/status").read_bytes()) > 0))
                    else:
                        out.append(float(key.encode() in Path(f"/proc/{what}/cmdline").read_bytes()))
                except PermissionError:
                    out.append(-1.0)
            return out

        with RewardManager([(snoop, 1.0)], timeout_s=30, max_fail_frac=0.0, sandbox=LIMITS) as m:
            _landlock_or_skip(m)
            asks = [str(sibling.pid), str(os.getpid()), "1", "list", "self"]
            result = m.score(asks, [EX] * len(asks))
        assert Path(f"/proc/{sibling.pid}/cmdline").read_bytes().count(key.encode()) == 1  # it is there to read
        assert result.rewards == [-1.0, -1.0, -1.0, -1.0, 1.0]
    finally:
        sibling.kill()
        sibling.wait()


def test_the_working_directory_is_not_readable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A `.env` beside the reward's module in the folder the trainer started in is refused, whether the reward
    is a spec (`rewards.py:reward`) or a function given in Python; the module itself still imports and runs,
    and a sibling folder named in reward.sandbox_readable reads."""
    project = tmp_path / "project"
    (project / "data").mkdir(parents=True)
    env_file = project / ".env"
    env_file.write_text(f"OPENAI_API_KEY=sk-{uuid.uuid4().hex}\n")
    (project / "data" / "notes.txt").write_text("shared")
    (project / "rewards.py").write_text(
        "def reward(completions, examples):\n"
        "    out = []\n"
        "    for path in completions:\n"
        "        try:\n"
        "            open(path).read()\n"
        "            out.append(1.0)\n"
        "        except PermissionError:\n"
        "            out.append(0.0)\n"
        "    return out\n"
    )
    monkeypatch.chdir(project)
    monkeypatch.syspath_prepend(str(project))  # as `python train.py` run there puts its folder first
    asks = [str(env_file), str(project / "data" / "notes.txt")]
    for reward in ("rewards.py:reward", "rewards:reward"):
        with RewardManager([(reward, 1.0)], timeout_s=30, max_fail_frac=0.0, sandbox=LIMITS) as m:
            _landlock_or_skip(m)
            assert m.score(asks, [EX] * 2).rewards == [0.0, 0.0], reward
    import rewards  # a function given in Python, from a module in that folder

    with RewardManager([(rewards.reward, 1.0)], timeout_s=30, max_fail_frac=0.0, sandbox=LIMITS) as m:
        assert m.score(asks, [EX] * 2).rewards == [0.0, 0.0]
    granted = SandboxLimits(memory_mb=1024, readable=(str(project / "data"),))
    with RewardManager([("rewards.py:reward", 1.0)], timeout_s=30, max_fail_frac=0.0, sandbox=granted) as m:
        assert m.score(asks, [EX] * 2).rewards == [0.0, 1.0]
    sys.modules.pop("rewards", None)


def test_a_hard_link_inside_a_granted_folder_reads(tmp_path: Path) -> None:
    """Landlock is path-based, as docs/threat_model.md says: a hard link made (outside the sandbox) inside a
    granted folder to a file elsewhere reads through the link, and not by the file's own path."""
    secret = tmp_path / "secret.txt"
    secret.write_text("s3cret")
    data = tmp_path / "data"
    data.mkdir()
    os.link(secret, data / "link.txt")

    def read(completions, examples):
        out = []
        for path in completions:
            try:
                out.append(float(Path(path).read_text() == "s3cret"))
            except PermissionError:
                out.append(0.0)
        return out

    limits = SandboxLimits(memory_mb=1024, readable=(str(data),))
    with RewardManager([(read, 1.0)], timeout_s=30, max_fail_frac=0.0, sandbox=limits) as m:
        _landlock_or_skip(m)
        assert m.score([str(secret), str(data / "link.txt")], [EX] * 2).rewards == [0.0, 1.0]


def test_secrets_the_trainer_started_with_are_not_in_the_workers_proc_environ(tmp_path: Path) -> None:
    """As the probe ran it: the trainer is started with credentials in its environment (the kernel's copy,
    which `os.environ.clear()` in a forked child never scrubbed); a reward reads /proc/self/environ and
    /proc/thread-self/environ and finds none of them."""
    script = tmp_path / "trainer.py"
    script.write_text(
        "import os\n"
        "from grpokit.data import Example\n"
        "from grpokit.rewards import RewardManager\n"
        "from grpokit.rewards.sandbox import SandboxLimits\n"
        "def peek(completions, examples):\n"
        "    return [float(open(p, 'rb').read().count(b'cnry')) for p in completions]\n"
        "with RewardManager([(peek, 1.0)], sandbox=SandboxLimits(memory_mb=1024), max_fail_frac=0.0) as m:\n"
        "    paths = ['/proc/self/environ', '/proc/thread-self/environ']\n"
        "    print(m.score(paths, [Example('q', '1')] * 2).rewards)\n"
    )
    env = {**os.environ, **{name: f"cnry{uuid.uuid4().hex}" for name in SECRET_NAMES}}
    out = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "[0.0, 0.0]"
