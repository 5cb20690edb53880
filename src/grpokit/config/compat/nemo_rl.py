"""NeMo-RL (NVIDIA-NeMo/RL) `examples/configs/grpo_*.yaml` keys -> grpokit keys, by meaning.

Recognised by its `grpo` section (`num_prompts_per_step`, `num_generations_per_prompt`), read before grpokit's
own sections (whose names, `data`, `policy`-less, it shares). What differs in meaning (NeMo-RL's
`nemo_rl/algorithms/grpo.py`, `loss_functions.py`):

* `grpo.num_prompts_per_step` x `num_generations_per_prompt` completions per step; `policy.train_global_batch_size`
  counts the completions of one optimizer step: mini_batches = prompts x generations / global;
  `policy.train_micro_batch_size` counts completions.
* `grpo.use_leave_one_out_baseline` is RLOO's leave-one-out mean, `normalize_rewards` the division by the std:
  both true -> grpokit's `rloo` advantage is not the same (it does not divide), so only the plain pair is mapped:
  (false, true) -> grpo, (true, false) -> rloo, (false, false) -> dr_grpo; (true, true) is not supported.
* `loss_fn.reference_policy_kl_penalty` x `reference_policy_kl_type` (k3 by default) is the KL in the loss;
  `ratio_clip_min`/`ratio_clip_max` the clips, `ratio_clip_c` dual-clip; `token_level_loss: false` averages
  per sequence.
* `policy.max_total_sequence_length` bounds prompt + response; `policy.generation.max_new_tokens` the response.
* `data.dataset_name` is one of NeMo-RL's registered datasets (OpenMathInstruct-2 ...) with its own prompt file:
  `ResponseDataset` with `train_data_path` is a file or hub name grpokit reads (`input_key`/`output_key` are the
  prompt and answer columns); the reward is `env.math` (math_verify: grpokit's built-in `math_verify`).
"""

from __future__ import annotations

from typing import Any

from .table import Spec, kl, per_batch, positive
from .translation import Translation

DEFAULTS: dict[str, Any] = {
    "grpo.normalize_rewards": True,
    "grpo.use_leave_one_out_baseline": False,
    "loss_fn.reference_policy_kl_type": "k3",
    "loss_fn.token_level_loss": True,
}
RENAMES = {
    "grpo.num_prompts_per_step": ("rollout.prompts_per_step", int),
    "grpo.num_generations_per_prompt": ("rollout.group_size", int),
    "grpo.max_num_steps": ("train.steps", int),
    "grpo.val_period": ("train.eval_every", positive),
    "grpo.seed": ("train.seed", int),
    "grpo.overlong_filtering": ("algo.overlong_filter", bool),
    "checkpointing.save_period": ("train.save_every", positive),
    "policy.model_name": ("model.name", str),
    "policy.train_micro_batch_size": ("train.micro_batch_size", int),
    "policy.max_grad_norm": ("train.max_grad_norm", float),
    "policy.optimizer.kwargs.lr": ("train.lr", float),
    "policy.optimizer.kwargs.weight_decay": ("train.weight_decay", float),
    "policy.generation.max_new_tokens": ("rollout.max_new_tokens", int),
    "policy.generation.temperature": ("rollout.temperature", float),
    "policy.generation.top_p": ("rollout.top_p", float),
    "policy.generation.top_k": ("rollout.top_k", lambda v: max(0, int(v))),
    "loss_fn.ratio_clip_min": ("algo.eps_low", float),
    "loss_fn.ratio_clip_max": ("algo.eps_high", float),
    "loss_fn.ratio_clip_c": ("algo.dual_clip_c", float),
    "loss_fn.token_level_loss": ("algo.loss_agg", lambda v: "token-mean" if v else "seq-mean-token-mean"),
    "data.input_key": ("data.prompt_key", str),
    "data.output_key": ("data.answer_key", str),
    "data.train.input_key": ("data.prompt_key", str),
    "data.train.output_key": ("data.answer_key", str),
}
DATASETS = {"ResponseDataset"}  # data.dataset_name values whose data grpokit reads from train_data_path
ENV_REWARDS = {"math": "math_verify"}  # env.<name> -> the grpokit reward that scores as it does

IGNORED = (
    "*dtensor_cfg.*", "*megatron_cfg.*", "*vllm_cfg.*", "*vllm_kwargs*", "*colocated.*", "*dynamic_batching.*",
    "*sequence_packing.*", "policy.generation_batch_size", "policy.logprob_batch_size", "policy.logprob_chunk_size",
    "policy.precision", "policy.tokenizer.*", "policy.make_sequence_length_divisible_by", "policy.hf_config_overrides",
    "policy.offload_optimizer_for_logprob", "policy.generation.backend", "policy.generation.stop_*", "logger.*",
    "cluster.*", "checkpointing.*", "grpo.val_*", "grpo.max_val_samples", "grpo.async_grpo.*", "env.*.num_workers",
    "env.*.math_verify_impl", "data.shuffle", "data.max_input_seq_length", "grpo.max_rollout_turns",
    "policy.optimizer.name", "policy.optimizer.kwargs.foreach", "policy.optimizer.kwargs.fused",
    "policy.optimizer.kwargs.eps", "policy.max_total_sequence_length", "data.num_workers",
    "data.use_multiple_dataloader",
    "data.train.split_validation_size", "data.train.seed", "data.default.*", "grpo.adv_estimator.normalize_rewards",
    "grpo.adv_estimator.use_leave_one_out_baseline",
)  # fmt: skip
ADVANTAGES = {(False, True): "grpo", (True, False): "rloo", (False, False): "dr_grpo"}


def is_nemo_rl(data: dict[str, Any]) -> bool:
    grpo = data.get("grpo")
    keys = set(grpo) if isinstance(grpo, dict) else {k.split(".", 1)[1] for k in data if k.startswith("grpo.")}
    return bool(keys & {"num_prompts_per_step", "num_generations_per_prompt"})


def _special(cfg: dict[str, Any], flat: dict[str, Any], t: Translation) -> None:
    pair = (bool(cfg["grpo.use_leave_one_out_baseline"]), bool(cfg["grpo.normalize_rewards"]))
    keys = ("grpo.use_leave_one_out_baseline", "grpo.normalize_rewards")
    if pair in ADVANTAGES:
        t.set(keys, algo__advantage=ADVANTAGES[pair])
    else:
        t.unsupported.update({k: True for k in keys})
        t.notes.append("a leave-one-out baseline divided by the group's std has no grpokit advantage")
    kl_keys = ("loss_fn.reference_policy_kl_penalty", "loss_fn.reference_policy_kl_type")
    kl(t, kl_keys, cfg.get(kl_keys[0]), cfg[kl_keys[1]])
    prompts, n = flat.get("grpo.num_prompts_per_step"), flat.get("grpo.num_generations_per_prompt") or 1
    per_batch(t, ("grpo.num_prompts_per_step", "policy.train_global_batch_size"), prompts,
              flat.get("policy.train_global_batch_size"), completions=True, n=int(n))  # fmt: skip
    _data_and_reward(flat, t)


def _data_and_reward(flat: dict[str, Any], t: Translation) -> None:
    # NeMo-RL's data section: `data.train.{dataset_name, data_path}` (since 0.4), `data.{dataset_name,
    # train_data_path}` before
    key = "data.train.dataset_name" if "data.train.dataset_name" in flat else "data.dataset_name"
    path_key = "data.train.data_path" if key == "data.train.dataset_name" else "data.train_data_path"
    name = flat.get(key)
    if name in DATASETS and flat.get(path_key):
        t.set((key, path_key), data__task=str(flat[path_key]))
        if flat.get("data.val_data_path"):
            t.set("data.val_data_path", data__eval_data=str(flat["data.val_data_path"]))
    elif name is not None:
        t.unsupported[key] = name
        t.notes.append(
            f"{key}={str(name)[:60]!r} is a NeMo-RL registered dataset with its own prompt file; "
            "grpokit reads a file or hub name: --task PATH (or data.dataset_name: ResponseDataset, train_data_path)"
        )
    envs = sorted({k.split(".")[1] for k in flat if k.startswith("env.")})
    known = [e for e in envs if e in ENV_REWARDS]
    if known:
        t.set(tuple(k for k in flat if k.startswith(f"env.{known[0]}.")), reward__functions=[ENV_REWARDS[known[0]]])
    for env in envs:
        if env not in ENV_REWARDS:
            t.unsupported[f"env.{env}"] = "a NeMo-RL environment grpokit has no counterpart for"


SPEC = Spec("NeMo-RL", RENAMES, DEFAULTS, IGNORED, _special)
