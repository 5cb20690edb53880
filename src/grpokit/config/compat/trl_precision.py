"""TRL's `torch_dtype` (ModelConfig, `dtype` in TRL 1.x) together with `bf16` (TrainingArguments) -> grpokit's
`model.dtype` / `model.precision`, as TRL applies the two.

In TRL, `torch_dtype` is the dtype `from_pretrained` loads the weights in, and `bf16: true` turns on bf16 mixed
precision (accelerate's autocast around the forward pass). Every open-r1 GRPO recipe sets both:

* `torch_dtype: bfloat16` (with `bf16` true or false): the weights are bf16, so autocast to bf16 changes nothing
  and the model trains in pure bf16 -> `model.dtype=bfloat16` (`model.precision=bf16`);
* `torch_dtype: float32` with `bf16: true`: fp32 weights, computed in bf16 -> `model.precision=bf16-autocast`;
* `torch_dtype: float32` with `bf16: false`: fp32 throughout -> `model.dtype=float32` (`model.precision=fp32`);
* `auto` (or unset) leaves `bf16` alone: `bf16: true` is `model.precision=bf16-autocast`, false is fp32.
"""

from __future__ import annotations

from typing import Any

from .translation import Translation


def translate_precision(data: dict[str, Any], t: Translation) -> None:
    """Map `torch_dtype`/`dtype` and `bf16` together when the file gives both (else the renames map each alone)."""
    dtype_key = next((k for k in ("torch_dtype", "dtype") if k in data), None)
    if dtype_key is None or "bf16" not in data:
        return
    dtype, bf16, keys = data[dtype_key], bool(data["bf16"]), (dtype_key, "bf16")
    if dtype == "bfloat16":
        t.set(keys, model__dtype="bfloat16", model__precision="bf16")
        t.notes.append(
            f"{dtype_key}: bfloat16 with bf16: {str(bf16).lower()}: TRL loads the weights in bf16"
            + (" and its bf16 autocast then changes nothing" if bf16 else "")
            + ", so the model trains in pure bf16: model.dtype=bfloat16 (model.precision=bf16)"
        )
    elif dtype == "float32":
        if bf16:
            t.set(keys, model__dtype="auto", model__precision="bf16-autocast")
            t.notes.append(
                f"{dtype_key}: float32 with bf16: true: fp32 weights computed in bf16 autocast, as TRL does: "
                "model.precision=bf16-autocast"
            )
        else:
            t.set(keys, model__dtype="float32", model__precision="fp32")
