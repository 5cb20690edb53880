"""OpenRLHF (OpenRLHF/OpenRLHF) `openrlhf.cli.train_ppo_ray` flags -> grpokit keys, by meaning.

OpenRLHF takes argparse flags, dotted since 0.9 (`--rollout.n_samples_per_prompt 8`), flat before
(`--n_samples_per_prompt 8`, renamed here by `LEGACY`). What differs in meaning (`openrlhf/cli/train_ppo_ray.py`):

* `rollout.batch_size` counts prompts, `train.batch_size` the completions of one optimizer step:
  mini_batches = rollout.batch_size x n_samples_per_prompt / train.batch_size; `train.micro_batch_size` counts
  completions.
* `algo.advantage.estimator`: group_norm is GRPO's, reinforce_baseline verl's (and grpokit's)
  reinforce_pp_baseline, the default gae needs a critic.
* KL: `algo.kl.init_coef` (0.01) x `algo.kl.estimator` (k1) in the reward, or in the loss with `algo.kl.use_loss`.
* `actor.eps_clip` (0.2) is both clips, `actor.eps_clip_low_high` the pair.
* the reward: `reward.remote_url` (an HTTP reward server, or a `reward_func` file) and `train.agent_func_path` (an
  agent script) are OpenRLHF programs, named as not supported: give grpokit the function (`--set
  reward.functions=[reward_func.py:reward_func]`, OpenRLHF's convention) or the environment (`agent.environment`).
"""

from __future__ import annotations

from typing import Any

from .table import Spec, kl, per_batch, positive, unsupported
from .translation import Translation

DEFAULTS: dict[str, Any] = {
    "algo.advantage.estimator": "gae",
    "algo.kl.init_coef": 0.01,
    "algo.kl.estimator": "k1",
    "algo.kl.use_loss": False,
    "actor.eps_clip": 0.2,
    "actor.adam.lr": 1e-6,
    "rollout.n_samples_per_prompt": 1,
    "rollout.batch_size": 1024,
    "train.batch_size": 128,
}
ESTIMATORS = {"group_norm": "grpo", "rloo": "rloo", "reinforce_baseline": "reinforce_pp_baseline",
              "reinforce": "reinforce_pp", "dr_grpo": "dr_grpo", "gae": "gae"}  # fmt: skip
LOSSES = {"ppo": "ppo_clip", "gspo": "gspo"}
RENAMES = {
    "actor.model_name_or_path": ("model.name", str),
    "actor.adam.lr": ("train.lr", float),
    "actor.max_norm": ("train.max_grad_norm", float),
    "actor.entropy_coef": ("algo.entropy_coef", float),
    "actor.policy_loss_type": ("algo.policy_loss", lambda v: LOSSES.get(v) or unsupported(v)),
    "actor.gradient_checkpointing_enable": ("model.gradient_checkpointing", bool),
    "data.prompt_dataset": ("data.task", str),
    "data.input_key": ("data.prompt_key", str),
    "data.label_key": ("data.answer_key", str),
    "rollout.batch_size": ("rollout.prompts_per_step", int),
    "rollout.n_samples_per_prompt": ("rollout.group_size", int),
    "rollout.max_new_tokens": ("rollout.max_new_tokens", int),
    "rollout.temperature": ("rollout.temperature", float),
    "rollout.top_p": ("rollout.top_p", float),
    "train.micro_batch_size": ("train.micro_batch_size", int),
    "train.seed": ("train.seed", int),
    "ckpt.save_steps": ("train.save_every", positive),
    "eval.steps": ("train.eval_every", positive),
    "algo.dynamic_filtering_enable": ("algo.group_filter", lambda v: "dynamic_sampling" if v else "all"),
}
# the flat flags of OpenRLHF before 0.9 -> their dotted names
LEGACY = {
    "pretrain": "actor.model_name_or_path", "actor_learning_rate": "actor.adam.lr",
    "prompt_data": "data.prompt_dataset",
    "input_key": "data.input_key", "label_key": "data.label_key", "rollout_batch_size": "rollout.batch_size",
    "n_samples_per_prompt": "rollout.n_samples_per_prompt", "train_batch_size": "train.batch_size",
    "micro_train_batch_size": "train.micro_batch_size", "generate_max_len": "rollout.max_new_tokens",
    "advantage_estimator": "algo.advantage.estimator", "init_kl_coef": "algo.kl.init_coef",
    "kl_estimator": "algo.kl.estimator", "use_kl_loss": "algo.kl.use_loss", "eps_clip": "actor.eps_clip",
    "remote_rm_url": "reward.remote_url", "agent_func_path": "train.agent_func_path", "save_steps": "ckpt.save_steps",
    "temperature": "rollout.temperature", "top_p": "rollout.top_p", "seed": "train.seed",
}  # fmt: skip
IGNORED = (
    "ckpt.*", "ref.*", "vllm.*", "ds.*", "logger.*", "actor.num_nodes", "actor.num_gpus_per_node", "train.colocate_all",
    "train.dynamic_batch_enable", "*.max_tokens_per_gpu", "rollout.micro_batch_size", "data.apply_chat_template",
    "data.max_samples", "data.max_len", "algo.dynamic_filtering_range", "eval.*", "wandb.*", "use_wandb",
    "colocate_all_models", "vllm_*", "zero_stage", "bf16", "flash_attn", "packing_samples", "save_path",
)  # fmt: skip


def normalise(data: dict[str, Any]) -> dict[str, Any]:
    """Flat pre-0.9 flags renamed to the dotted names."""
    return {LEGACY.get(k, k): v for k, v in data.items()}


def is_openrlhf(data: dict[str, Any]) -> bool:
    keys = set(normalise(data))
    return bool(keys & {"actor.model_name_or_path", "rollout.n_samples_per_prompt", "algo.advantage.estimator"}) and (
        "pretrain" in data or any(k.startswith(("actor.", "algo.kl.", "algo.advantage.")) for k in keys)
    )


def _special(cfg: dict[str, Any], flat: dict[str, Any], t: Translation) -> None:
    est = cfg["algo.advantage.estimator"]
    if est in ESTIMATORS:
        t.set("algo.advantage.estimator", algo__advantage=ESTIMATORS[est])
    else:
        t.unsupported["algo.advantage.estimator"] = est
    keys = ("algo.kl.init_coef", "algo.kl.use_loss", "algo.kl.estimator")
    kl(t, keys, cfg["algo.kl.init_coef"], cfg["algo.kl.estimator"], in_loss=bool(cfg["algo.kl.use_loss"]))
    pair = cfg.get("actor.eps_clip_low_high") or [cfg["actor.eps_clip"]] * 2
    src = ("actor.eps_clip_low_high",) if "actor.eps_clip_low_high" in cfg else ("actor.eps_clip",)
    t.set(src, algo__eps_low=float(pair[0]), algo__eps_high=float(pair[1]))
    n = int(cfg["rollout.n_samples_per_prompt"])
    per_batch(t, ("rollout.batch_size", "train.batch_size"), cfg["rollout.batch_size"], cfg["train.batch_size"],
              completions=True, n=n)  # fmt: skip
    for key, what in (("reward.remote_url", "reward server or reward_func file"), ("train.agent_func_path", "agent")):
        if flat.get(key):
            t.unsupported[key] = flat[key]
            t.notes.append(
                f"{key} is an OpenRLHF {what}; grpokit calls a reward function itself: --set "
                "reward.functions=[reward_func.py:reward_func] (OpenRLHF's convention), or agent.environment"
            )


def translate(data: dict[str, Any], path: str, valid_keys: set[str]) -> Translation:
    from .table import translate as by_table

    return by_table(SPEC, normalise(data), path, valid_keys)


SPEC = Spec("OpenRLHF", RENAMES, DEFAULTS, IGNORED, _special)
