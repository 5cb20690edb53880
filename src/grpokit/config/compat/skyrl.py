"""SkyRL (NovaSky-AI/SkyRL) `skyrl.train.entrypoints.main_base` overrides -> grpokit keys, by meaning.

SkyRL takes Hydra-style `key=value` overrides, as verl does, under `trainer.*`, `generator.*` and `environment.*`
(read as verl they lost `generator.n_samples_per_prompt`, a group of one). What differs in meaning
(`skyrl/train/config/config.py`):

* `trainer.train_batch_size` and `trainer.policy_mini_batch_size` count prompts (x `n_samples_per_prompt`
  completions): mini_batches = train / mini; `micro_train_batch_size_per_gpu` counts completions.
* KL: `trainer.algorithm.use_kl_loss` (default true) puts `kl_loss_coef` (0.001) x `kl_estimator_type` (k3) in
  the loss; `use_kl_in_reward` in the reward.
* the reward is the environment's: `environment.env_class=gsm8k` scores with the '#### answer' check
  (`skyrl_gym/envs/gsm8k`, `utils.compute_score`) on the row's `reward_spec.ground_truth`, which is grpokit's
  built-in `gsm8k` reward; another env class has no grpokit counterpart here and is refused by name.
"""

from __future__ import annotations

from typing import Any

from .table import Spec, kl, per_batch, positive, unsupported
from .translation import Translation

T, G = "trainer.", "generator."
ALG = T + "algorithm."
DEFAULTS: dict[str, Any] = {
    ALG + "advantage_estimator": "grpo",
    ALG + "use_kl_loss": True,
    ALG + "use_kl_in_reward": False,
    ALG + "kl_loss_coef": 0.001,
    ALG + "kl_estimator_type": "k3",
    ALG + "eps_clip_low": 0.2,
    ALG + "eps_clip_high": 0.2,
    ALG + "loss_reduction": "token_mean",
    T + "policy.optimizer_config.lr": 1e-6,
    G + "n_samples_per_prompt": 5,
}
ESTIMATORS = {"grpo": "grpo", "rloo": "rloo", "reinforce++": "reinforce_pp", "gae": "gae"}
REDUCTIONS = {"token_mean": "token-mean", "sequence_mean": "seq-mean-token-mean",
              "seq_mean_token_sum_norm": "constant-norm"}  # fmt: skip
ENV_REWARDS = {"gsm8k": ("gsm8k", "reward_spec.ground_truth")}  # env class -> grpokit reward, answer column

RENAMES = {
    T + "train_batch_size": ("rollout.prompts_per_step", int),
    T + "max_prompt_length": ("data.max_prompt_tokens", int),
    T + "policy.model.path": ("model.name", str),
    T + "policy.optimizer_config.lr": ("train.lr", float),
    T + "policy.optimizer_config.weight_decay": ("train.weight_decay", float),
    T + "policy.optimizer_config.max_grad_norm": ("train.max_grad_norm", float),
    T + "update_epochs_per_batch": ("train.ppo_epochs", int),
    T + "micro_train_batch_size_per_gpu": ("train.micro_batch_size", int),
    T + "ckpt_interval": ("train.save_every", positive),
    T + "eval_interval": ("train.eval_every", positive),
    T + "seed": ("train.seed", int),
    ALG + "eps_clip_low": ("algo.eps_low", float),
    ALG + "eps_clip_high": ("algo.eps_high", float),
    ALG + "loss_reduction": ("algo.loss_agg", lambda v: REDUCTIONS.get(v) or unsupported(v)),
    G + "n_samples_per_prompt": ("rollout.group_size", int),
    G + "sampling_params.max_generate_length": ("rollout.max_new_tokens", int),
    G + "sampling_params.temperature": ("rollout.temperature", float),
    G + "sampling_params.top_p": ("rollout.top_p", float),
}

IGNORED = (
    "trainer.placement.*", "trainer.strategy", "generator.inference_engine.*", "generator.batched",
    "trainer.micro_forward_batch_size_per_gpu", "trainer.eval_batch_size", "trainer.eval_before_train",
    "trainer.logger", "trainer.project_name", "trainer.run_name", "trainer.resume_mode", "trainer.log_path",
    "trainer.ckpt_path", "trainer.export_path", "trainer.hf_save_interval", "*.fsdp_config.*",
    "generator.gpu_memory_utilization",
)  # fmt: skip


def is_skyrl(data: dict[str, Any]) -> bool:
    """`generator.*`, `trainer.policy.*`, `trainer.algorithm.*` or `environment.*` keys (nested or dotted)."""
    from .verl import flatten

    marks = ("generator.", "trainer.policy.", "trainer.algorithm.", "environment.")
    return any(k.startswith(marks) for k in flatten(data))


def _special(cfg: dict[str, Any], flat: dict[str, Any], t: Translation) -> None:
    est = cfg[ALG + "advantage_estimator"]
    if est in ESTIMATORS:
        t.set(ALG + "advantage_estimator", algo__advantage=ESTIMATORS[est])
    else:
        t.unsupported[ALG + "advantage_estimator"] = est
    in_loss, in_reward = bool(cfg[ALG + "use_kl_loss"]), bool(cfg[ALG + "use_kl_in_reward"])
    keys = (ALG + "use_kl_loss", ALG + "use_kl_in_reward", ALG + "kl_loss_coef", ALG + "kl_estimator_type")
    kl(t, keys, cfg[ALG + "kl_loss_coef"] if (in_loss or in_reward) else 0.0, cfg[ALG + "kl_estimator_type"], in_loss)
    n = int(cfg[G + "n_samples_per_prompt"])
    per_batch(t, (T + "train_batch_size", T + "policy_mini_batch_size"), flat.get(T + "train_batch_size"),
              flat.get(T + "policy_mini_batch_size"), completions=False, n=n)  # fmt: skip
    for key, target in (("data.train_data", "task"), ("data.val_data", "eval_data")):
        files = flat.get(key)
        files = [files] if isinstance(files, str) else list(files or [])
        if files:
            more = {"task": "extra_files", "eval_data": "extra_eval_files"}[target]
            t.set(key, **{f"data__{target}": str(files[0])}, **({f"data__{more}": files[1:]} if files[1:] else {}))
    env = flat.get("environment.env_class")
    if env in ENV_REWARDS:
        reward, answer = ENV_REWARDS[env]
        t.set("environment.env_class", reward__functions=[reward], data__answer_key=answer)
    elif env is not None:
        t.unsupported["environment.env_class"] = env
        t.refuse(
            f"environment.env_class={str(env)[:60]!r}: a SkyRL environment grpokit has no counterpart for (it has "
            f"{', '.join(ENV_REWARDS)}); give the reward: --set reward.functions=[module:function]",
            "environment.env_class",
            lifted_by="reward.functions",
        )


SPEC = Spec("SkyRL", RENAMES, DEFAULTS, IGNORED, _special)
