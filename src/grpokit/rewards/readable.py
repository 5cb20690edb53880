"""What a sandboxed reward may read with `read="limited"` (the default): the paths given to Landlock.

A reward needs to read the interpreter and its packages (to import), the system's shared libraries and programs
(`subprocess`), its own module, and perhaps the data and the run directory; it has no business reading the
user's keys (`~/.ssh`, `~/.aws`, `~/.netrc`, tokens in `~/.cache/huggingface`), the project's secrets (a `.env`
in the working directory), other processes or other people's files. So it may read, list and execute only
beneath:

- the interpreter: `sys.prefix`, `sys.base_prefix`, `sys.exec_prefix` (and the base one), the executable's
  directory, every site-packages directory (the user's included), grpokit's own package, `LD_LIBRARY_PATH`,
  and the other `sys.path` entries except those that are or hold the working directory ("" and the directory
  of the script that was started there);
- the system: /usr, /lib, /lib32, /lib64, /bin, /sbin, /sys, and single files of /dev and /etc that
  libraries open (`/dev/null`, `/dev/urandom`, `/etc/ld.so.cache`, `/etc/localtime`, `/etc/passwd`,
  `/etc/ssl/certs`, ...; not /dev as a whole, whose disks a root worker could read, and not `/dev/shm`, where
  other processes keep their shared memory: a reward that needs it names it in `writable`);
- of /proc only the serving process's own directory (`/proc/self`, resolved in that process) and the
  system-wide files that libraries read (`/proc/cpuinfo`, `/proc/meminfo`, `/proc/stat`, `/proc/sys`, ...):
  no other process's command line, environment or memory, and no listing of /proc;
- the reward's own module: the directory of a `file.py` spec, or the package or file a `module:function`
  spec names (found on `sys.path`, then in the working directory), and the module files of the functions given
  in Python: a module's own file alone (never the folder it lies in, which may hold a credential beside it, as
  `/tmp/krb5cc_*`), a package's folder;
- `SandboxLimits.readable`: what the trainer adds (the data and the run directory) and the config key
  `reward.sandbox_readable`; and the worker's private directory (read and write).

A shared, world-writable directory (sticky, as `/tmp`, `/var/tmp`) is never granted by a `sys.path` entry
(`shared_directory`). A directory that holds the user's home directory (`/`, `/home`, `~` itself) is never
granted, so a `sys.path` entry, a data file or a module lying directly in `~` does not open all of it: only the
module's own file or package, or the data file, is granted then. The working directory is granted only when named in
`reward.sandbox_readable`. Paths that do not exist are skipped. `read="all"` restricts nothing (reading is then
as the user may).
"""

from __future__ import annotations

import importlib.machinery
import os
import site
import stat
import sys
from collections.abc import Iterable

from .registry import REWARDS

SYSTEM = ("/usr", "/lib", "/lib32", "/lib64", "/bin", "/sbin", "/sys")
# /proc: the process's own directory (resolved where Landlock's rules are made: in the serving process) and
# system-wide files; never /proc itself, whose listing and other pids show every process of the machine
PROC = (
    "/proc/self",
    "/proc/cpuinfo",
    "/proc/meminfo",
    "/proc/stat",
    "/proc/loadavg",
    "/proc/uptime",
    "/proc/version",
    "/proc/filesystems",
    "/proc/sys",
)
SYSTEM_FILES = (
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/etc/timezone",
    "/etc/passwd",
    "/etc/group",
    "/etc/nsswitch.conf",
    "/etc/host.conf",
    "/etc/hosts",
    "/etc/os-release",
    "/etc/mime.types",
    "/etc/ssl/certs",
)


def homes() -> set[str]:
    """The user's home directories ($HOME and the password database's), resolved."""
    found = {os.path.expanduser("~")}
    try:
        import pwd

        found.add(pwd.getpwuid(os.getuid()).pw_dir)
    except (ImportError, KeyError, OSError):
        pass
    return {os.path.realpath(h) for h in found if h and h != "~"}


def too_wide(path: str, protected: set[str]) -> bool:
    """Whether `path` is one of the `protected` directories (homes, the working directory) or holds one
    (granting it would grant the user's keys or the project's secrets)."""
    real = os.path.realpath(path)
    return any(h == real or h.startswith(real.rstrip(os.sep) + os.sep) for h in protected)


def python_paths(cwd: str) -> list[str]:
    """The interpreter, its standard library, every package directory it imports from and grpokit's own
    package. `sys.path` entries that are or hold `cwd` are left out (`grant` drops them)."""
    paths = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix]
    paths.append(os.path.dirname(os.path.realpath(sys.executable)))
    paths += site.getsitepackages() + [site.getusersitepackages()]
    paths.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # grpokit, however installed
    paths += [p for p in os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep) if os.path.isabs(p)]
    return paths


def path_entries(cwd: str) -> list[str]:
    """The `sys.path` entries, absolute ("" is `cwd`)."""
    return [os.path.join(cwd, p) for p in sys.path]


def module_file(path: str) -> list[str]:
    """What a module file grants: the file alone (its folder may hold anything, a credential cache beside it)."""
    return [path]


def shared_directory(path: str) -> bool:
    """Whether `path` is a directory every user may write to (sticky and world-writable, as /tmp): what lies
    there is other people's, and never granted as a whole."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    return os.path.isdir(path) and bool(st.st_mode & stat.S_ISVTX) and bool(st.st_mode & stat.S_IWOTH)


def module_paths(spec: str, cwd: str) -> list[str]:
    """Where the module of reward `spec` lies, found without importing anything: a `file.py` alone, the package
    or file of a module."""
    if spec in REWARDS or ":" not in spec:
        return []
    module = spec.rpartition(":")[0]
    if module.endswith(".py"):
        return module_file(os.path.join(cwd, os.path.expanduser(module)))
    search = [*(os.path.join(cwd, p) for p in sys.path), cwd]  # then the working directory, as `load_reward`
    try:
        found = importlib.machinery.PathFinder.find_spec(module.split(".")[0], search)
    except (ImportError, ValueError, OSError):
        return []
    if found is None:
        return []
    return list(found.submodule_search_locations or []) + ([found.origin] if found.origin else [])


def grant(paths: Iterable[str], protected: set[str]) -> list[str]:
    """`paths` that exist and are not too wide (`too_wide`), absolute and without duplicates, in order."""
    out: dict[str, None] = {}
    for p in paths:
        if p and os.path.exists(p) and not too_wide(p, protected):
            out[os.path.abspath(p)] = None
    return list(out)


def read_roots(readable: Iterable[str], specs: Iterable[str], cwd: str, files: Iterable[str] = ()) -> list[str]:
    """Every path a reward may read beneath with `read="limited"` (see the module docstring). `readable`: the
    paths the user and the trainer name (only home directories are refused there); `files`: the module files
    of functions given in Python."""
    home_dirs = homes()
    found = [*path_entries(cwd), *(p for f in files for p in module_file(f))]
    for spec in specs:
        found += module_paths(spec, cwd)
    system = grant([*SYSTEM, *SYSTEM_FILES, *PROC, *python_paths(cwd)], home_dirs)
    implicit = grant([p for p in found if not shared_directory(p)], home_dirs | {os.path.realpath(cwd)})
    return list(dict.fromkeys([*system, *implicit, *grant(readable, home_dirs)]))
