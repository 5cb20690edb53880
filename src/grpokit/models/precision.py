"""Precision (:func:`resolve_precision`): ``fp32``, ``bf16-autocast`` (fp32 master weights, bf16 autocast for
the forward/backward), ``bf16`` (pure bf16 weights) and ``auto``, the fastest choice that trains correctly on
the device.

Measured on the development machine (2-core Intel Xeon VM with AVX-512 but neither AVX512-BF16 nor AMX,
torch 2.13 CPU, transformers 5.23, ``torch.set_num_threads(2)``, SmolLM2-135M). The VM was shared with other
jobs, so each figure is the best steady-state run (after a warm-up) and contended runs were slower still:

* one forward+backward, ``[32, 128]`` tokens, labels = inputs: fp32 14.8 s (15-21 s), bf16-autocast 59 s
  (59-72 s), pure bf16 58 s (58-85 s) — bf16 is about 4x *slower* than fp32 on this CPU.
* ``generate``, 32 sequences x 48 new tokens (left-padded chat prompts, batch ``[32, 46]``): fp32 greedy 6.2 s,
  sampled 8.3 s; pure bf16 greedy 17.6 s, sampled 25.7 s; fp32 weights under bf16 autocast greedy 19 s.
* a forward+backward on ``[8, 128]`` real-text tokens against fp32: bf16-autocast loss relative error 1.3e-3,
  gradient relative error ||g - g32|| / ||g32|| = 1.6e-2 (cosine 0.9999); pure bf16 loss 1.0e-3, gradient
  2.6e-2 (cosine 0.9997). Both train correctly; bf16-autocast keeps fp32 master weights and optimizer updates,
  so it is the bf16 mode that ``auto`` picks where bf16 is fast.
* the 256x576 @ 576x1536 matmul probe of :func:`cpu_bf16_is_fast`: fp32 ~7 ms, bf16 ~16 ms -> not fast.

Hence ``auto`` = ``bf16-autocast`` on CUDA (fp32 on GPUs without bf16) and on CPUs whose bf16 matmul measures
clearly faster than fp32 (AMX / AVX512-BF16 parts), otherwise ``fp32``. Method: the converted model
loaded with ``AutoModelForCausalLM.from_pretrained(dir, dtype=...)``; training step =
``model(input_ids=ids, labels=ids).loss.backward()`` in train mode (inside
``torch.autocast("cpu", dtype=torch.bfloat16)`` for bf16-autocast); generation =
``model.generate(**enc, max_new_tokens=48, min_new_tokens=48, do_sample=...)``
under ``torch.inference_mode()``.
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

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Precision:
    """How to run the math: the weights' dtype and an optional autocast dtype for forward/backward."""

    name: str  # the resolved name: fp32 | bf16-autocast | bf16
    param_dtype: torch.dtype
    autocast_dtype: torch.dtype | None


_PRECISIONS: dict[str, Precision] = {
    "fp32": Precision("fp32", torch.float32, None),
    "bf16-autocast": Precision("bf16-autocast", torch.float32, torch.bfloat16),
    "bf16": Precision("bf16", torch.bfloat16, None),
}
_ALIASES = {"float32": "fp32", "bfloat16": "bf16"}
PRECISION_CHOICES = ("auto", *_PRECISIONS)


def _device_type(device: str | torch.device) -> str:
    return torch.device(device).type


@functools.cache
def cpu_bf16_is_fast() -> bool:
    """Whether bf16 matmuls run clearly faster than fp32 on this CPU (measured once per process, ~0.2 s).

    CPUs with AMX or AVX512-BF16 run bf16 GEMMs several times faster than fp32; without them PyTorch
    emulates bf16 and it is 2-4x *slower*. ``GRPOKIT_CPU_BF16=1`` / ``0`` overrides the measurement.
    """
    env = os.environ.get("GRPOKIT_CPU_BF16")
    if env in ("0", "1"):
        return env == "1"
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(256, 576, generator=gen)
    w = torch.randn(1536, 576, generator=gen)

    def best(dtype: torch.dtype) -> float:
        a, b = x.to(dtype), w.to(dtype)
        times = []
        with torch.no_grad():
            for _ in range(4):  # the first call warms up oneDNN kernels
                t = time.perf_counter()
                torch.nn.functional.linear(a, b)
                times.append(time.perf_counter() - t)
        return min(times[1:])

    fp32, bf16 = best(torch.float32), best(torch.bfloat16)
    log.info("cpu matmul probe: fp32 %.2f ms, bf16 %.2f ms", fp32 * 1e3, bf16 * 1e3)
    return bf16 < 0.8 * fp32


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
    if name not in _PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}; choose one of: {', '.join(PRECISION_CHOICES)}")
    return _PRECISIONS[name]


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
