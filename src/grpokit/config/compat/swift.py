"""ms-swift (modelscope/ms-swift) `swift rlhf --rlhf_type grpo` flags -> grpokit keys, by meaning.

ms-swift's GRPO arguments are TRL's `GRPOConfig` fields under their TRL names (`--beta`, `--epsilon_high`,
`--num_generations`, `--per_device_train_batch_size`, `--steps_per_generation`), with its own `--model` and
`--dataset`, so the flags are read as a TRL GRPOConfig (`via_trl.py`). `--dataset NAME#N` is N rows of NAME
(`data.train_size`); `--reward_funcs` names ms-swift's built-in ORMs: `accuracy` (math_verify of the completion
against the `solution` column) is TRL's `accuracy_reward`, the others have no grpokit counterpart and are refused.
"""

from __future__ import annotations

from typing import Any

from . import via_trl
from .translation import Translation

RENAMES = {"model": "model_name_or_path", "dataset": "dataset_name", "system": "system_prompt"}
ORMS = {"accuracy": "accuracy_reward"}  # ms-swift's ORM names -> TRL's
IGNORED = (
    "rlhf_type", "load_from_cache_file", "use_vllm", "vllm_*", "offload_*", "sleep_level", "deepspeed",
    "dataloader_num_workers", "log_completions", "logging_steps", "save_total_limit", "torch_dtype",
    "split_dataset_ratio", "report_to", "output_dir", "move_model_batches", "async_generate",
)  # fmt: skip


def is_swift(data: dict[str, Any]) -> bool:
    return "rlhf_type" in data or ({"model", "dataset"} <= set(data) and "num_generations" in data)


def translate(data: dict[str, Any], path: str, valid_keys: set[str]) -> Translation:
    data = dict(data)
    rows = None
    if isinstance(data.get("dataset"), str) and "#" in data["dataset"]:
        data["dataset"], _, count = data["dataset"].partition("#")
        rows = int(count) if count.isdigit() else None
    funcs = data.get("reward_funcs")
    if funcs is not None:
        data["reward_funcs"] = [ORMS.get(f, f) for f in ([funcs] if isinstance(funcs, str) else funcs)]
    tuner = data.pop("tuner_type", None) or data.pop("train_type", None)
    t = via_trl.translate("ms-swift", data, RENAMES, IGNORED, path, valid_keys)
    if rows:
        t.set("dataset", data__train_size=rows)
    if data.get("rlhf_type") not in (None, "grpo"):
        t.refuse(f"--rlhf_type {data['rlhf_type']}: grpokit trains GRPO-family RL", "rlhf_type")
    if tuner == "full":
        t.set("tuner_type")
    elif tuner is not None:
        t.unsupported["tuner_type"] = tuner
    return t
