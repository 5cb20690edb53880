"""TRL `GRPOConfig` (and `trl grpo` script) keys -> grpokit keys, by meaning rather than by name.

What differs in meaning, and how it is translated:

* batch sizes: TRL's `per_device_train_batch_size` counts *completions* per device and micro-step, and one
  generation batch holds `generation_batch_size` (default `per_device_train_batch_size * steps_per_generation`,
  `steps_per_generation` defaulting to `gradient_accumulation_steps`) completions = that / `num_generations`
  prompts. grpokit counts prompts (`rollout.prompts_per_step`) x samples (`rollout.group_size`); the generation
  batch is split into `train.mini_batches` = generation batch / (per_device x grad_accum) optimizer steps, each
  of micro-batches of `per_device_train_batch_size` completions. Translated for one process.
* steps: TRL counts optimizer steps; one grpokit step is a rollout batch trained for `num_iterations` (mu ->
  `train.ppo_epochs`) x `train.mini_batches` optimizer steps, so `max_steps`, `save_steps`, `eval_steps` and
  `ref_model_sync_steps` are divided by that number. Warm-up and the schedule count optimizer steps in both.
* `beta` is the KL coefficient of a k3 estimate in the loss against the initial policy (docs/math.md §16):
`algo.kl_coef`,
  `kl_estimator=k3`, `kl_placement=loss`, `reference=frozen`; beta 0 (TRL's default) keeps no reference.
* `epsilon` is the lower clip eps_low, `epsilon_high` the upper (default: epsilon); `delta` is the two-sided
  bound of INTELLECT-2 (`algo.delta`).
* `loss_type` is the aggregation (docs/math.md §1.5): grpo -> seq-mean-token-mean, dapo and bnpo -> token-mean (global
  token count; bnpo's local count is the same for one process and one accumulation step), dr_grpo ->
  constant-norm with l_norm = max_completion_length, cispo -> the cispo loss capped at `epsilon_high` (absolute).
* `importance_sampling_level=sequence` is GSPO's sequence ratio (`algo.policy_loss=gspo`).
* `scale_rewards` group / batch -> `algo.adv_scale` with TRL's std epsilon 1e-4 (`algo.adv_eps`); none -> the
  mean-only `dr_grpo` advantage.
* `reward_funcs` names are resolved as `trl grpo` or the recipe's project resolves them (`trl_rewards.py`); a name
  that resolves to no function is refused, with the fix, not counted as mapped. TRL has no answer column (its
  rewards read the columns they name), so `data.answer_key` is null: rows need no `answer` field.
* `dataset_prompt_column` (open-r1) is `data.prompt_key`, `system_prompt` is `data.system_prompt`: as open-r1's
  `make_conversation` does, the prompt becomes a conversation (system + user), so rewards get conversational
  completions (`[{"role": "assistant", "content": ...}]`), as TRL passes them.
* keys a file leaves unset take TRL's defaults (TRL 1.x), not grpokit's recipe values. A file written for an older
  TRL meant other defaults (`OLD_DEFAULTS`, read from TRL's grpo_config.py at each release tag): the message says
  which default was assumed and how to pin the old one.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from . import trl_rewards
from .translation import Translation
from .trl_precision import translate_precision

SOURCE = "TRL GRPOConfig"

# TRL 1.16 GRPOConfig defaults of the keys that decide what is learned
DEFAULTS: dict[str, Any] = {
    "learning_rate": 1e-6,
    "beta": 0.0,
    "epsilon": 0.2,
    "loss_type": "dapo",
    "scale_rewards": "group",
    "importance_sampling_level": "token",
    "num_generations": 8,
    "per_device_train_batch_size": 8,
    "gradient_accumulation_steps": 1,
    "num_iterations": 1,
    "max_completion_length": 512,
    "temperature": 1.0,
    "adam_beta2": 0.999,
    "lr_scheduler_type": "linear",
    "seed": 42,
}

# what TRL's GRPOConfig defaulted to before (huggingface/trl trl/trainer/grpo_config.py at the release tags):
# beta 0.04 up to v0.18 (0.0 from v0.19.0); no loss_type up to v0.16 (v0.14-v0.15 averaged each sequence: grpo;
# v0.16 averaged tokens), loss_type "bnpo" in v0.17-v0.21, "dapo" from v0.22.0
OLD_DEFAULTS: dict[str, str] = {
    "beta": "TRL < 0.19 defaulted to beta=0.04 (a KL term against the initial policy)",
    "loss_type": "TRL 0.17-0.21 defaulted to loss_type=bnpo, TRL < 0.16 averaged per sequence (loss_type=grpo)",
}

# keys whose presence marks a TRL GRPOConfig (TRL's own names, none of them a grpokit section)
SIGNATURE = {
    "learning_rate", "num_generations", "per_device_train_batch_size", "beta", "epsilon", "epsilon_high",
    "loss_type", "max_completion_length", "scale_rewards", "importance_sampling_level", "gradient_accumulation_steps",
    "output_dir", "model_name_or_path", "num_iterations", "max_steps", "reward_funcs", "dataset_name",
}  # fmt: skip

# bookkeeping keys: logging, hub, evaluation schedule, serving and distribution details
IGNORED = {
    "logging_steps", "logging_strategy", "logging_first_step", "logging_dir", "log_level", "log_completions",
    "num_completions_to_print", "log_unique_prompts", "wandb_log_unique_prompts", "push_to_hub", "hub_model_id",
    "hub_strategy", "hub_private_repo", "hub_token", "overwrite_output_dir", "do_train", "do_eval", "do_predict",
    "eval_strategy", "evaluation_strategy", "save_strategy", "run_name", "disable_tqdm", "dataloader_num_workers",
    "dataloader_pin_memory", "dataloader_drop_last", "remove_unused_columns", "ddp_find_unused_parameters",
    "ddp_timeout", "fsdp", "fsdp_config", "deepspeed", "local_rank", "tf32", "bf16_full_eval",
    "save_safetensors", "include_tokens_per_second", "vllm_gpu_memory_utilization", "vllm_mode",
    "vllm_server_host", "vllm_server_port", "vllm_server_timeout", "vllm_server_base_url",
    "vllm_tensor_parallel_size", "vllm_enable_sleep_mode", "per_device_eval_batch_size", "eval_accumulation_steps",
    "num_generations_eval", "shuffle_dataset", "ds3_gather_for_generation", "log_completions_hub_repo",
    "cache_implementation", "dataset_test_split", "dataset_config", "eval_on_start", "save_on_each_node",
    "gradient_checkpointing_kwargs", "hub_model_revision", "push_to_hub_revision", "overwrite_hub_revision",
    "wandb_entity", "wandb_project", "wandb_run_group", "benchmarks", "callbacks", "log_on_each_node",
}  # fmt: skip

TRACKERS = ("tensorboard", "wandb", "mlflow", "trackio")


class Unsupported(ValueError):
    """A foreign value with no grpokit equivalent."""


def _scheduler(v: Any) -> str:
    """transformers' schedule names; the warm-up of `constant_with_warmup` comes from warmup_steps."""
    names = {"linear": "linear", "cosine": "cosine", "constant": "constant", "constant_with_warmup": "constant"}
    if v not in names:
        raise Unsupported(v)
    return names[v]


def _dtype(v: Any) -> str:
    """`torch_dtype` / `dtype` (ModelConfig): from_pretrained's dtype, as grpokit's model.dtype names it."""
    names = {"auto": "auto", "float32": "float32", "bfloat16": "bfloat16", None: "auto"}
    if v not in names:
        raise Unsupported(v)
    return names[v]


def report_to(v: Any) -> list[str]:
    """TRL/transformers `report_to`: "none", "all", a name or a list; names grpokit has no tracker for fail."""
    names = [] if v in (None, "none", []) else [v] if isinstance(v, str) else [n for n in v if n not in (None, "none")]
    if "all" in names:
        return list(TRACKERS)
    if [n for n in names if n not in TRACKERS]:
        raise Unsupported(v)
    return names


def _truthy_precision(v: Any) -> str:
    return "bf16-autocast" if v else "fp32"


# TRL key -> (grpokit key, converter); each applies only when the grpokit key exists in this version
RENAMES: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "learning_rate": ("train.lr", float),
    "adam_beta1": ("train.adam_beta1", float),
    "adam_beta2": ("train.adam_beta2", float),
    "weight_decay": ("train.weight_decay", float),
    "max_grad_norm": ("train.max_grad_norm", float),
    "lr_scheduler_type": ("train.lr_schedule", _scheduler),
    "warmup_steps": ("train.warmup_steps", int),
    "seed": ("train.seed", int),
    "save_total_limit": ("train.save_total_limit", lambda v: 0 if v is None else int(v)),  # TRL's None: keep all
    "save_only_model": ("train.save_only_model", bool),
    "output_dir": ("train.output_dir", str),
    "report_to": ("train.report_to", report_to),
    "temperature": ("rollout.temperature", float),
    "top_p": ("rollout.top_p", float),
    "top_k": ("rollout.top_k", int),
    "max_completion_length": ("rollout.max_new_tokens", int),
    "max_prompt_length": ("data.max_prompt_tokens", int),
    "use_vllm": ("rollout.engine", lambda v: "vllm" if v else "hf"),
    "gradient_checkpointing": ("model.gradient_checkpointing", bool),
    "bf16": ("model.precision", _truthy_precision),
    "model_name_or_path": ("model.name", str),
    "trust_remote_code": ("model.trust_remote_code", bool),
    "attn_implementation": ("model.attn_implementation", str),
    "dataset_name": ("data.task", str),
    "dataset_train_split": ("data.split", str),
    "dataset_prompt_column": ("data.prompt_key", str),
    "system_prompt": ("data.system_prompt", str),
    "torch_dtype": ("model.dtype", _dtype),
    "dtype": ("model.dtype", _dtype),
    "reward_weights": ("reward.weights", lambda v: [float(x) for x in v]),
    "entropy_coef": ("algo.entropy_coef", float),
    "mask_truncated_completions": ("algo.overlong_filter", bool),
}


def is_trl(data: dict[str, Any]) -> bool:
    """A flat mapping with TRL's names and no grpokit section."""
    return bool(SIGNATURE & set(data)) and not any(isinstance(v, dict) and k in _SECTIONS for k, v in data.items())


_SECTIONS = {"model", "data", "rollout", "reward", "algo", "train", "critic", "monitor"}


def translate(data: dict[str, Any], path: str, valid_keys: set[str]) -> Translation:
    """The grpokit keys for a TRL GRPOConfig mapping; every TRL key is mapped, unsupported or ignored."""
    t = Translation(SOURCE, path)
    cfg = {**DEFAULTS, **data}
    t.defaults = {k: v for k, v in DEFAULTS.items() if k not in data}
    per_step = _batches(cfg, data, t)
    _policy_loss(cfg, t)
    _advantage_and_kl(cfg, data, t, per_step)
    _lora(data, t, valid_keys)
    _rewards(data, t)
    translate_precision(data, t)
    if data.get("model_revision", "main") in (None, "main") and "model_revision" in data:
        t.ignored["model_revision"] = data["model_revision"]  # the default revision: no effect
    for key, (target, conv) in RENAMES.items():
        if key not in cfg or target in t.keys or target not in valid_keys:
            continue
        try:
            t.set(key, **{target.replace(".", "__"): conv(cfg[key])})
        except Unsupported:
            t.unsupported[key] = cfg[key]
    for key, value in data.items():
        if key not in t.mapped and key not in t.unsupported and key not in t.ignored:
            (t.ignored if key in IGNORED else t.unsupported)[key] = value
    t.defaults = {k: v for k, v in t.defaults.items() if k in t.mapped}
    for key, was in OLD_DEFAULTS.items():
        if key in t.defaults:
            t.notes.append(
                f"the file does not set {key}: TRL 1.x's {key}={t.defaults[key]!r} is assumed; {was}; "
                f"a recipe written for that TRL meant it: pin it with {key}: <value> in the file (or --{key})"
            )
    t.recipe = "gspo" if t.keys.get("algo.policy_loss") == "gspo" else None
    return t


def _batches(cfg: dict[str, Any], data: dict[str, Any], t: Translation) -> int:
    """Prompts per step, group size, mini-batches, micro-batch, epochs and the step counts; returns the number of
    TRL optimizer steps one grpokit step makes (mini_batches x num_iterations)."""
    g, per_dev, accum = (
        int(cfg["num_generations"]),
        int(cfg["per_device_train_batch_size"]),
        int(cfg["gradient_accumulation_steps"]),
    )
    spg = int(cfg.get("steps_per_generation") or accum)
    gen = int(cfg.get("generation_batch_size") or per_dev * spg)
    src = tuple(k for k in ("generation_batch_size", "steps_per_generation") if cfg.get(k))
    if gen % g:
        raise ValueError(
            f"{t.path}: the generation batch ({gen} completions: generation_batch_size, or per_device_train_batch_size "
            f"x steps_per_generation) is not a multiple of num_generations={g}; TRL refuses it too"
            + ("" if src else _processes_hint(per_dev, spg, g))
        )
    if gen % (per_dev * accum):
        raise ValueError(
            f"{t.path}: the generation batch ({gen} completions) is not a multiple of per_device_train_batch_size x "
            f"gradient_accumulation_steps = {per_dev * accum}; make it one"
        )
    mini = gen // (per_dev * accum)
    t.set(("per_device_train_batch_size", "num_generations", *src), rollout__prompts_per_step=gen // g)
    t.set("num_generations", rollout__group_size=g)
    t.set(("per_device_train_batch_size", "gradient_accumulation_steps", *src), train__mini_batches=mini)
    t.set("per_device_train_batch_size", train__micro_batch_size=per_dev)
    t.set("num_iterations", train__ppo_epochs=int(cfg["num_iterations"]))
    per_step = mini * int(cfg["num_iterations"])
    steps = int(data.get("max_steps", -1) or -1)
    if steps > 0:
        t.set("max_steps", train__steps=math.ceil(steps / per_step))
        if data.get("warmup_ratio"):
            t.set("warmup_ratio", train__warmup_steps=round(float(data["warmup_ratio"]) * steps))
    elif "num_train_epochs" in data:
        t.unsupported["num_train_epochs"] = data["num_train_epochs"]
        t.notes.append("grpokit stops after train.steps (--steps), not after dataset epochs: set max_steps")
    for key, target in (("save_steps", "train__save_every"), ("eval_steps", "train__eval_every")):
        if data.get(key):
            t.set(key, **{target: max(1, round(int(data[key]) / per_step))})
    t.notes.append(
        f"per_device_train_batch_size counts completions: {gen} per generation = {gen // g} prompts x {g} samples, "
        f"trained as {mini} mini-batch(es) of {per_dev * accum} (one process)"
    )
    if per_step > 1:
        t.notes.append(f"one grpokit step = {per_step} TRL optimizer steps: max/save/eval steps divided by {per_step}")
    return per_step


def _processes_hint(per_dev: int, spg: int, g: int) -> str:
    """Where a recipe's batch divides: TRL's generation batch is per_device x processes x steps_per_generation, so a
    recipe written for N processes (open-r1 launches its recipes with `accelerate launch --num_processes=7`)
    divides there and not on grpokit's one process; the per-device value that keeps its batch on one."""
    n = next((n for n in range(2, 65) if per_dev * n * spg % g == 0), None)
    if n is None:
        return f"; set per_device_train_batch_size to a multiple of num_generations={g}"
    return (
        f"; the recipe divides on {n} processes (per_device_train_batch_size x processes x steps_per_generation = "
        f"{per_dev} x {n} x {spg} = {per_dev * n * spg} = {per_dev * n * spg // g} prompts x {g}), as its launch "
        f"command runs it; grpokit trains it on one process: set per_device_train_batch_size={per_dev * n} "
        f"({per_dev} x {n}, the same batch) or --per_device_train_batch_size {g}"
    )


def _policy_loss(cfg: dict[str, Any], t: Translation) -> None:
    """loss_type + importance_sampling_level + epsilon/epsilon_high/delta -> policy loss, its clips, aggregation."""
    loss_type, level = cfg["loss_type"], cfg["importance_sampling_level"]
    eps = float(cfg["epsilon"])
    eps_high = float(cfg["epsilon_high"]) if cfg.get("epsilon_high") is not None else eps
    if loss_type == "cispo":
        t.set(("loss_type", "epsilon_high"), algo__policy_loss="cispo", algo__cispo_cap_mode="absolute")
        t.set(("loss_type", "epsilon_high"), algo__cispo_cap=eps_high, algo__loss_agg="token-mean")
        t.set("epsilon")  # TRL's cispo has no lower clip
        return
    aggregation = {"grpo": "seq-mean-token-mean", "dapo": "token-mean", "bnpo": "token-mean"}
    aggregation["dr_grpo"] = "constant-norm"
    if loss_type not in aggregation:
        t.unsupported["loss_type"] = loss_type
    else:
        t.set("loss_type", algo__loss_agg=aggregation[loss_type])
        if loss_type == "dr_grpo":
            t.set(("loss_type", "max_completion_length"), algo__l_norm=float(cfg["max_completion_length"]))
    losses = {"token": "ppo_clip", "sequence": "gspo", "sequence_token": "gspo_token"}
    if level not in losses:
        t.unsupported["importance_sampling_level"] = level
        return
    t.set("importance_sampling_level", algo__policy_loss=losses[level])
    t.set("epsilon", algo__eps_low=eps)
    t.set(("epsilon_high",) if cfg.get("epsilon_high") is not None else ("epsilon",), algo__eps_high=eps_high)
    if cfg.get("delta") is not None:
        if level == "token":
            t.set("delta", algo__delta=float(cfg["delta"]))
        else:
            t.unsupported["delta"] = cfg["delta"]


def _advantage_and_kl(cfg: dict[str, Any], data: dict[str, Any], t: Translation, per_step: int) -> None:
    """scale_rewards -> advantage scaling; beta -> KL in the loss against a frozen (or synced) reference."""
    scale = {True: "group", "group": "group", "batch": "batch", False: "none", "none": "none"}.get(cfg["scale_rewards"])
    if scale is None:
        t.unsupported["scale_rewards"] = cfg["scale_rewards"]
    elif scale == "none":  # mean-only: Dr. GRPO's estimator (no std, so no epsilon)
        t.set("scale_rewards", algo__advantage="dr_grpo")
    else:
        t.set("scale_rewards", algo__advantage="grpo", algo__adv_scale=scale, algo__adv_eps=1e-4)
    beta = float(cfg["beta"])
    t.set("beta", algo__kl_coef=beta, algo__reference="frozen" if beta > 0 else "none")
    if beta > 0:
        t.set("beta", algo__kl_estimator="k3", algo__kl_placement="loss")
        if data.get("use_bias_correction_kl", True):
            t.notes.append(
                "TRL 1.x weights the KL term by the importance ratio (use_bias_correction_kl); grpokit's k3 term "
                "is not weighted (same value on-policy, different gradient)"
            )
            if "use_bias_correction_kl" in data:
                t.unsupported["use_bias_correction_kl"] = data["use_bias_correction_kl"]
    if data.get("sync_ref_model"):
        alpha, every = float(data.get("ref_model_mixup_alpha", 0.6)), int(data.get("ref_model_sync_steps", 512))
        keys = ("sync_ref_model", "ref_model_mixup_alpha", "ref_model_sync_steps")
        if alpha == 1.0:
            t.set(keys, algo__reference="sync", algo__ref_sync_every=max(1, round(every / per_step)))
        elif every == 1:
            t.set(keys, algo__reference="ema", algo__ref_ema_eta=1.0 - alpha)
        else:
            t.unsupported.update({k: data.get(k) for k in keys if k in data})
    q = data.get("top_entropy_quantile")
    if q is not None and float(q) < 1.0:
        t.set("top_entropy_quantile", algo__top_entropy_rho=float(q))
    elif q is not None:
        t.set("top_entropy_quantile")
    agg = data.get("multi_objective_aggregation")
    if agg is not None:
        (t.set("multi_objective_aggregation") if agg == "sum_then_normalize" else t.unsupported.update({
            "multi_objective_aggregation": agg
        }))  # fmt: skip


def _rewards(data: dict[str, Any], t: Translation) -> None:
    """`reward_funcs` (+ the grpokit extension `reward_module`): each name to a function that exists, or refused."""
    module = data.get("reward_module")
    if "reward_funcs" not in data:
        if module:
            t.unsupported["reward_module"] = module
            t.notes.append("reward_module names where reward_funcs live, and the file sets no reward_funcs")
        return
    names = data["reward_funcs"]
    names = [names] if isinstance(names, str) else list(names or [])
    found, missing = trl_rewards.resolve(names, module)
    if missing:
        t.unsupported["reward_funcs"] = data["reward_funcs"]
        t.refuse(trl_rewards.fix(missing, module), "reward_funcs", lifted_by="reward.functions")
        return
    keys = ("reward_funcs", "reward_module") if module else "reward_funcs"
    # TRL's rewards read the dataset's columns by name (accuracy_reward: `solution`); TRL has no answer column
    t.set(keys, reward__functions=found, data__answer_key=None)


def _lora(data: dict[str, Any], t: Translation, valid_keys: set[str]) -> None:
    """`trl grpo` ModelConfig LoRA keys (only with use_peft, as in TRL; TRL's defaults r 16, alpha 32)."""
    keys = ("use_peft", "lora_r", "lora_alpha", "lora_dropout", "lora_target_modules")
    if not data.get("use_peft"):
        t.ignored.update({k: data[k] for k in keys if k in data})  # no effect in TRL without use_peft either
        return
    t.set(keys, model__lora_r=int(data.get("lora_r", 16)), model__lora_alpha=int(data.get("lora_alpha", 32)))
    t.set(keys, model__lora_dropout=float(data.get("lora_dropout", 0.05)))
    if data.get("lora_target_modules"):
        target = data["lora_target_modules"]
        t.set("lora_target_modules", model__lora_target_modules=[target] if isinstance(target, str) else target)
