"""Linux Landlock (unprivileged, irreversible) through ctypes: deny writes outside given paths and TCP/signals.

Landlock (kernel 5.13+) lets any process restrict itself and its future children; the restriction can only be
tightened, never lifted. `restrict(writable, ...)` handles the *write-like* filesystem rights (write, truncate,
create, remove, rename-into) so they are allowed only beneath `writable`; given `readable`, reading, listing
and executing are allowed only beneath those paths (the interpreter and its packages among them: reward code
must import modules), else everywhere. With ABI 4+ TCP bind/connect are denied too, and with ABI 6+ signals to
processes outside the sandbox (the trainer) and abstract unix sockets are denied. See landlock(7).
"""

from __future__ import annotations

import ctypes
import os
import sys

# Syscall numbers come from the unified table (the same on x86_64 and aarch64).
_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38

# filesystem rights (landlock.h)
_EXECUTE, _WRITE_FILE, _READ_FILE, _READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_READ = _EXECUTE | _READ_FILE | _READ_DIR
_REMOVE_DIR, _REMOVE_FILE = 1 << 4, 1 << 5
_MAKE = sum(1 << b for b in range(6, 13))  # char, dir, reg, sock, fifo, block, sym
_REFER = 1 << 13  # ABI 2
_TRUNCATE = 1 << 14  # ABI 3
_NET_BIND_TCP, _NET_CONNECT_TCP = 1 << 0, 1 << 1  # ABI 4
_SCOPE_ABSTRACT_UNIX, _SCOPE_SIGNAL = 1 << 0, 1 << 1  # ABI 6
_FILE_RIGHTS = _EXECUTE | _WRITE_FILE | _READ_FILE | _TRUNCATE  # the rights that apply to a single file


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


def abi_version() -> int:
    """The kernel's Landlock ABI version, 0 when Landlock is unavailable (not Linux, disabled, or too old)."""
    if not sys.platform.startswith("linux"):
        return 0
    try:
        v = _libc().syscall(_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION))
    except (OSError, AttributeError):
        return 0
    return max(int(v), 0)


def _add_rule(libc: ctypes.CDLL, ruleset: int, path: str, rights: int) -> None:
    """Allow `rights` beneath `path` (only those that apply to a file, when it is one)."""
    pfd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    try:
        rule = _PathBeneathAttr(rights if os.path.isdir(path) else rights & _FILE_RIGHTS, pfd)
        if libc.syscall(_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(_RULE_PATH_BENEATH), ctypes.byref(rule), 0):
            err = ctypes.get_errno()
            raise OSError(err, f"landlock_add_rule({path}): {os.strerror(err)}")
    finally:
        os.close(pfd)


def restrict(writable: list[str], deny_tcp: bool = True, readable: list[str] | None = None) -> dict[str, bool]:
    """Restrict this process (and its future children) for good. Returns what is now enforced:
    `{"filesystem": ..., "reading": ..., "tcp": ..., "signals": ...}`; raises OSError when Landlock is
    unavailable.

    `writable` are directories or files beneath which write-like access stays allowed. With `readable` (a list),
    reading files, listing directories and executing programs are allowed only beneath those paths and
    `writable`; with None they stay allowed everywhere.
    """
    abi = abi_version()
    if abi < 1:
        raise OSError("Landlock is not available on this kernel")
    handled = _WRITE_FILE | _REMOVE_DIR | _REMOVE_FILE | _MAKE
    handled |= _REFER if abi >= 2 else 0
    handled |= _TRUNCATE if abi >= 3 else 0
    handled |= _READ if readable is not None else 0
    net = (_NET_BIND_TCP | _NET_CONNECT_TCP) if abi >= 4 and deny_tcp else 0
    scoped = (_SCOPE_ABSTRACT_UNIX | _SCOPE_SIGNAL) if abi >= 6 else 0
    attr = _RulesetAttr(handled, net, scoped)
    size = 24 if abi >= 6 else 16 if abi >= 4 else 8
    libc = _libc()
    fd = libc.syscall(_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if fd < 0:
        raise OSError(ctypes.get_errno(), f"landlock_create_ruleset: {os.strerror(ctypes.get_errno())}")
    try:
        for path in writable:
            _add_rule(libc, fd, path, handled)
        for path in readable or []:
            _add_rule(libc, fd, path, _READ)
        if _libc().prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0):
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
        if libc.syscall(_RESTRICT_SELF, ctypes.c_int(fd), ctypes.c_uint32(0)):
            err = ctypes.get_errno()
            raise OSError(err, f"landlock_restrict_self: {os.strerror(err)}")
    finally:
        os.close(fd)
    return {"filesystem": True, "reading": readable is not None, "tcp": bool(net), "signals": bool(scoped)}
