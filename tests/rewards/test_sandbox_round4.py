"""The fourth round of sandbox probes (issue 46 item 2): the worker starts with nothing of the trainer's. Each is
tried by a real hostile reward in a real sandboxed worker (no mocks), and each failed on the worker before it:
the trainer's session keyring, every file of /dev/shm, and the folder of a module lying in /tmp were readable."""

from __future__ import annotations

import ctypes
import os
import sys
import tempfile
import uuid
from pathlib import Path

import pytest

from grpokit.data import Example
from grpokit.rewards import RewardManager
from grpokit.rewards.sandbox import SandboxLimits

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the sandbox's kernel parts are Linux")

LIMITS = SandboxLimits(memory_mb=1024, max_procs=16, max_open_files=64)
EX = Example(prompt="q", answer="1")
NR_KEYS = {"x86_64": (248, 250), "aarch64": (217, 219)}  # add_key, keyctl
KEY_SPEC_SESSION_KEYRING = -3
KEYCTL_REVOKE = 3


def _syscall():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc.syscall


def read_keys(completions, examples):
    """A reward that looks a key up by its description in the session, user and user-session keyrings and reads
    it: 1.0 where it got the payload, 0.0 where the kernel refused (its description is the completion)."""
    import ctypes
    import os

    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    keyctl = {"x86_64": 250, "aarch64": 219}[os.uname().machine]
    out = []
    for text in completions:
        description, payload = text.split("|")
        got = 0.0
        for keyring in (-3, -4, -5):  # session, user, user-session
            key = libc.syscall(keyctl, 10, keyring, b"user", description.encode(), 0)  # KEYCTL_SEARCH
            if key < 0:
                continue
            buf = ctypes.create_string_buffer(256)
            n = libc.syscall(keyctl, 11, ctypes.c_long(key), buf, 256)  # KEYCTL_READ
            if n > 0 and buf.raw[:n] == payload.encode():
                got = 1.0
        out.append(got)
    return out


def test_the_trainers_session_keyring_is_out_of_reach() -> None:
    """A secret the trainer's session stored in its keyring (as a credential helper or a Kerberos login does) is
    found and read by the same reward here, and not in the worker, whose report says why."""
    machine = os.uname().machine
    if machine not in NR_KEYS:
        pytest.skip(f"no syscall numbers for {machine}")
    add_key, keyctl = NR_KEYS[machine]
    description, payload = f"grpokit-test-{uuid.uuid4().hex}", f"s3cret-{uuid.uuid4().hex[:8]}"
    syscall = _syscall()
    key = syscall(add_key, b"user", description.encode(), payload.encode(), len(payload), KEY_SPEC_SESSION_KEYRING)
    if key < 0:
        pytest.skip(f"the kernel keeps no keys here: {os.strerror(ctypes.get_errno())}")
    try:
        asks = [f"{description}|{payload}"]
        assert read_keys(asks, [EX]) == [1.0]  # the reward finds it where it is readable
        with RewardManager([(read_keys, 1.0)], timeout_s=30, max_fail_frac=0.0, sandbox=LIMITS) as m:
            result = m.score(asks, [EX])
            report = m.sandbox
        assert result.failures == [] and result.rewards == [0.0]
        assert report["keyrings"].startswith("seccomp: keyctl, add_key and request_key denied")
    finally:
        syscall(keyctl, KEYCTL_REVOKE, ctypes.c_long(key))


def _reads(completions, examples):
    out = []
    for path in completions:
        try:
            with open(path, "rb") as f:
                out.append(float(len(f.read()) > 0))
        except PermissionError:
            out.append(0.0)
    return out


def _landlock_or_skip(m: RewardManager) -> None:
    if m.sandbox.get("filesystem") != "landlock":
        pytest.skip(f"no Landlock here: {m.sandbox.get('filesystem')}")


def test_another_processes_shared_memory_is_not_readable() -> None:
    """A mode-600 file of the trainer's uid in /dev/shm (another process's shared memory) is refused; a file
    in /dev/shm of a folder the trainer names in `writable` still reads."""
    if not os.path.isdir("/dev/shm"):
        pytest.skip("no /dev/shm here")
    theirs = Path("/dev/shm") / f"grpokit-test-{uuid.uuid4().hex}"
    theirs.write_bytes(b"their shared memory")
    theirs.chmod(0o600)
    mine = Path(tempfile.mkdtemp(prefix="grpokit-test-", dir="/dev/shm"))
    (mine / "lock").write_bytes(b"mine")
    try:
        assert _reads([str(theirs)], [EX]) == [1.0]
        limits = SandboxLimits(memory_mb=1024, writable=(str(mine),))
        with RewardManager([(_reads, 1.0)], timeout_s=30, max_fail_frac=0.0, sandbox=limits) as m:
            _landlock_or_skip(m)
            assert m.score([str(theirs), str(mine / "lock")], [EX] * 2).rewards == [0.0, 1.0]
    finally:
        theirs.unlink()
        (mine / "lock").unlink()
        mine.rmdir()


READER = (
    "def reward(completions, examples):\n"
    "    out = []\n"
    "    for path in completions:\n"
    "        try:\n"
    "            out.append(float(len(open(path, 'rb').read()) > 0))\n"
    "        except PermissionError:\n"
    "            out.append(0.0)\n"
    "    return out\n"
)


def test_a_module_lying_in_tmp_grants_its_file_and_not_the_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With TMPDIR set elsewhere, a reward module placed directly in /tmp imports and runs, and the credential
    cache beside it (`/tmp/krb5cc_*`) is refused: the module's file is granted, not its folder."""
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)
    tag = uuid.uuid4().hex[:12]
    module = Path("/tmp") / f"grpokit_test_reward_{tag}.py"
    credential = Path("/tmp") / f"krb5cc_grpokit_test_{tag}"
    module.write_text(READER)
    credential.write_bytes(b"a kerberos ticket")
    credential.chmod(0o600)
    try:
        with RewardManager([(f"{module}:reward", 1.0)], timeout_s=30, max_fail_frac=0.0, sandbox=LIMITS) as m:
            _landlock_or_skip(m)
            result = m.score([str(credential), str(module)], [EX] * 2)
        assert result.failures == [] and result.rewards == [0.0, 1.0]
    finally:
        module.unlink()
        credential.unlink()
