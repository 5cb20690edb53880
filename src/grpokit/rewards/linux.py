"""Linux kernel primitives for the reward sandbox, through ctypes: namespaces, mounts, capabilities, prctl.

Each returns whether it worked (False off Linux or where the kernel refuses) instead of raising, so the sandbox
can fall back and report what it could enforce.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

CLONE_NEWUSER, CLONE_NEWNET = 0x10000000, 0x40000000
PR_SET_PDEATHSIG = 1
PR_CAPBSET_DROP = 24
CLONE_NEWNS = 0x00020000
MS_NOSUID, MS_NODEV, MS_REC, MS_PRIVATE = 2, 4, 1 << 14, 1 << 18


def libc() -> ctypes.CDLL:
    """The C library, with errno kept for `ctypes.get_errno()`."""
    return ctypes.CDLL(None, use_errno=True)


def unshare(flags: int) -> bool:
    """unshare(2) with CLONE_* `flags`; whether it worked."""
    if not sys.platform.startswith("linux"):
        return False
    return libc().unshare(ctypes.c_int(flags)) == 0


def set_parent_death_signal() -> None:
    """Ask the kernel to SIGKILL this process when its parent (thread) dies (Linux; no-op elsewhere)."""
    if sys.platform.startswith("linux"):
        libc().prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def vm_size() -> int:
    """This process's virtual size in bytes (0 when /proc is unavailable)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def map_ids_in_userns(uid: int, gid: int) -> bool:
    """Inside a fresh user namespace: map our own uid/gid to themselves, so ids look the same as outside."""
    for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
        try:
            with open(f"/proc/self/{name}", "w") as f:
                f.write(text)
        except OSError:
            return False
    return True


def mount_private_tmpfs(path: str, size_mb: int) -> bool:
    """In our own mount namespace: stop mount propagation, then put a size-limited tmpfs on `path`."""
    c = libc()
    if c.mount(b"none", b"/", None, ctypes.c_ulong(MS_REC | MS_PRIVATE), None) != 0:
        return False
    opts = f"size={size_mb}m,mode=0700".encode()
    return c.mount(b"grpokit-reward", path.encode(), b"tmpfs", ctypes.c_ulong(MS_NOSUID | MS_NODEV), opts) == 0


CAPSET_V3 = 0x20080522


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def drop_capabilities() -> bool:
    """Empty the capability bounding set and the process's sets (root keeps uid 0 but loses its powers)."""
    c = libc()
    try:
        last = int(open("/proc/sys/kernel/cap_last_cap").read())
    except (OSError, ValueError):
        last = 40
    for cap in range(last + 1):
        c.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)
    data = (_CapData * 2)()
    return c.capset(ctypes.byref(_CapHeader(CAPSET_V3, 0)), data) == 0


def user_tasks(uid: int) -> int:
    """Tasks (threads included, as RLIMIT_NPROC counts them) currently owned by `uid`."""
    n = 0
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                st = os.stat(f"/proc/{pid}")
                n += len(os.listdir(f"/proc/{pid}/task")) if st.st_uid == uid else 0
            except OSError:
                pass
    return n
