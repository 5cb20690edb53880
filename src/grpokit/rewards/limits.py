"""`SandboxLimits`: what a sandboxed reward worker may use and reach (enforced by `sandbox.py`)."""

from __future__ import annotations

import glob
import importlib.util
import os
from dataclasses import dataclass, field

READ_CHOICES = ("limited", "all")  # SandboxLimits.read; what "limited" allows: readable.py


@dataclass(frozen=True)
class SandboxLimits:
    """What a reward worker may use. `cpu_s=None` means the reward timeout; `cpu_budget_s` is a worker's
    lifetime CPU (default 20 calls' worth) after which a fresh one takes over; `user` (a uid) makes a worker
    started as root switch to that user (its files must then be readable by it); `writable` adds directories
    it may write beneath (e.g. "/dev/shm" for rewards that use multiprocessing locks).

    `read="limited"` (the default) lets the reward read only the interpreter, its packages, the system's
    libraries and programs, its own module, and the paths of `readable` (the trainer adds the data and the run
    directory), where Landlock is available (`readable.py`); `read="all"` lets it read every file the user can.
    `env` names further environment variables it gets besides the allow-list (`env_vars.py`), exact names
    or patterns such as "WANDB_*". `python_only=True` accepts a kernel without Landlock, where only a Python
    audit hook would confine files and the network (a program the reward runs, or ctypes, walks past it);
    by default user code is refused there (`worker.SandboxRefused`)."""

    # a TRL training script used as a reward module imports trl, torch and datasets: ~2.9 GiB of address space
    # with torch's CPU build; a CUDA build maps ~2.6 GiB more of libraries, which the address-space limit adds
    # on top (`torch_library_bytes`)
    memory_mb: int = 4096
    cpu_s: float | None = None
    cpu_budget_s: float | None = None
    max_open_files: int = 256
    max_procs: int = 32
    max_file_mb: int = 64
    max_dir_mb: int = 256
    network: bool = False
    user: int | None = None
    writable: tuple[str, ...] = field(default_factory=tuple)
    read: str = "limited"
    readable: tuple[str, ...] = field(default_factory=tuple)
    env: tuple[str, ...] = field(default_factory=tuple)
    python_only: bool = False

    def __post_init__(self) -> None:
        for name in ("memory_mb", "max_open_files", "max_procs", "max_file_mb", "max_dir_mb"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"sandbox.{name} must be a positive integer, got {value!r}")
        for name in ("cpu_s", "cpu_budget_s"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise ValueError(f"sandbox.{name} must be > 0 or None (the default), got {value!r}")
        if self.read not in READ_CHOICES:
            raise ValueError(f"sandbox read={self.read!r} is not one of {READ_CHOICES}")
        for name in ("writable", "readable", "env"):
            if isinstance(getattr(self, name), str):
                raise ValueError(f"sandbox.{name} is a tuple of strings, got the string {getattr(self, name)!r}")


class SandboxViolation(PermissionError):
    """Raised by the audit-hook fallback when reward code does what the sandbox forbids."""


def torch_library_bytes() -> int:
    """The size of the shared libraries `import torch` maps, where torch is installed: torch/lib and, beside a
    CUDA build (PyPI's default on Linux), the nvidia/*/lib libraries it links, ~4 GiB of files of which it maps
    ~3 GiB on import, on a CPU too. Mapped from files, not memory the reward allocates, so the sandbox's address
    space limit counts them on top of `memory_mb` (else a reward module importing trl fails to load with
    "libtorch_cuda.so: failed to map segment"). 0 without torch; torch itself is not imported."""
    patterns = []
    for name, libs in (("torch", "lib"), ("nvidia", "*/lib")):
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        if spec is not None:
            patterns += [
                os.path.join(glob.escape(root), libs, "*.so*") for root in spec.submodule_search_locations or []
            ]
    files = {f for pattern in patterns for f in glob.glob(pattern)}
    return sum(os.path.getsize(f) for f in files if os.path.isfile(f))
