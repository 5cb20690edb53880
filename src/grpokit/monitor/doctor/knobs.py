"""The fixes doctor names, translated to the trainer that wrote the log (TRL, verl, OpenRLHF)."""

from __future__ import annotations

import re
from typing import Any

#: grpokit config keys named in fixes -> the same knob in the trainer that wrote the log (TRL: GRPOConfig fields,
#: checked against TRL 1.13's; verl: config paths, checked against its printed config and docs/algo/dapo.md;
#: OpenRLHF: `train_ppo_ray` arguments).
#: A key with no equivalent says so.
TRAINER_KNOBS: dict[str, dict[str, str]] = {
    "trl": {
        "algo.eps_high": "epsilon_high",
        "algo.entropy_coef": "entropy_coef (recent TRL; older GRPOTrainer has no entropy bonus)",
        "algo.soft_overlong": "mask_truncated_completions=True",
        "algo.overlong_filter": "mask_truncated_completions=True",
        "algo.kl_coef": "beta",
        "algo.reference": "sync_ref_model=True (ref_model_mixup_alpha, ref_model_sync_steps)",
        "algo.group_filter": "none in GRPOTrainer (raise num_generations, or filter prompts)",
        "algo.loss_agg": "loss_type ('dapo' or 'dr_grpo')",
        "algo.is_correction": "vllm_importance_sampling_correction=True",
        "train.lr": "learning_rate",
        "rollout.max_new_tokens": "max_completion_length",
        # the cap on tool-calling rounds (`_tool_call_loop`), TRL's turn limit
        "agent.max_turns": "max_tool_calling_iterations",
    },
    "verl": {
        "algo.eps_high": "actor_rollout_ref.actor.clip_ratio_high",
        "algo.entropy_coef": "actor_rollout_ref.actor.entropy_coeff",
        "algo.group_filter": "algorithm.filter_groups.enable=True (DAPO recipe)",
        "algo.soft_overlong": "reward_model.overlong_buffer.enable=True (DAPO recipe)",
        "algo.kl_controller": "algorithm.kl_ctrl.type=adaptive",
        "algo.kl_coef": "actor_rollout_ref.actor.kl_loss_coef (or algorithm.kl_ctrl.kl_coef)",
        "algo.kl_placement": "actor_rollout_ref.actor.use_kl_loss=True, algorithm.use_kl_in_reward=False",
        "algo.loss_agg": "actor_rollout_ref.actor.loss_agg_mode",
        "train.lr": "actor_rollout_ref.actor.optim.lr",
        "rollout.max_new_tokens": "data.max_response_length",
        # the agent loop's turn caps (`tool_agent_loop.py`); a turn limit counts the policy's turns
        "agent.max_turns": "actor_rollout_ref.rollout.multi_turn.max_assistant_turns",
    },
    # OpenRLHF's `train_ppo_ray` arguments, checked against its CLI at commit 3c3be62 (2026-08); they were renamed
    # into groups on 2026-04-19 (commit ed62d0e), and the older flat names are given too
    "openrlhf": {
        "algo.eps_high": "--actor.eps_clip_low_high LOW HIGH (before 2026-04: --eps_clip_low_high)",
        "algo.entropy_coef": "--actor.entropy_coef (before 2026-04: --entropy_loss_coef)",
        "algo.group_filter": "--algo.dynamic_filtering_enable with --algo.dynamic_filtering_range "
        "(before 2026-04: --dynamic_filtering)",
        "algo.soft_overlong": "--reward.overlong_buffer_len with --reward.overlong_penalty_factor "
        "(before 2026-04: --overlong_buffer_len)",
        "algo.kl_controller": "--algo.kl.target (adaptive KL; before 2026-04: --kl_target)",
        "algo.kl_coef": "--algo.kl.init_coef (before 2026-04: --init_kl_coef)",
        "algo.kl_placement": "--algo.kl.use_loss (before 2026-04: --use_kl_loss)",
        "algo.is_correction": "--algo.advantage.is_correction_enable (before 2026-04: --enable_vllm_is_correction)",
        "train.lr": "--actor.adam.lr (before 2026-04: --actor_learning_rate)",
        "rollout.max_new_tokens": "--rollout.max_new_tokens (before 2026-04: --generate_max_len)",
    },
}
_KEY = re.compile(r"\b(?:algo|train|rollout|agent)\.[a-z_]+")


#: Knobs a trainer refuses in some configurations, and what to name instead: TRL's `sync_ref_model` raises for a
#: PEFT model (the reference is the base model with the adapter disabled), so a LoRA run changes `beta` instead.
PEFT_KNOBS: dict[str, dict[str, str]] = {
    "trl": {
        "algo.reference": "not with PEFT (TRL refuses sync_ref_model for a PEFT model): a larger beta, or a lower "
        "learning_rate",
    },
}


def equivalents(alert: dict[str, Any], flavor: str | None, context: dict[str, Any] | None = None) -> dict[str, str]:
    """The trainer's own names for the grpokit keys an alert's fix and actions name (PEFT-aware where `context`
    says the run trains an adapter)."""
    knobs = dict(TRAINER_KNOBS.get(flavor or "", {}))
    if not knobs:
        return {}
    if (context or {}).get("peft"):
        knobs.update(PEFT_KNOBS.get(flavor or "", {}))
    keys = dict.fromkeys(_KEY.findall(alert.get("fix", "") + " " + " ".join(alert.get("actions", []))))
    return {k: knobs[k] for k in keys if k in knobs}
