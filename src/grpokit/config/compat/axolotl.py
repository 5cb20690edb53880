"""axolotl (axolotl-ai-cloud/axolotl) GRPO YAML (`rl: grpo` + a `trl:` block) -> grpokit keys, by meaning.

axolotl passes its `trl:` block to TRL's `GRPOConfig` and its top-level training keys to TRL's
`TrainingArguments` under its own names (`base_model`, `micro_batch_size`, `num_epochs`, `lr_scheduler`), so the
file is read as a TRL GRPOConfig (`via_trl.py`) once those are renamed; read flat before, it carried nothing.
`datasets[0].path` is the data (its `type:` transform is axolotl's prompt builder, named as not supported); the
`trl.reward_funcs` dotted paths (`grpo_code.code_execution_reward_func`) resolve as TRL resolves them.
"""

from __future__ import annotations

from typing import Any

from . import via_trl
from .translation import Translation
from .verl import flatten

RENAMES = {
    "base_model": "model_name_or_path", "micro_batch_size": "per_device_train_batch_size",
    "num_epochs": "num_train_epochs", "lr_scheduler": "lr_scheduler_type", "lora_r": "lora_r",
    "lora_alpha": "lora_alpha", "sequence_len": "max_prompt_length",
}  # fmt: skip
IGNORED = (
    "vllm.*", "trl.use_vllm", "trl.vllm_*", "trl.log_completions", "trl.use_data_producer", "load_in_8bit",
    "load_in_4bit", "strict", "torch_compile", "chat_template", "dataset_prepared_path", "dataset_processes",
    "skip_prepare_dataset", "val_set_size", "dataloader_*", "gc_steps", "sample_packing", "eval_sample_packing",
    "pad_to_sequence_len", "train_on_inputs", "group_by_length", "tf32", "early_stopping_patience",
    "resume_from_checkpoint", "local_rank", "logging_steps", "flash_attention", "evals_per_epoch", "saves_per_epoch",
    "wandb_*", "hub_model_id", "plugins", "output_dir", "gradient_checkpointing_kwargs.*", "lr_scheduler_kwargs.*",
    "rl", "optimizer", "save_steps",
)  # fmt: skip


def is_axolotl(data: dict[str, Any]) -> bool:
    return "base_model" in data and (data.get("rl") is not None or isinstance(data.get("trl"), dict))


def translate(data: dict[str, Any], path: str, valid_keys: set[str]) -> Translation:
    datasets = data.get("datasets")
    body = {k: v for k, v in data.items() if k not in ("datasets", "trl")}
    flat = {**flatten({k: v for k, v in body.items() if isinstance(v, dict)}),
            **{k: v for k, v in body.items() if not isinstance(v, dict)}}  # fmt: skip
    flat.update({f"trl.{k}": v for k, v in (data.get("trl") or {}).items()})
    first = datasets[0] if isinstance(datasets, list) and datasets and isinstance(datasets[0], dict) else {}
    if first.get("path"):
        flat["datasets"] = first["path"]
    t = via_trl.translate("axolotl", flat, {**RENAMES, "datasets": "dataset_name"}, IGNORED, path, valid_keys)
    if data.get("rl") not in (None, "grpo"):
        t.unsupported["rl"] = data["rl"]
        t.refuse(f"rl={data['rl']!r}: grpokit trains GRPO-family RL, not axolotl's {data['rl']}", "rl")
    rest = {k: v for k, v in first.items() if k != "path"}
    if rest:
        t.unsupported["datasets[0]"] = rest
        if len(datasets) > 1:
            t.unsupported["datasets[1:]"] = datasets[1:]
    return t
