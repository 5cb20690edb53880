"""verl `ppo_trainer` keys (a Hydra YAML or `key=value` overrides) -> grpokit keys, by meaning.

What differs in meaning, and how it is translated:

* batch sizes: verl's `data.train_batch_size` and `actor.ppo_mini_batch_size` count *prompts* (verl multiplies
  them by `rollout.n`), `ppo_micro_batch_size_per_gpu` counts completions: prompts_per_step = train_batch_size,
  group_size = n, mini_batches = train_batch_size / ppo_mini_batch_size, micro_batch_size = the micro size.
* steps: one verl global step is one rollout batch, as in grpokit; verl steps its lr scheduler once per global
  step, grpokit once per optimizer step, so the warm-up is multiplied by mini_batches x ppo_epochs.
* clipping: `clip_ratio_low`/`clip_ratio_high` (default `clip_ratio`) are eps_low/eps_high; verl's vanilla loss
  always applies dual-clip with `clip_ratio_c` (default 3.0), so it is kept (`algo.dual_clip_c`).
* KL: `actor.use_kl_loss` puts `kl_loss_coef` x `kl_loss_type` in the loss; `algorithm.use_kl_in_reward` puts
  `kl_ctrl.kl_coef` x `kl_penalty` in the reward (`algo.kl_placement=reward`); neither keeps no reference.
* `algorithm.norm_adv_by_std_in_grpo: false` is Dr. GRPO's mean-only advantage (`algo.advantage=dr_grpo`).
* keys a file leaves unset take verl's defaults (verl 0.5) where they decide what is learned.
* `${...}` interpolations (verl's resolved config keeps dozens) are resolved first (`interpolation.py`); one that
  cannot be resolved is refused where it would reach grpokit, named as not supported elsewhere.
* `data.train_files` / `val_files` lists (GSM8K + MATH parquet) are `data.task` / `data.eval_data` and
  `data.extra_files` / `extra_eval_files`, read as one dataset.
* no `custom_reward_function`: verl scores each row with its default scorer for the row's `data_source`
  (`default_compute_score`); the data files' sources choose grpokit's matching built-in reward
  (`grpokit.rewards.verl_sources`: openai/gsm8k -> `gsm8k`, the same '#### answer' check), or, for data mixing
  sources scored differently (or files not readable here), `verl_data_source`, which picks per row as verl does;
  a source with no counterpart is refused in one line.
"""

from __future__ import annotations

import fnmatch
from typing import Any

from . import interpolation, verl_reward
from .translation import Translation
from .trl import Unsupported, report_to

SOURCE = "verl"
A = "actor_rollout_ref.actor."
R = "actor_rollout_ref.rollout."

DEFAULTS: dict[str, Any] = {
    "algorithm.adv_estimator": "gae",
    "algorithm.norm_adv_by_std_in_grpo": True,
    "algorithm.use_kl_in_reward": False,
    A + "clip_ratio": 0.2,
    A + "clip_ratio_c": 3.0,
    A + "loss_agg_mode": "token-mean",
    A + "use_kl_loss": False,
    A + "ppo_epochs": 1,
    A + "optim.lr": 1e-6,
    A + "optim.weight_decay": 0.01,
    A + "grad_clip": 1.0,
    R + "n": 1,
    R + "temperature": 1.0,
}

SIGNATURE_PREFIXES = ("actor_rollout_ref", "algorithm", "trainer", "custom_reward_function", "reward_model")

IGNORED = [
    "*fsdp_config*", "*megatron*", "*log_prob_*", "*gpu_memory_utilization", "*tensor_model_parallel_size",
    "trainer.n_gpus_per_node", "trainer.nnodes", "trainer.project_name", "trainer.experiment_name",
    "trainer.val_before_train", "trainer.critic_warmup", "*use_remove_padding", "*use_dynamic_bsz",
    "*ppo_max_token_len_per_gpu", "*enforce_eager", "*free_cache_engine", "*.strategy", "actor_rollout_ref.ref.*",
    "*load_format", "*max_num_batched_tokens", "*enable_chunked_prefill", "data.filter_overlong_prompts",
    "data.truncation", "data.reward_fn_key", "data.shuffle", "data.return_raw_chat", "reward_model.reward_manager",
    "trainer.resume_mode", "*.ulysses_sequence_parallel_size", "*rollout.mode", "*checkpoint.*", "data.val_batch_size",
    "data.dataloader_num_workers", "*val_kwargs.*", "hydra.*", "ray_init.*", "trainer.device",
]  # fmt: skip

# verl key -> grpokit key, converter
RENAMES: dict[str, tuple[str, Any]] = {
    "data.train_batch_size": ("rollout.prompts_per_step", int),
    "data.max_response_length": ("rollout.max_new_tokens", int),
    "data.max_prompt_length": ("data.max_prompt_tokens", int),
    "data.prompt_key": ("data.prompt_key", str),
    "data.seed": ("train.seed", int),
    R + "n": ("rollout.group_size", int),
    R + "temperature": ("rollout.temperature", float),
    R + "top_p": ("rollout.top_p", float),
    R + "top_k": ("rollout.top_k", lambda v: max(0, int(v))),
    R + "name": ("rollout.engine", lambda v: {"vllm": "vllm", "hf": "hf"}.get(v) or _unsupported(v)),
    A + "optim.lr": ("train.lr", float),
    A + "optim.weight_decay": ("train.weight_decay", float),
    A + "grad_clip": ("train.max_grad_norm", float),
    A + "ppo_epochs": ("train.ppo_epochs", int),
    A + "ppo_micro_batch_size_per_gpu": ("train.micro_batch_size", int),
    A + "entropy_coeff": ("algo.entropy_coef", float),
    A + "optim.warmup_style": ("train.lr_schedule", lambda v: _schedule(v)),
    A + "optim.lr_scheduler_type": ("train.lr_schedule", lambda v: _schedule(v)),
    "actor_rollout_ref.model.path": ("model.name", str),
    "actor_rollout_ref.model.lora_rank": ("model.lora_r", int),
    "actor_rollout_ref.model.lora_alpha": ("model.lora_alpha", int),
    "actor_rollout_ref.model.target_modules": ("model.lora_target_modules", lambda v: [v] if isinstance(v, str) else v),
    "actor_rollout_ref.model.enable_gradient_checkpointing": ("model.gradient_checkpointing", bool),
    "actor_rollout_ref.model.trust_remote_code": ("model.trust_remote_code", bool),
    "algorithm.gamma": ("algo.gamma", float),
    "algorithm.lam": ("algo.lam", float),
    "algorithm.filter_groups.enable": ("algo.group_filter", lambda v: "dynamic_sampling" if v else "all"),
    "algorithm.filter_groups.metric": ("algo.filter_metric", lambda v: "accuracy" if v == "acc" else v),
    "algorithm.filter_groups.max_num_gen_batches": ("algo.max_gen_rounds", int),
    "reward_model.overlong_buffer.enable": ("algo.soft_overlong", bool),
    "reward_model.overlong_buffer.len": ("algo.overlong_cache", float),
    "reward_model.overlong_buffer.penalty_factor": ("algo.overlong_factor", float),
    "critic.optim.lr": ("critic.lr", float),
    "critic.cliprange_value": ("algo.value_clip", float),
    "critic.grad_clip": ("critic.max_grad_norm", float),
    "trainer.total_training_steps": ("train.steps", int),
    "trainer.save_freq": ("train.save_every", lambda v: max(0, int(v))),
    "trainer.test_freq": ("train.eval_every", lambda v: max(0, int(v))),
    "trainer.max_actor_ckpt_to_keep": ("train.save_total_limit", lambda v: 0 if v is None else int(v)),
    "trainer.default_local_dir": ("train.output_dir", str),
    "trainer.logger": ("train.report_to", lambda v: _logger(v)),
}

ESTIMATORS = {
    "grpo": ("grpo", "grpo"),
    "gae": ("gae", "ppo"),
    "rloo": ("rloo", "rloo"),
    "reinforce_plus_plus": ("reinforce_pp", "reinforce_pp"),
    "reinforce_plus_plus_baseline": ("reinforce_pp_baseline", None),
    "grpo_passk": ("grpo_passk", None),
    "gpg": ("gpg", "gpg"),
}
LOSS_MODES = {"vanilla": "ppo_clip", "gspo": "gspo", "clip_cov": "clip_cov", "kl_cov": "kl_cov", "gpg": "gpg",
              "geo_mean": "gmpo", "cispo": "cispo"}  # fmt: skip
AGGREGATIONS = {"token-mean": "token-mean", "seq-mean-token-mean": "seq-mean-token-mean",
                "seq-mean-token-sum": "seq-mean-token-sum", "seq-mean-token-sum-norm": "constant-norm"}  # fmt: skip
KL_TYPES = {"kl", "k1", "k2", "k3", "mse", "low_var_kl", "k1+", "k3+"}


def _unsupported(v: Any) -> Any:
    raise Unsupported(v)


def _schedule(v: Any) -> str:
    """verl's schedules after the warm-up: constant or cosine (over trainer.total_training_steps)."""
    return v if v in ("constant", "cosine") else _unsupported(v)


def _logger(v: Any) -> list[str]:
    """verl `trainer.logger` (console is always on in grpokit); trackers grpokit has no writer for fail."""
    names = [n for n in ([v] if isinstance(v, str) else list(v or [])) if n != "console"]
    return report_to(names)


def flatten(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested Hydra sections -> dotted keys (`actor_rollout_ref.actor.clip_ratio_high`)."""
    out: dict[str, Any] = {}
    for k, v in data.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and v:
            out.update(flatten(v, key + "."))
        else:
            out[key] = v
    return out


def is_verl(data: dict[str, Any]) -> bool:
    return any(str(k).split(".")[0] in SIGNATURE_PREFIXES for k in data)


def translate(data: dict[str, Any], path: str, valid_keys: set[str]) -> Translation:
    """The grpokit keys for verl settings (nested or dotted); every verl key is mapped, unsupported or ignored."""
    flat, failed = interpolation.resolve(flatten(data))
    t = Translation(SOURCE, path)
    for key, why in failed.items():
        if key in RENAMES or key in DEFAULTS:
            t.refused.append(f"{key}: cannot resolve {why}; give its value (e.g. {key}=...)")
        t.unsupported[key] = why
    cfg = {**DEFAULTS, **flat}
    t.defaults = {k: v for k, v in DEFAULTS.items() if k not in flat}
    _estimator(cfg, t)
    _policy_loss(cfg, t)
    _kl(cfg, t)
    _batches(cfg, flat, t)
    _reward_and_data(flat, t)
    for key, (target, conv) in RENAMES.items():
        if key not in cfg or target in t.keys or key in t.unsupported or target not in valid_keys or cfg[key] is None:
            continue
        try:
            t.set(key, **{target.replace(".", "__"): conv(cfg[key])})
        except Unsupported:
            t.unsupported[key] = cfg[key]
    for key, value in flat.items():
        if key in t.mapped or key in t.unsupported or key in t.ignored:
            continue
        ignored = any(fnmatch.fnmatch(key, pat) for pat in IGNORED) or value is None
        (t.ignored if ignored else t.unsupported)[key] = value
    t.defaults = {k: v for k, v in t.defaults.items() if k in t.mapped}
    if t.keys.get("algo.group_filter") == "dynamic_sampling":
        t.recipe = "dapo"
    return t


def _estimator(cfg: dict[str, Any], t: Translation) -> None:
    est = cfg["algorithm.adv_estimator"]
    if est not in ESTIMATORS:
        t.unsupported["algorithm.adv_estimator"] = est
        return
    name, t.recipe = ESTIMATORS[est]
    if est == "grpo" and not cfg["algorithm.norm_adv_by_std_in_grpo"]:
        name, t.recipe = "dr_grpo", "dr_grpo"  # mean-only advantages
    t.set("algorithm.adv_estimator", algo__advantage=name)
    if est == "grpo":
        t.set("algorithm.norm_adv_by_std_in_grpo")
    elif "algorithm.norm_adv_by_std_in_grpo" in t.defaults:
        t.defaults.pop("algorithm.norm_adv_by_std_in_grpo")
    if est == "gae":
        t.notes.append("gae needs a critic: grpokit's critic section (critic.kind, critic.lr) applies")


def _policy_loss(cfg: dict[str, Any], t: Translation) -> None:
    """loss_mode, clip ratios (dual-clip kept for the vanilla loss), aggregation."""
    mode = cfg.get(A + "policy_loss.loss_mode", "vanilla")
    if mode not in LOSS_MODES:
        t.unsupported[A + "policy_loss.loss_mode"] = mode
        return
    loss = LOSS_MODES[mode]
    t.set(A + "policy_loss.loss_mode", algo__policy_loss=loss)
    low = cfg.get(A + "clip_ratio_low")
    high = cfg.get(A + "clip_ratio_high")
    base = float(cfg[A + "clip_ratio"])
    if loss in ("ppo_clip", "gspo", "clip_cov"):
        t.set((A + "clip_ratio_low",) if low is not None else (A + "clip_ratio",), algo__eps_low=float(low or base))
        t.set((A + "clip_ratio_high",) if high is not None else (A + "clip_ratio",), algo__eps_high=float(high or base))
    if loss == "ppo_clip":
        t.set(A + "clip_ratio_c", algo__dual_clip_c=float(cfg[A + "clip_ratio_c"]))
    if loss == "cispo":
        t.set((A + "clip_ratio_high",), algo__cispo_eps_high=float(high or base))
    for verl_key, key in (("clip_cov_ratio", "clip_cov_ratio"), ("clip_cov_lb", "clip_cov_lb"),
                          ("clip_cov_ub", "clip_cov_ub"), ("kl_cov_ratio", "kl_cov_ratio"),
                          ("ppo_kl_coef", "kl_cov_coef")):  # fmt: skip
        full = A + "policy_loss." + verl_key
        if full in cfg and cfg[full] is not None and loss in ("clip_cov", "kl_cov"):
            t.set(full, **{"algo__" + key: float(cfg[full])})
    agg = cfg[A + "loss_agg_mode"]
    if agg not in AGGREGATIONS:
        t.unsupported[A + "loss_agg_mode"] = agg
    else:
        t.set(A + "loss_agg_mode", algo__loss_agg=AGGREGATIONS[agg])


def _kl(cfg: dict[str, Any], t: Translation) -> None:
    in_loss, in_reward = bool(cfg[A + "use_kl_loss"]), bool(cfg["algorithm.use_kl_in_reward"])
    switches = (A + "use_kl_loss", "algorithm.use_kl_in_reward")
    if in_loss and in_reward:
        t.unsupported.update({k: True for k in switches})
        t.notes.append("grpokit has one KL coefficient: choose the KL loss or the KL reward")
        return
    t.set(switches)
    if not in_reward:
        _inert_reward_kl(cfg, t)
    if not in_loss:  # verl reads the KL loss's coefficient and estimator only with use_kl_loss
        t.ignored.update({k: cfg[k] for k in (A + "kl_loss_coef", A + "kl_loss_type") if k in cfg})
    if not (in_loss or in_reward):
        t.set(switches, algo__kl_coef=0.0, algo__reference="none")
        return
    if in_loss:
        coef_key, type_key = A + "kl_loss_coef", A + "kl_loss_type"
        coef, kind = float(cfg.get(coef_key, 0.001)), cfg.get(type_key, "low_var_kl")
        t.set((switches[0], coef_key, type_key), algo__kl_coef=coef, algo__kl_placement="loss")
    else:
        coef_key, type_key = "algorithm.kl_ctrl.kl_coef", "algorithm.kl_penalty"
        coef, kind = float(cfg.get(coef_key, 0.001)), cfg.get(type_key, "kl")
        t.set((switches[1], coef_key, type_key), algo__kl_coef=coef, algo__kl_placement="reward")
        ctl = cfg.get("algorithm.kl_ctrl.type", "fixed")
        keys = ("algorithm.kl_ctrl.type", "algorithm.kl_ctrl.target_kl", "algorithm.kl_ctrl.horizon")
        t.set(keys, algo__kl_controller=ctl)
        if ctl == "adaptive":
            t.set(keys, algo__kl_target=float(cfg.get(keys[1], 0.1)), algo__kl_horizon=float(cfg.get(keys[2], 10000)))
    if kind in KL_TYPES:
        t.set(type_key, algo__kl_estimator=kind, algo__reference="frozen")
    else:
        t.unsupported[type_key] = kind


def _inert_reward_kl(cfg: dict[str, Any], t: Translation) -> None:
    """`algorithm.kl_ctrl.*` / `kl_penalty` without `use_kl_in_reward`: verl reads them only when that is True, so
    they change nothing here (ignored, not "not supported"); the note says how to turn the in-reward KL on."""
    inert = {k: v for k, v in cfg.items() if k.startswith("algorithm.kl_ctrl.") or k == "algorithm.kl_penalty"}
    coef = inert.get("algorithm.kl_ctrl.kl_coef")
    t.ignored.update(inert)
    if coef:
        t.notes.append(
            f"algorithm.kl_ctrl.kl_coef={coef} has no effect in verl while algorithm.use_kl_in_reward=False; "
            "algorithm.use_kl_in_reward=True enables it, and grpokit does the same then: each token's reward "
            "minus kl_coef x the algorithm.kl_penalty estimate against a frozen reference (algo.kl_placement=reward, "
            "algo.kl_controller fixed or adaptive)"
        )


def _batches(cfg: dict[str, Any], flat: dict[str, Any], t: Translation) -> None:
    prompts = flat.get("data.train_batch_size")
    mini = flat.get(A + "ppo_mini_batch_size")
    if prompts and mini:
        if int(prompts) % int(mini):
            raise ValueError(
                f"{t.path}: data.train_batch_size={prompts} is not a multiple of "
                f"actor_rollout_ref.actor.ppo_mini_batch_size={mini}; verl refuses it too"
            )
        t.set(("data.train_batch_size", A + "ppo_mini_batch_size"), train__mini_batches=int(prompts) // int(mini))
        t.notes.append(
            "train_batch_size and ppo_mini_batch_size count prompts (x rollout.n completions); "
            "ppo_micro_batch_size_per_gpu counts completions"
        )
    per_step = int(t.keys.get("train.mini_batches", 1)) * int(cfg[A + "ppo_epochs"])
    for key in (A + "optim.lr_warmup_steps",):
        if int(flat.get(key) or -1) > 0:
            t.set(key, train__warmup_steps=int(flat[key]) * per_step)
    ratio = flat.get(A + "optim.lr_warmup_steps_ratio")
    if ratio is not None:
        steps = flat.get("trainer.total_training_steps")
        if float(ratio) > 0 and steps:
            t.set(A + "optim.lr_warmup_steps_ratio", train__warmup_steps=round(float(ratio) * int(steps) * per_step))
        elif float(ratio) == 0:
            t.set(A + "optim.lr_warmup_steps_ratio")
        else:
            t.unsupported[A + "optim.lr_warmup_steps_ratio"] = ratio


def _reward_and_data(flat: dict[str, Any], t: Translation) -> None:
    """custom_reward_function.path/name -> reward.functions; data files -> data.task / data.eval_data."""
    path = flat.get("custom_reward_function.path")
    if path:
        name = flat.get("custom_reward_function.name") or "compute_score"
        t.set(("custom_reward_function.path", "custom_reward_function.name"), reward__functions=[f"{path}:{name}"])
    elif not flat.get("reward_model.enable"):
        verl_reward.default_scorer(flat, t)
    for key, first, more in (
        ("data.train_files", "task", "extra_files"),
        ("data.val_files", "eval_data", "extra_eval_files"),
    ):
        files = flat.get(key)
        if files is None:
            continue
        files = [files] if isinstance(files, str) else [str(f) for f in files]
        if not files:
            continue
        t.set(key, **{f"data__{first}": files[0]})
        if len(files) > 1:  # verl's list of files, read as one dataset (each row keeps its data_source)
            t.set(key, **{f"data__{more}": files[1:]})
    if "data.train_files" in t.mapped:  # verl's schema: the answer is in reward_model.ground_truth
        t.set("data.train_files", data__answer_key="reward_model.ground_truth")
