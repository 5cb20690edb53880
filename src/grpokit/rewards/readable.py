"""What a sandboxed reward may read with `read="limited"` (the default): the paths given to Landlock.

A reward needs to read the interpreter and its packages (to import), the system's shared libraries and programs
(`subprocess`), its own module, and perhaps the data and the run directory; it has no business reading the
user's keys (`~/.ssh`, `~/.aws`, `~/.netrc`, tokens in `~/.cache/huggingface`) or other people's files. So it
may read, list and execute only beneath:

- the interpreter: `sys.prefix`, `sys.base_prefix`, `sys.exec_prefix` (and the base one), the executable's
  directory, every `sys.path` entry and site-packages directory (the user's included), `LD_LIBRARY_PATH`;
- the system: /usr, /lib, /lib32, /lib64, /bin, /sbin, /proc, /sys, and single files of /dev and /etc that
  libraries open (`/dev/null`, `/dev/urandom`, `/dev/shm`, `/etc/ld.so.cache`, `/etc/localtime`,
  `/etc/passwd`, `/etc/ssl/certs`, ...; not /dev as a whole, whose disks a root worker could read);
- the reward's own module: the directory of a `file.py` spec, or the package or file a `module:function`
  spec names;
- `SandboxLimits.readable`: what the trainer adds (the data and the run directory) and the config key
  `reward.sandbox_readable`; and the worker's private directory (read and write).

A directory that holds the user's home directory (`/`, `/home`, `~` itself) is never granted this way, so a
`sys.path` entry, a data file or a module lying directly in `~` does not open all of it: only the module's
own file or package, or the data file, is granted then. Paths that do not exist are skipped. `/proc` does not
expose the trainer: Landlock refuses a sandboxed process access to processes outside it (their environment
and memory included). `read="all"` restricts nothing (reading is then as the user may).
"""

from __future__ import annotations

import importlib.machinery
import os
import site
import sys
from collections.abc import Iterable

from .registry import REWARDS

SYSTEM = ("/usr", "/lib", "/lib32", "/lib64", "/bin", "/sbin", "/proc", "/sys")
SYSTEM_FILES = (
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/shm",
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


def too_wide(path: str, home_dirs: set[str]) -> bool:
    """Whether `path` is a home directory or holds one (granting it would grant the user's keys)."""
    real = os.path.realpath(path)
    return any(h == real or h.startswith(real.rstrip(os.sep) + os.sep) for h in home_dirs)


def python_paths(cwd: str) -> list[str]:
    """The interpreter, its standard library and every package directory it imports from."""
    paths = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix]
    paths.append(os.path.dirname(os.path.realpath(sys.executable)))
    paths += [os.path.join(cwd, p) for p in sys.path]
    paths += site.getsitepackages() + [site.getusersitepackages()]
    paths += [p for p in os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep) if os.path.isabs(p)]
    return paths


def module_paths(spec: str, cwd: str) -> list[str]:
    """Where the module of reward `spec` lies, found without importing anything: the directory of a `file.py`
    (only the file where that directory is too wide, see `grant`), the package or file of a module."""
    if spec in REWARDS or ":" not in spec:
        return []
    module = spec.rpartition(":")[0]
    if module.endswith(".py"):
        path = os.path.join(cwd, os.path.expanduser(module))
        return [os.path.dirname(path), path]
    search = [os.path.join(cwd, p) for p in sys.path]
    try:
        found = importlib.machinery.PathFinder.find_spec(module.split(".")[0], search)
    except (ImportError, ValueError, OSError):
        return []
    if found is None:
        return []
    return list(found.submodule_search_locations or []) + ([found.origin] if found.origin else [])


def grant(paths: Iterable[str], home_dirs: set[str]) -> list[str]:
    """`paths` that exist and are not too wide, absolute and without duplicates, in order."""
    out: dict[str, None] = {}
    for p in paths:
        if p and os.path.exists(p) and not too_wide(p, home_dirs):
            out[os.path.abspath(p)] = None
    return list(out)


def read_roots(readable: Iterable[str], specs: Iterable[str], cwd: str) -> list[str]:
    """Every path a reward may read beneath with `read="limited"` (see the module docstring)."""
    paths = [*SYSTEM, *SYSTEM_FILES, *python_paths(cwd), *readable]
    for spec in specs:
        paths += module_paths(spec, cwd)
    return grant(paths, homes())
