"""The reward sandbox: what a reward worker process may do, enforced by the kernel where it can be.

The worker is a fresh interpreter started with the allow-listed environment alone (`worker.py`,
`env_vars.py`), so neither its memory nor the kernel's copy of its environment (`/proc/self/environ`) holds
the trainer's secrets. `apply_sandbox` runs in it once, before any reward code, and `confine_files` then
confines the process that serves the calls. In order:

1. **Limits** (setrlimit, soft = hard): address space = the interpreter's size at start + the size of
   torch's shared libraries where torch is installed (`limits.torch_library_bytes`) + `memory_mb`, per
   process (a program the reward starts gets its own allowance, unless a memory cgroup bounds them all, step
   2), open files, file size, no core files. CPU time is limited per call (`set_call_cpu_limit`, within a
   lifetime hard limit; then the worker is replaced).
2. **Processes, privileges, network** (entangled, because the kernel exempts root from RLIMIT_NPROC):
   started as root, the worker first joins new pids and memory cgroups allowing `max_procs` tasks and
   `memory_mb` for itself and everything it starts (where the cgroup filesystem is writable; `cgroups.py`).
   Then it enters new user, network and mount namespaces (`unshare(CLONE_NEWUSER | CLONE_NEWNET |
   CLONE_NEWNS)`, `linux.py`): it keeps its uid for file access but loses every capability outside them, so
   it cannot lift a limit, leave the namespaces or signal other users; the network namespace has only a
   loopback that is down, so every connect, 127.0.0.1 included, fails with "Network is unreachable". In its
   own user namespace RLIMIT_NPROC counts only the sandbox's processes. Where user namespaces are not
   allowed: a network namespace alone (root), capabilities dropped (root), and RLIMIT_NPROC over the user's
   current task count (non-root). `user=<uid>` instead switches a root worker to that uid (its files must
   be readable by it).
3. **Filesystem and signals** (Landlock, kernel 5.13+, unprivileged, irreversible; in the serving process):
   writing, creating, removing or renaming files is denied everywhere except beneath the private working
   directory (and `writable`). With `read="limited"` (the default) reading, listing and executing are allowed
   only beneath the interpreter, its packages, the system's libraries, the process's own `/proc/self`, the
   reward's module, the data and the run directory (`readable.py`); `read="all"` leaves reading unrestricted.
   With Landlock ABI 4+ TCP connect/bind are denied too (a second network wall), with ABI 6+ signals to
   processes outside the sandbox (the trainer) are denied.
4. **Fallbacks** where the kernel offers neither a namespace nor Landlock: a Python audit hook refuses socket
   connects/binds/lookups, file writes outside the directory and (read="limited") file reads outside the
   readable paths. It stops Python code only (not ctypes or a program the reward runs), so without Landlock
   the worker refuses user code unless `python_only=True` accepts that (`worker.SandboxRefused`).
5. **Unix sockets** (seccomp, without network): `socket(AF_UNIX)` and io_uring are denied, since a pathname
   socket reaches daemons outside any network namespace (a tmux or docker socket is a shell outside).
6. **Secrets**: the interpreter starts with only the environment variables of an allow-list (what Python and
   numeric libraries need, `env_vars.py`) and those named in `env`; credentials under any name are dropped.
   It leaves the trainer's session keyring for a new, empty one, and seccomp denies `keyctl`, `add_key` and
   `request_key` (the user's keyrings are reachable from any session of the uid; `_confine_keyrings`).
7. **Parent death**: PR_SET_PDEATHSIG(SIGKILL) for the worker and every process it forks with `os.fork`, and a
   check that the parent is still the trainer (it may have died before the prctl). In its own user namespace
   the worker also starts a pid namespace whose pid 1 dies with it, taking every program the reward started
   (`subprocess` included) along. The kernel refuses new threads to a process that has called
   `unshare(CLONE_NEWPID)`, so the worker then forks the process that serves the calls into the namespace
   (where numpy, torch and `concurrent.futures` may start threads) and stays as its supervisor
   (`worker.fork_server`). Whatever a call leaves running is killed when it returns (`calltree.py`).

Every protection the kernel refuses is recorded under "unavailable" with the reason (`_unavailable`). The
serving process changes into its private directory (also HOME and TMPDIR). Where it has its own mount namespace
(step 2), that directory is a tmpfs of at most `max_dir_mb` that only the worker sees and that vanishes with it;
elsewhere it is a directory on disk the trainer removes. Every other file descriptor inherited from the trainer
is closed, except stdio and the pipe to the trainer.
"""

from __future__ import annotations

import errno
import math
import os
import signal
import sys
import tempfile
import time
from typing import Any

try:
    import resource
except ImportError:  # Windows: no sandbox (ProcessRunner runs the worker unconfined there)
    resource = None  # type: ignore[assignment]

from . import cgroups, landlock, linux
from .env_vars import restrict_environment
from .limits import SandboxLimits, SandboxViolation, torch_library_bytes

CPU_BUDGET_CALLS = 20  # default lifetime CPU of a worker, in calls' allowances; then a fresh worker takes over
MIB = 1 << 20


_forker = [0]


def _remember_forker() -> None:
    _forker[0] = os.getpid()


def _die_with_forker() -> None:
    """In a process the reward forked: die with its parent, even if that parent is already gone. (A parent
    pid of 0 is the worker seen from inside its own pid namespace, whose end kills us anyway.)"""
    linux.set_parent_death_signal()
    if os.getppid() not in (0, _forker[0]):
        os._exit(0)


_init_keepalive: list[int] = []  # the worker's end of the pipe its pid-namespace init watches at start-up


def _pid_init(watch: int) -> None:
    """Pid 1 of the worker's pid namespace: dies with the worker, which ends every process in the namespace.

    It reaps the orphans the namespace hands it. `watch` is a pipe only the worker can write to: at start-up,
    end of file means the worker died before the death signal was set.
    """
    linux.set_parent_death_signal()
    _close_inherited_fds({watch})  # the pipe to the trainer above all: the worker's death must close it
    os.set_blocking(watch, False)
    try:
        if os.read(watch, 1) == b"":
            os._exit(0)
    except BlockingIOError:
        pass  # the worker is alive
    os.close(watch)
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            time.sleep(1.0)
        except BaseException:  # nothing may end pid 1 but the worker's death
            continue


def _start_pid_namespace() -> bool:
    """Put everything the worker starts from now on into a new pid namespace with a watchful pid 1."""
    if not linux.unshare(linux.CLONE_NEWPID):
        return False
    r, w = os.pipe()
    pid = os.fork()  # the first child: pid 1 of the new namespace
    if pid == 0:
        os.close(w)
        _pid_init(r)
    os.close(r)
    os.set_inheritable(w, False)
    _init_keepalive.append(w)
    return True


def _set(limit: int, value: int) -> bool:
    """Set soft = hard = `value` (or keep a lower existing hard limit); False where the OS refuses the limit."""
    try:
        resource.setrlimit(limit, (value, value))
        return True
    except (ValueError, OSError):  # above an existing hard limit: keep that lower one
        try:
            soft, hard = resource.getrlimit(limit)
            resource.setrlimit(limit, (min(value, hard), hard))
            return True
        except (ValueError, OSError):  # e.g. RLIMIT_AS on macOS
            return False


def _close_inherited_fds(keep: set[int]) -> None:
    """Close every descriptor inherited from the trainer except `keep` and stdio."""
    keep = keep | {0, 1, 2}
    try:
        fds = [int(x) for x in os.listdir("/proc/self/fd")]
    except OSError:
        fds = list(range(3, 1024))
    for fd in fds:
        if fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass


def _within(path: str, roots: list[str]) -> bool:
    real = os.path.realpath(path)
    return any(real == r or real.startswith(r.rstrip(os.sep) + os.sep) for r in roots)


_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_NET_EVENTS = {"socket.connect", "socket.bind", "socket.sendto", "socket.sendmsg", "socket.getaddrinfo"}
_NET_EVENTS |= {"socket.gethostbyname", "socket.gethostbyaddr"}
_FS_EVENTS = {"os.remove", "os.rename", "os.mkdir", "os.rmdir", "os.truncate", "os.symlink", "os.link"}


def _install_audit_hook(block_network: bool, roots: list[str] | None, read_roots: list[str] | None = None) -> None:
    """The Python-level fallback: refuse network calls, writes outside `roots` and, given `read_roots`, opening
    files for reading outside them and `roots` (cannot be removed)."""
    readable = None if read_roots is None else [*read_roots, *(roots or [])]

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if block_network and event in _NET_EVENTS:
            raise SandboxViolation(errno.EACCES, f"network access is disabled in the reward sandbox ({event})")
        if event == "open" and isinstance(args[0], (str, bytes)):
            flags = args[2] if len(args) > 2 and isinstance(args[2], int) else 0
            mode = args[1] if isinstance(args[1], str) else ""
            path = os.fsdecode(args[0])
            writes = bool(flags & _WRITE_FLAGS or any(c in mode for c in "wax+"))
            if writes and roots is not None and not _within(path, roots):
                raise SandboxViolation(errno.EACCES, "writing outside the reward's directory is denied", args[0])
            if not writes and readable is not None and not _within(path, readable):
                raise SandboxViolation(errno.EACCES, "reading outside the sandbox's readable paths is denied", args[0])
        elif roots is not None and event in _FS_EVENTS and args and isinstance(args[0], (str, bytes)):
            if not _within(os.fsdecode(args[0]), roots):
                raise SandboxViolation(errno.EACCES, f"{event} outside the reward's directory is denied", args[0])

    sys.addaudithook(hook)


def _drop_user(uid: int, workdir: str) -> None:
    os.chown(workdir, uid, uid)
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)  # from root to another uid: every capability is dropped


def _confine_processes(limits: SandboxLimits, workdir: str, enforced: dict[str, str]) -> None:
    """Network namespace, privileges and the process limit (these three are entangled, see the module doc)."""
    uid, gid = os.geteuid(), os.getegid()  # read before a user namespace hides them
    is_root = uid == 0
    netflag = 0 if limits.network else linux.CLONE_NEWNET
    userns = linux.CLONE_NEWUSER
    name = os.path.basename(workdir)
    if is_root and cgroups.join("pids", name, limits.max_procs):
        enforced["processes"] = f"pids cgroup, at most {limits.max_procs}"
    if is_root and cgroups.join("memory", name, limits.memory_mb * MIB):
        enforced["memory"] += f"; memory cgroup {limits.memory_mb} MiB for all its processes"
    elif enforced["memory"].startswith("RLIMIT_AS"):
        why = "not root" if not is_root else "no writable cgroup filesystem"
        enforced["memory"] += " (no memory cgroup: each program it starts gets its own allowance)"
        _unavailable(enforced, f"memory cgroup ({why})")
    if is_root and limits.user is not None:
        if netflag and linux.unshare(netflag):
            enforced["network"] = "netns"
        _drop_user(limits.user, workdir)
        enforced["user"] = f"uid {limits.user}, no capabilities"
    elif linux.unshare(userns | netflag | linux.CLONE_NEWNS) or linux.unshare(userns | netflag):
        if linux.map_ids_in_userns(uid, gid) and linux.mount_private_tmpfs(workdir, limits.max_dir_mb):
            enforced["directory"] = f"private tmpfs, at most {limits.max_dir_mb} MiB"
        enforced["user"] = "own user namespace: no capabilities outside it"
        if netflag:
            enforced["network"] = "userns+netns"
    else:
        _unavailable(enforced, f"user namespaces ({linux.last_error()}: no pid namespace, no private tmpfs)")
        if netflag and linux.unshare(netflag):
            enforced["network"] = "netns"
        elif netflag:
            _unavailable(enforced, f"network namespace ({linux.last_error()})")
        if is_root:
            dropped = linux.drop_capabilities()
            enforced["user"] = "uid 0 without capabilities" if dropped else "root (capabilities kept)"
    if "processes" in enforced:
        return
    if not is_root or limits.user is not None:
        scoped = enforced.get("user", "").startswith("own user namespace")
        extra = 0 if scoped else linux.user_tasks(os.getuid())
        _set(resource.RLIMIT_NPROC, limits.max_procs + extra)
        enforced["processes"] = f"RLIMIT_NPROC, at most {limits.max_procs}" + ("" if scoped else " more")
    else:
        enforced["processes"] = "not enforced (root without a writable pids cgroup): only the timeout"


def _confine_keyrings(enforced: dict[str, str]) -> None:
    """A new, empty session keyring instead of the trainer's, and no keyctl/add_key/request_key at all (the
    user and user-session keyrings are reachable by every process of the uid, whatever its session)."""
    joined = linux.join_new_session_keyring()
    if linux.deny_keyrings():
        enforced["keyrings"] = "seccomp: keyctl, add_key and request_key denied" + (
            "; a new session keyring" if joined else ""
        )
    else:
        _unavailable(enforced, f"keyring seccomp filter ({linux.last_error()})")


def _unavailable(enforced: dict[str, str], what: str) -> None:
    """Record a protection the kernel refused, with the reason (reported with the sandbox's line at start)."""
    enforced["unavailable"] = "; ".join(filter(None, (enforced.get("unavailable"), what)))


def _set_limits(limits: SandboxLimits, keep_fds: set[int], enforced: dict[str, str]) -> None:
    """Memory (address space), open files, file size and core files (soft = hard)."""
    base = linux.vm_size() + torch_library_bytes()  # torch's libraries are mapped, not allocated
    if _set(resource.RLIMIT_AS, base + limits.memory_mb * MIB):
        enforced["memory"] = f"RLIMIT_AS {limits.memory_mb} MiB per process"
    else:
        enforced["memory"] = "not enforced (the OS refused RLIMIT_AS)"
    _set(resource.RLIMIT_NOFILE, max(limits.max_open_files, max(keep_fds | {2}) + 1))
    _set(resource.RLIMIT_FSIZE, limits.max_file_mb * MIB)
    _set(resource.RLIMIT_CORE, 0)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # an over-large write raises OSError(EFBIG) instead of killing


def _confine_filesystem(
    limits: SandboxLimits, workdir: str, readable: list[str] | None, enforced: dict[str, str]
) -> None:
    """Writes only beneath the private directory (and `writable`), reads only beneath `readable` (None: all),
    TCP and signals out of the sandbox denied: Landlock, else the audit hook for Python code."""
    roots = [os.path.realpath(p) for p in (workdir, *limits.writable)]
    try:
        got = landlock.restrict([*roots, "/dev/null"], deny_tcp=not limits.network, readable=readable)
        enforced["filesystem"] = "landlock"
        if got["tcp"] and "network" not in enforced:
            enforced["network"] = "landlock (TCP only) + audit hook"
        if got["signals"]:
            enforced["signals"] = "landlock scope"
    except OSError as e:
        got = {"filesystem": False}
        _unavailable(enforced, f"Landlock ({e.strerror or e})")
    if readable is None:
        enforced["reading"] = "not restricted (read=all)"
    elif got["filesystem"]:
        enforced["reading"] = f"landlock: only beneath {len(readable)} paths (Python, system, data, run directory)"
    if not limits.network and linux.deny_unix_sockets():
        enforced["unix sockets"] = "seccomp: socket(AF_UNIX) and io_uring denied"
    elif not limits.network:
        _unavailable(enforced, f"seccomp ({linux.last_error()}: unix sockets stay open)")
    fallback_net = "network" not in enforced or enforced["network"].startswith("landlock")
    fallback_fs = not got["filesystem"]
    if fallback_net or fallback_fs:
        read_roots = [os.path.realpath(p) for p in readable] if fallback_fs and readable is not None else None
        _install_audit_hook(fallback_net and not limits.network, roots if fallback_fs else None, read_roots)
        if fallback_fs:
            enforced["filesystem"] = "audit hook (Python code only)"
            if read_roots is not None:
                enforced["reading"] = "audit hook (Python code only)"
        if "network" not in enforced:
            enforced["network"] = "audit hook (Python code only)"


def apply_sandbox(limits: SandboxLimits, workdir: str, parent_pid: int, keep_fds: set[int]) -> dict[str, str]:
    """Confine this (worker) process's resources, privileges, network and process tree (steps 1, 2 and 7);
    returns the mechanism enforcing each limit, e.g. {"network": "netns"}, and under "unavailable" what the
    kernel refused, with the reason. The file rules come after, in the serving process (`confine_files`)."""
    enforced: dict[str, str] = {}
    missing = [w for w in limits.writable if not os.path.exists(w)]
    if missing:
        raise ValueError(f"sandbox.writable names paths that do not exist: {missing}; create them or drop them")
    _close_inherited_fds(keep_fds)
    if limits.network:
        enforced["network"] = "allowed"
    _set_limits(limits, keep_fds, enforced)
    if sys.platform.startswith("linux"):
        _confine_keyrings(enforced)
        _confine_processes(limits, workdir, enforced)
    linux.set_parent_death_signal()  # after any uid change, which clears it
    if enforced.get("user", "").startswith("own user namespace") and _start_pid_namespace():
        enforced["process tree"] = "own pid namespace: whatever it starts dies with it"
    os.register_at_fork(before=_remember_forker, after_in_child=_die_with_forker)
    if os.getppid() != parent_pid:  # the trainer died before the prctl
        os._exit(0)
    enforced["parent_death"] = "PR_SET_PDEATHSIG" if sys.platform.startswith("linux") else "pipe EOF only"
    enforced.setdefault("directory", "private directory on disk (no size limit)")
    return enforced


def confine_files(
    limits: SandboxLimits, workdir: str, readable: list[str] | None, enforced: dict[str, str]
) -> dict[str, str]:
    """Confine the process that will run reward code (steps 3 to 6): files, TCP, signals and unix sockets,
    then its environment and directory. Run in the serving process itself, so that Landlock's `/proc/self`
    rule is that process's own directory (and the supervisor and the namespace's pid 1, outside Landlock's
    domain, stay out of the reward's reach: it can neither signal nor trace them)."""
    _confine_filesystem(limits, workdir, readable, enforced)
    restrict_environment(limits.env, workdir)  # HOME and TMPDIR: the private directory
    os.chdir(workdir)
    tempfile.tempdir = workdir
    return enforced


def cpu_seconds_used() -> float:
    """CPU time (user + system) this process has used so far."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def start_cpu_budget(budget_s: float) -> float:
    """Set the worker's lifetime CPU hard limit: `budget_s` from now, plus one second so that a call past its
    own (soft) limit gets SIGXCPU, reported as a CPU-time violation, rather than SIGKILL. Returns it."""
    hard = math.ceil(cpu_seconds_used() + budget_s) + 1
    _set(resource.RLIMIT_CPU, hard)
    return float(hard)


def set_call_cpu_limit(cpu_s: float) -> bool:
    """Let the next call use `cpu_s` more CPU seconds, rounded up to a whole second (RLIMIT_CPU counts whole
    seconds; past it SIGXCPU kills the worker). The allowance covers everything the worker does during the
    call, its garbage collections included. False when the lifetime budget cannot cover a whole call (the
    worker should be replaced first)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_CPU)
    want = math.ceil(cpu_seconds_used() + cpu_s)
    if hard != resource.RLIM_INFINITY and want >= hard:
        return False
    resource.setrlimit(resource.RLIMIT_CPU, (want, hard))
    return True
