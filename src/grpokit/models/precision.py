"""Precision (:func:`resolve_precision`): ``fp32``, ``bf16-autocast`` (fp32 master weights, bf16 autocast for
the forward/backward), ``bf16`` (pure bf16 weights) and ``auto``, the fastest choice that trains correctly on
the device.

The figures this choice rests on (a 2-core Xeon without bf16 arithmetic: bf16 about 4x slower than fp32, both
training correctly) are in docs/benchmarks.md, "bf16 on a CPU without bf16 arithmetic".

So ``auto`` = ``bf16-autocast`` on CUDA (fp32 on GPUs without bf16) and on CPUs that have bf16 arithmetic
(AMX / AVX512-BF16 flags) where a bf16 matmul measures clearly faster than fp32, otherwise ``fp32``
(:func:`cpu_bf16_decision`: flags first, then a probe with a margin no machine load flips).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import time
from dataclasses import dataclass
from typing import Any

import torch

from ..common.registry import Registry

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Precision:
    """How to run the math: the weights' dtype and an optional autocast dtype for forward/backward."""

    name: str  # the resolved name: fp32 | bf16-autocast | bf16
    param_dtype: torch.dtype
    autocast_dtype: torch.dtype | None


PRECISIONS = Registry.of(
    "precision",
    {
        "fp32": Precision("fp32", torch.float32, None),
        "bf16-autocast": Precision("bf16-autocast", torch.float32, torch.bfloat16),
        "bf16": Precision("bf16", torch.bfloat16, None),
    },
)
_ALIASES = {"float32": "fp32", "bfloat16": "bf16"}
PRECISION_CHOICES = ("auto", *PRECISIONS)


def _device_type(device: str | torch.device) -> str:
    return torch.device(device).type


NATIVE_BF16_FLAGS = ("amx_bf16", "avx512_bf16")  # /proc/cpuinfo flags of CPUs with bf16 arithmetic
SIMD_FLAGS = ("avx2", "avx512f", "avx512_bf16", "avx512_vnni", "amx_tile", "amx_bf16", "amx_int8")
BF16_FAST_RATIO = 0.6  # bf16 matmul time / fp32 time under which bf16 counts as fast (see cpu_bf16_decision)


def cpu_flags() -> set[str]:
    """The CPU's feature flags as Linux reports them (/proc/cpuinfo); empty where that file does not exist."""
    try:
        text = open("/proc/cpuinfo", encoding="utf-8").read()  # noqa: SIM115  (a pseudo-file, read once)
    except OSError:
        return set()
    line = next((x for x in text.splitlines() if x.startswith("flags")), "")
    return set(line.partition(":")[2].split())


def cpu_description() -> dict[str, str]:
    """What a CPU failure report needs: the model name, its SIMD instruction sets, the kernel set torch dispatches
    to (``ATEN_CPU_CAPABILITY`` lowers it) and the MKL instruction cap when one is set."""
    try:
        text = open("/proc/cpuinfo", encoding="utf-8").read()  # noqa: SIM115
    except OSError:
        text = ""
    name = next((x.partition(":")[2].strip() for x in text.splitlines() if x.startswith("model name")), "unknown")
    flags = cpu_flags()
    return {
        "cpu": name,
        "instruction_sets": " ".join(f for f in SIMD_FLAGS if f in flags) or "none of " + " ".join(SIMD_FLAGS),
        "torch_kernels": torch.backends.cpu.get_cpu_capability(),
        "aten_cpu_capability": os.environ.get("ATEN_CPU_CAPABILITY", "(best)"),
        "mkl_instructions": os.environ.get("MKL_ENABLE_INSTRUCTIONS", "(best)"),
    }


@dataclass(frozen=True)
class Bf16Decision:
    """Whether bf16 autocast is the fast choice on this CPU, and why (recorded in run.json)."""

    fast: bool
    reason: str


def _matmul_ratio(reps: int = 7) -> tuple[float, float]:
    """(fp32 ms, bf16 ms): the best of `reps` interleaved timings of a [512, 576] x [576, 1536] linear (the
    SmolLM2-135M MLP's shape), after one warm-up each. Interleaving makes a load on the machine slow both alike."""
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(512, 576, generator=gen)
    w = torch.randn(1536, 576, generator=gen)
    pairs = {torch.float32: (x, w), torch.bfloat16: (x.bfloat16(), w.bfloat16())}
    best = {dtype: float("inf") for dtype in pairs}
    with torch.no_grad():
        for a, b in pairs.values():
            torch.nn.functional.linear(a, b)  # warm-up: oneDNN builds its kernels on the first call
        for _ in range(reps):
            for dtype, (a, b) in pairs.items():
                t = time.perf_counter()
                torch.nn.functional.linear(a, b)
                best[dtype] = min(best[dtype], time.perf_counter() - t)
    return best[torch.float32] * 1e3, best[torch.bfloat16] * 1e3


@functools.cache
def cpu_bf16_decision() -> Bf16Decision:
    """Whether bf16 runs clearly faster than fp32 on this CPU, decided from what the CPU has, not from a race.

    1. ``GRPOKIT_CPU_BF16=1`` / ``0`` decides (tests pin it, so no test depends on this machine's timing).
    2. A CPU without bf16 arithmetic (neither the AMX-BF16 nor the AVX512-BF16 flag) emulates bf16, 2-4x *slower*
       than fp32 (measured: 16 vs 7 ms on the probe below on an AVX-512 Xeon without them): fp32, no timing.
    3. With one of them, a matmul probe confirms it (oneDNN may not use the unit, e.g. under a lowered
       ``ATEN_CPU_CAPABILITY``): bf16 counts as fast when its best time is under ``BF16_FAST_RATIO`` = 0.6 of fp32's.
       AMX parts measure ~0.1-0.3 and emulated bf16 2-4, so a load that slows one side by up to 1.6x cannot flip
       the decision, and the best of 7 interleaved timings is slowed alike on both sides.
    """
    env = os.environ.get("GRPOKIT_CPU_BF16")
    if env in ("0", "1"):
        return Bf16Decision(env == "1", f"GRPOKIT_CPU_BF16={env} set in the environment")
    native = [f for f in NATIVE_BF16_FLAGS if f in cpu_flags()]
    if not native:
        return Bf16Decision(False, "the CPU has no bf16 arithmetic (no amx_bf16 or avx512_bf16 flag): fp32")
    fp32, bf16 = _matmul_ratio()
    fast = bf16 < BF16_FAST_RATIO * fp32
    log.info("cpu matmul probe: fp32 %.2f ms, bf16 %.2f ms", fp32, bf16)
    verdict = "bf16-autocast" if fast else "fp32"
    return Bf16Decision(
        fast,
        f"the CPU has {'/'.join(native)}; bf16 matmul {bf16:.2f} ms vs fp32 {fp32:.2f} ms "
        f"(ratio {bf16 / fp32:.2f}, fast below {BF16_FAST_RATIO}): {verdict}",
    )


def cpu_bf16_is_fast() -> bool:
    """Whether `auto` picks bf16-autocast on this CPU (:func:`cpu_bf16_decision`)."""
    return cpu_bf16_decision().fast


def precision_reason(precision: str, device: str | torch.device) -> str:
    """Why `precision` resolves as it does on `device`, in one line (run.json's ``precision_reason``)."""
    name = _ALIASES.get(precision, precision)
    if name != "auto":
        return f"model.precision={precision} set in the config"
    kind = _device_type(device)
    if kind == "cuda":
        return "auto on CUDA: bf16-autocast where the GPU supports bf16, else fp32"
    if kind == "cpu":
        return f"auto on CPU: {cpu_bf16_decision().reason}"
    return f"auto on {kind}: fp32"


def resolve_precision(precision: str, device: str | torch.device) -> Precision:
    """Resolve a precision name (``auto``, ``fp32``, ``bf16-autocast``, ``bf16``) for ``device``.

    ``auto`` is the fastest choice that trains correctly there: ``bf16-autocast`` on CUDA (``fp32`` on GPUs
    without bf16) and on CPUs where :func:`cpu_bf16_is_fast`, else ``fp32``.
    """
    name = _ALIASES.get(precision, precision)
    if name == "auto":
        kind = _device_type(device)
        if kind == "cuda":
            usable = not torch.cuda.is_available() or torch.cuda.is_bf16_supported()
            name = "bf16-autocast" if usable else "fp32"
        elif kind == "cpu":
            name = "bf16-autocast" if cpu_bf16_is_fast() else "fp32"
        else:
            name = "fp32"
    if name not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}; choose one of: {', '.join(PRECISION_CHOICES)}")
    return PRECISIONS[name]


DTYPE_PRECISIONS = {"auto": None, "float32": "fp32", "fp32": "fp32", "bfloat16": "bf16", "bf16": "bf16"}


def precision_for_dtype(dtype: str, precision: str) -> str:
    """The precision a `from_pretrained`-style `model.dtype` asks for: `auto` leaves `precision` as it is,
    `float32` is fp32 and `bfloat16` pure bf16 weights; ValueError when it contradicts an explicit precision or
    is float16 (fp16 training needs loss scaling, which grpokit does not do)."""
    if dtype not in DTYPE_PRECISIONS:
        fix = "use bfloat16 (same memory, no loss scaling needed)" if dtype in ("float16", "fp16", "half") else ""
        known = ", ".join(k for k in DTYPE_PRECISIONS if len(k) > 4)
        raise ValueError(f"model.dtype={dtype!r} is not supported: use one of {known}" + (f"; {fix}" if fix else ""))
    wanted = DTYPE_PRECISIONS[dtype]
    if wanted is None or precision in ("auto", wanted):
        return precision if wanted is None else wanted
    raise ValueError(
        f"model.dtype={dtype!r} loads {wanted} weights but model.precision={precision!r}: set only one of them "
        "(model.precision=bf16-autocast keeps fp32 weights and computes in bf16)"
    )


def param_dtype(dtype: str | torch.dtype, device: str | torch.device) -> torch.dtype:
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype in ("float16", "fp16"):
        return torch.float16
    return resolve_precision(dtype, device).param_dtype


def autocast_ctx(precision: Precision | str, device: str | torch.device) -> contextlib.AbstractContextManager[Any]:
    """``torch.autocast`` for the precision's autocast dtype on ``device``, else a no-op context."""
    p = precision if isinstance(precision, Precision) else resolve_precision(precision, device)
    if p.autocast_dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=_device_type(device), dtype=p.autocast_dtype)


def machine_lines() -> list[str]:
    """Two lines for the head of a test or bug report: the CPU and its kernels, and what `auto` picks and why."""
    d = cpu_description()
    return [
        f"cpu: {d['cpu']} | instruction sets: {d['instruction_sets']} | torch kernels: {d['torch_kernels']} "
        f"(ATEN_CPU_CAPABILITY={d['aten_cpu_capability']}, MKL_ENABLE_INSTRUCTIONS={d['mkl_instructions']})",
        f"model.precision=auto -> {resolve_precision('auto', 'cpu').name}: {precision_reason('auto', 'cpu')}",
    ]
