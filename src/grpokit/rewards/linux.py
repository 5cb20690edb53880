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
PR_SET_CHILD_SUBREAPER = 36
PR_CAPBSET_DROP = 24
CLONE_NEWNS = 0x00020000
CLONE_NEWPID = 0x20000000
MS_NOSUID, MS_NODEV, MS_REC, MS_PRIVATE = 2, 4, 1 << 14, 1 << 18


def libc() -> ctypes.CDLL:
    """The C library, with errno kept for `ctypes.get_errno()`."""
    return ctypes.CDLL(None, use_errno=True)


def last_error() -> str:
    """The text of the errno the last failed C call here left (e.g. "Operation not permitted")."""
    err = ctypes.get_errno()
    return os.strerror(err) if err else "refused"


def unshare(flags: int) -> bool:
    """unshare(2) with CLONE_* `flags`; whether it worked."""
    if not sys.platform.startswith("linux"):
        return False
    return libc().unshare(ctypes.c_int(flags)) == 0


def set_parent_death_signal() -> None:
    """Ask the kernel to SIGKILL this process when its parent (thread) dies (Linux; no-op elsewhere)."""
    if sys.platform.startswith("linux"):
        libc().prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def set_child_subreaper() -> bool:
    """Make this process the one its orphaned descendants are handed to (Linux); whether it worked."""
    if not sys.platform.startswith("linux"):
        return False
    return libc().prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0


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


# seccomp: deny socket(AF_UNIX, ...) (pathname sockets reach daemons outside any network namespace: a tmux or
# docker socket is a shell outside the sandbox), io_uring (it can create sockets without socket()), x32
# syscalls and foreign architectures. Everything else is allowed. Classic BPF over struct seccomp_data.
PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
_ARCH = {"x86_64": (0xC000003E, 41), "aarch64": (0xC00000B7, 198)}  # (AUDIT_ARCH_*, __NR_socket)
_NR_IO_URING_SETUP, _X32_BIT, _AF_UNIX, _EACCES = 425, 0x40000000, 1, 13
_LD_ABS, _JEQ, _JGE, _RET = 0x20, 0x15, 0x35, 0x06
_ALLOW, _ERRNO = 0x7FFF0000, 0x00050000


class _SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


def deny_unix_sockets() -> bool:
    """Install the seccomp filter above in this process and its future children; whether it worked."""
    machine = os.uname().machine if sys.platform.startswith("linux") else ""
    if machine not in _ARCH:
        return False
    arch, nr_socket = _ARCH[machine]
    program = [
        (_LD_ABS, 0, 0, 4),  # 0: arch
        (_JEQ, 0, 7, arch),  # 1: foreign architecture -> deny (9)
        (_LD_ABS, 0, 0, 0),  # 2: syscall number
        (_JGE, 5, 0, _X32_BIT),  # 3: x32 -> deny
        (_JEQ, 4, 0, _NR_IO_URING_SETUP),  # 4: io_uring_setup -> deny
        (_JEQ, 0, 2, nr_socket),  # 5: not socket() -> allow (8)
        (_LD_ABS, 0, 0, 16),  # 6: args[0] (low 32 bits): the address family
        (_JEQ, 1, 0, _AF_UNIX),  # 7: AF_UNIX -> deny
        (_RET, 0, 0, _ALLOW),  # 8
        (_RET, 0, 0, _ERRNO | _EACCES),  # 9
    ]
    return _install_filter(program)


def _install_filter(program: list[tuple[int, int, int, int]]) -> bool:
    """Install a classic-BPF seccomp program in this process and its future children; whether it worked."""
    filters = (_SockFilter * len(program))(*[_SockFilter(*ins) for ins in program])
    prog = _SockFprog(len(program), filters)
    c = libc()
    if c.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        return False
    return c.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) == 0


# the kernel's keyrings: a reward in the trainer's session could read what the trainer (or the user's login,
# through the user and user-session keyrings, which every process of the uid reaches) stored there (Kerberos
# tickets, cifs and ecryptfs keys, tokens put there by a credential helper)
_NR_KEYS = {"x86_64": (248, 249, 250), "aarch64": (217, 218, 219)}  # add_key, request_key, keyctl
KEYCTL_JOIN_SESSION_KEYRING = 1


def join_new_session_keyring() -> bool:
    """Leave the trainer's session keyring for a new, empty, anonymous one (keyctl(JOIN_SESSION_KEYRING, NULL));
    whether it worked."""
    if not sys.platform.startswith("linux"):
        return False
    c = libc()
    c.syscall.restype = ctypes.c_long
    machine = os.uname().machine
    if machine not in _NR_KEYS:
        return False
    return c.syscall(ctypes.c_long(_NR_KEYS[machine][2]), ctypes.c_long(KEYCTL_JOIN_SESSION_KEYRING), None) >= 0


def deny_keyrings() -> bool:
    """Refuse this process and its children add_key, request_key and keyctl with EACCES (seccomp): no key of the
    user's keyrings (session, user, user-session) can be read, linked or added. Whether it worked."""
    machine = os.uname().machine if sys.platform.startswith("linux") else ""
    if machine not in _ARCH:
        return False
    denied = _NR_KEYS[machine]
    program = [(_LD_ABS, 0, 0, 4), (_JEQ, 1, 0, _ARCH[machine][0]), (_RET, 0, 0, _ALLOW), (_LD_ABS, 0, 0, 0)]
    for i, nr in enumerate(denied):  # each: equal -> the EACCES return at the end
        program.append((_JEQ, len(denied) - i, 0, nr))
    program += [(_RET, 0, 0, _ALLOW), (_RET, 0, 0, _ERRNO | _EACCES)]
    return _install_filter(program)


_NR_UNSHARE = {"x86_64": 272, "aarch64": 97}
_NR_LANDLOCK = (444, 445, 446)  # create_ruleset, add_rule, restrict_self: the same on both


def deny_sandbox_features(unshare: bool = True, landlock: bool = True) -> bool:
    """Refuse this process and its children `unshare(2)` and/or the Landlock calls with EPERM, as a container's
    default seccomp profile or an older kernel does: to run the reward sandbox where the kernel offers less
    (tests/rewards/test_sandbox_degraded.py). Whether it worked."""
    machine = os.uname().machine if sys.platform.startswith("linux") else ""
    if machine not in _ARCH:
        return False
    denied = ([_NR_UNSHARE[machine]] if unshare else []) + (list(_NR_LANDLOCK) if landlock else [])
    program = [(_LD_ABS, 0, 0, 4), (_JEQ, 1, 0, _ARCH[machine][0]), (_RET, 0, 0, _ALLOW), (_LD_ABS, 0, 0, 0)]
    for i, nr in enumerate(denied):  # each: equal -> the EPERM return at the end
        program.append((_JEQ, len(denied) - i, 0, nr))
    program += [(_RET, 0, 0, _ALLOW), (_RET, 0, 0, _ERRNO | 1)]
    return _install_filter(program)
