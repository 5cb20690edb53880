"""The sandbox's address-space allowance for torch's shared libraries (rewards/limits.py `torch_library_bytes`):
a CUDA build of torch, PyPI's default on Linux and what the newest-releases lane of `make test` runs, maps ~3 GiB
of libraries on import, on a CPU too; on top of `memory_mb` alone a reward module importing datasets and trl failed
to load ("libtorch_cuda.so: failed to map segment", tests/rewards/test_conventions.py on that lane)."""

from __future__ import annotations

import importlib.util
import os
import sys

import pytest
import torch

from grpokit.rewards import limits
from grpokit.rewards.limits import torch_library_bytes


def _library_dirs() -> list[str]:
    dirs = [os.path.join(os.path.dirname(torch.__file__), "lib")]
    spec = importlib.util.find_spec("nvidia")
    if spec is not None:
        dirs += [os.path.realpath(p) for p in spec.submodule_search_locations or []]
    return [os.path.realpath(d) for d in dirs]


def _mapped_bytes(dirs: list[str]) -> int:
    """Address space this process has mapped from files under `dirs` (torch is imported)."""
    total = 0
    with open("/proc/self/maps", encoding="ascii", errors="replace") as f:
        for line in f:
            fields = line.split(maxsplit=5)
            if len(fields) == 6 and any(os.path.realpath(fields[5].strip()).startswith(d + os.sep) for d in dirs):
                start, end = (int(x, 16) for x in fields[0].split("-"))
                total += end - start
    return total


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/self/maps")
def test_the_allowance_covers_what_importing_torch_maps() -> None:
    mapped = _mapped_bytes(_library_dirs())
    assert mapped > 0  # torch/lib/libtorch_cpu.so at least
    assert torch_library_bytes() >= mapped


def test_no_torch_no_allowance(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits.importlib.util, "find_spec", lambda name: None)
    assert torch_library_bytes() == 0
