"""`model.attn_implementation` (TRL's `attn_implementation`) checked before a model is built: one line, not a
traceback from deep inside transformers, when this machine cannot run the kernel asked for.

Requirements, from transformers' attention backends (docs "Attention backends"; `flash_attention_2` imports the
`flash_attn` package and runs on CUDA GPUs only, `flash_attention_3` imports `flash_attn_interface`, Hopper GPUs):
each entry of `REQUIREMENTS` names the module the backend imports and whether it needs CUDA. `eager`, `sdpa` and
other values are left to transformers.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass

from ..common.registry import Registry
from .embedded import ModelSpecError


@dataclass(frozen=True)
class Requirement:
    """What an attention backend needs on this machine."""

    module: str
    package: str
    cuda: bool = True


REQUIREMENTS = Registry.of(
    "attention backend",
    {
        "flash_attention_2": Requirement("flash_attn", "flash-attn"),
        "flash_attention_3": Requirement("flash_attn_interface", "flash-attn 3 (hopper/ of the flash-attention repo)"),
    },
)

FIX = "--set model.attn_implementation=sdpa (PyTorch's fused attention: no extra package, CPU or GPU)"


def check_attn_implementation(value: str | None, device: str) -> None:
    """ModelSpecError (one line: the key, the value, the fix) when backend `value` cannot run on `device` here."""
    if not value or value not in REQUIREMENTS:
        return
    need = REQUIREMENTS[value]
    if need.cuda and not str(device).startswith("cuda"):
        raise ModelSpecError(f"model.attn_implementation={value!r} runs on CUDA GPUs only and the model is on "
                             f"{device}: use {FIX}")  # fmt: skip
    if importlib.util.find_spec(need.module) is None:
        raise ModelSpecError(f"model.attn_implementation={value!r} needs the {need.package} package "
                             f"({need.module!r} is not installed): install it, or use {FIX}")  # fmt: skip
