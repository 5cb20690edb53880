"""`model.attn_implementation` (TRL's `attn_implementation`) checked before a model is built: one line, not a
traceback from deep inside transformers, when this machine cannot run the kernel asked for.

Requirements, from transformers' attention backends (docs "Attention backends"; `flash_attention_2` imports the
`flash_attn` package and runs on CUDA GPUs only, `flash_attention_3` imports `flash_attn_interface`, Hopper GPUs):
each entry of `REQUIREMENTS` names the module the backend imports and whether it needs CUDA. `eager`, `sdpa` and
other values are left to transformers.

And `sdpa_gqa`: transformers' `sdpa` without its copy of the key/value heads when a mask is given, the default on
CPU for grouped-query models (`sdpa_gqa_attention`; docs/benchmarks.md, "The levers").
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from typing import Any

import torch

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


# ------------------------------------------------------------------------------- grouped-query attention on CPU

SDPA_GQA = "sdpa_gqa"


def sdpa_gqa_attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    is_causal: bool | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """transformers' `sdpa` attention, except that grouped-query attention (H query heads over KV < H key/value
    heads) is always left to `scaled_dot_product_attention(enable_gqa=True)`.

    softmax(Q_h K_g^T * scaling + mask) V_g for query head h and its group g = h // (H / KV): the same function as
    repeating each key/value head H / KV times first (transformers' `repeat_kv`), which transformers does whenever a
    mask is given, because CUDA's fused kernels take no mask together with GQA. On CPU that repeat copies the whole
    KV cache H / KV times per layer per decoded token (SmolLM2-135M: 9 / 3 heads), for every batch with padding or
    a multi-turn gap. query [B, H, q, d], key/value [B, KV, k, d] -> output [B, q, H, d].
    """
    q_len, kv_len = query.shape[2], key.shape[2]
    causal = q_len > 1 and attention_mask is None and (is_causal if is_causal is not None else module.is_causal)
    if causal and kv_len > q_len:  # prefill into an empty static cache: the keys past the queries are unwritten
        key, value = key[:, :, :q_len], value[:, :, :q_len]
    out = torch.nn.functional.scaled_dot_product_attention(
        query,
        key,
        value,
        attn_mask=attention_mask,
        dropout_p=dropout,
        scale=scaling,
        is_causal=causal,
        enable_gqa=key.shape[1] != query.shape[1],
    )
    return out.transpose(1, 2).contiguous(), None


def register_sdpa_gqa() -> None:
    """Make `sdpa_gqa` a transformers attention implementation, with `sdpa`'s masks (idempotent)."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    AttentionInterface.register(SDPA_GQA, sdpa_gqa_attention)
    AttentionMaskInterface.register(SDPA_GQA, sdpa_mask)


def use_cpu_gqa(model: torch.nn.Module, requested: str | None, device: str) -> bool:
    """Switch a model that transformers gave `sdpa` to `sdpa_gqa` when it runs on CPU with grouped-query attention
    and no implementation was asked for (`model.attn_implementation` unset); True when switched. `sdpa_gqa` asked
    for by name is registered and kept on any device."""
    config = getattr(model, "config", None)
    if config is None:
        return False
    if requested == SDPA_GQA:
        return True
    heads, kv = getattr(config, "num_attention_heads", 0), getattr(config, "num_key_value_heads", None)
    if requested or not str(device).startswith("cpu") or not kv or kv == heads:
        return False
    if getattr(config, "_attn_implementation", None) != "sdpa":
        return False
    model.set_attn_implementation(SDPA_GQA)
    return True
