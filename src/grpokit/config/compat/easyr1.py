"""EasyR1 (hiyouga/EasyR1) `examples/config.yaml` keys -> grpokit keys, by meaning.

EasyR1 is a verl fork with its own layout: `worker.actor` / `worker.rollout` / `worker.reward` instead of
`actor_rollout_ref`, so it is recognised by its `worker` section (read as verl it lost `worker.rollout.n`, a group
of one). What differs in meaning (EasyR1's `verl/trainer/config.py`, `verl/workers/actor/config.py`):

* `data.rollout_batch_size` counts prompts (verl's `data.train_batch_size`), `worker.actor.global_batch_size`
  the prompts of one optimizer step (verl's `ppo_mini_batch_size`): mini_batches = rollout / global;
  `micro_batch_size_per_device_for_update` counts completions (`train.micro_batch_size`).
* clipping defaults to eps_low 0.2, eps_high 0.3 (`clip_ratio_low`/`_high`) with dual-clip at 3.0.
* KL: `algorithm.disable_kl` keeps none; `use_kl_loss` puts `kl_coef` x `kl_penalty` in the loss, otherwise in
  the reward (`algo.kl_placement=reward`).
* `data.train_files: hiyouga/math12k@train` is a datasets name and its split; `worker.reward.reward_function`
  `path.py:name` (no name: `main`, as EasyR1 reads it) is the reward, called by its own convention.
"""

from __future__ import annotations

from typing import Any

from .table import Spec, kl, per_batch, positive, unsupported
from .translation import Translation

A = "worker.actor."
DEFAULTS: dict[str, Any] = {
    "algorithm.adv_estimator": "grpo",
    "algorithm.disable_kl": False,
    "algorithm.use_kl_loss": False,
    "algorithm.kl_penalty": "kl",
    "algorithm.kl_coef": 1e-3,
    A + "clip_ratio_low": 0.2,
    A + "clip_ratio_high": 0.3,
    A + "clip_ratio_dual": 3.0,
    A + "loss_avg_mode": "token",
    A + "optim.lr": 1e-6,
    "worker.rollout.n": 1,
}
ESTIMATORS = {"grpo": "grpo", "rloo": "rloo", "reinforce_plus_plus": "reinforce_pp", "remax": None, "gae": "gae"}
AGGREGATIONS = {"token": "token-mean", "seq": "seq-mean-token-mean"}


def _schedule(v: Any) -> str:
    return v if v in ("constant", "cosine") else unsupported(v)


RENAMES = {
    "data.rollout_batch_size": ("rollout.prompts_per_step", int),
    "data.max_prompt_length": ("data.max_prompt_tokens", int),
    "data.max_response_length": ("rollout.max_new_tokens", int),
    "data.prompt_key": ("data.prompt_key", str),
    "data.answer_key": ("data.answer_key", str),
    "data.seed": ("train.seed", int),
    "worker.rollout.n": ("rollout.group_size", int),
    "worker.rollout.temperature": ("rollout.temperature", float),
    "worker.rollout.top_p": ("rollout.top_p", float),
    A + "model.model_path": ("model.name", str),
    A + "model.lora.rank": ("model.lora_r", int),
    A + "model.trust_remote_code": ("model.trust_remote_code", bool),
    A + "model.enable_gradient_checkpointing": ("model.gradient_checkpointing", bool),
    A + "optim.lr": ("train.lr", float),
    A + "optim.weight_decay": ("train.weight_decay", float),
    A + "optim.lr_scheduler_type": ("train.lr_schedule", _schedule),
    A + "max_grad_norm": ("train.max_grad_norm", float),
    A + "ppo_epochs": ("train.ppo_epochs", int),
    A + "micro_batch_size_per_device_for_update": ("train.micro_batch_size", int),
    A + "clip_ratio_low": ("algo.eps_low", float),
    A + "clip_ratio_high": ("algo.eps_high", float),
    A + "clip_ratio_dual": ("algo.dual_clip_c", float),
    A + "loss_avg_mode": ("algo.loss_agg", lambda v: AGGREGATIONS.get(v) or unsupported(v)),
    "trainer.max_steps": ("train.steps", int),
    "trainer.save_freq": ("train.save_every", positive),
    "trainer.val_freq": ("train.eval_every", positive),
}

IGNORED = (
    "*fsdp.*", "*offload.*", "*padding_free", "*dynamic_batching", "*ulysses*", "*micro_batch_size_per_device_for_"
    "experience", "*gpu_memory_utilization", "*enforce_eager", "*enable_chunked_prefill", "*tensor_parallel_size",
    "*disable_tqdm", "*val_override_config.*", "worker.ref.*", "trainer.project_name", "trainer.experiment_name",
    "trainer.logger", "trainer.nnodes", "trainer.n_gpus_per_node", "trainer.val_before_train", "trainer.val_only",
    "trainer.val_generations_to_log", "trainer.save_limit", "trainer.save_model_only", "trainer.*checkpoint*",
    "data.shuffle", "data.val_batch_size", "data.filter_overlong_prompts", "data.image_key", "data.video_key",
    "data.image_dir", "data.video_fps", "data.min_pixels", "data.max_pixels", "*freeze_vision_tower",
    "worker.rollout.limit_images", "*optim.strategy", "*use_torch_compile", "algorithm.filter_*",
    "*lora.alpha", "*lora.target_modules", "*lora.exclude_modules", "trainer.max_try_make_batch",
)  # fmt: skip


def is_easyr1(data: dict[str, Any]) -> bool:
    """A `worker` section (nested or dotted): verl has `actor_rollout_ref` there."""
    return any(str(k).split(".")[0] == "worker" for k in data)


def split_at(value: Any) -> tuple[str, str | None]:
    """EasyR1's `name@split` -> (name, split); a path without `@` keeps no split."""
    text = str(value)
    if "@" in text and "/" in text.split("@", 1)[0]:
        name, split = text.rsplit("@", 1)
        return name, split
    return text, None


def _special(cfg: dict[str, Any], flat: dict[str, Any], t: Translation) -> None:
    est = cfg["algorithm.adv_estimator"]
    if ESTIMATORS.get(est):
        t.set("algorithm.adv_estimator", algo__advantage=ESTIMATORS[est])
    else:
        t.unsupported["algorithm.adv_estimator"] = est
    keys = ("algorithm.disable_kl", "algorithm.use_kl_loss", "algorithm.kl_coef", "algorithm.kl_penalty")
    coef = 0.0 if cfg["algorithm.disable_kl"] else cfg["algorithm.kl_coef"]
    kl(t, keys, coef, cfg["algorithm.kl_penalty"], in_loss=bool(cfg["algorithm.use_kl_loss"]))
    per_batch(t, ("data.rollout_batch_size", A + "global_batch_size"), flat.get("data.rollout_batch_size"),
              flat.get(A + "global_batch_size"), completions=False, n=1)  # fmt: skip
    if "algorithm.online_filtering" in flat:
        on = bool(flat["algorithm.online_filtering"])
        t.set("algorithm.online_filtering", **({"algo__group_filter": "dynamic_sampling"} if on else {}))
    if not flat.get(A + "optim.lr_warmup_ratio"):
        t.set(A + "optim.lr_warmup_ratio")  # 0: no warm-up, grpokit's default
    _data(flat, t)
    spec = flat.get("worker.reward.reward_function") or flat.get("worker.reward.score_function")
    if spec:
        path, _, name = str(spec).partition(":")
        keys = ("worker.reward.reward_function", "worker.reward.score_function", "worker.reward.reward_type")
        t.set(tuple(k for k in keys if k in flat), reward__functions=[f"{path}:{name or 'main'}"])


def _data(flat: dict[str, Any], t: Translation) -> None:
    """`name@split` train and validation sets; grpokit reads its eval set from a file or the train split's dataset."""
    if flat.get("data.train_files"):
        name, split = split_at(flat["data.train_files"])
        t.set("data.train_files", data__task=name, **({"data__split": split} if split else {}))
    if flat.get("data.val_files"):
        name, split = split_at(flat["data.val_files"])
        if split:  # a hub split grpokit's eval set cannot name
            t.unsupported["data.val_files"] = flat["data.val_files"]
        else:
            t.set("data.val_files", data__eval_data=name)


SPEC = Spec("EasyR1", RENAMES, DEFAULTS, IGNORED, _special)
