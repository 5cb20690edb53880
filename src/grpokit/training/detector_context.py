"""What the detectors know about the recipe (`Monitor`'s context): the switches that decide which fixes can act, and
the `agent.*` settings the multi-turn detectors name, as the doctor reads them from a run's config.yaml."""

from __future__ import annotations

import dataclasses
from typing import Any

from ..config import Config
from ..monitor.readers.grpokit_run import agent_context


def monitor_context(cfg: Config) -> dict[str, Any]:
    """What the detectors need to know about the recipe."""
    a, t = cfg.algo, cfg.train
    return {
        "dynamic_sampling": a.dynamic_sampling,
        "group_filter": a.group_filter,
        "ds_shortfall": a.ds_shortfall,
        "policy_loss": a.policy_loss,
        "eps_low": a.eps_low,
        "eps_high": a.eps_high,
        "epochs": t.ppo_epochs,
        "mini_batches": t.mini_batches,
        "is_correction": a.is_correction,
        "entropy_coef": a.entropy_coef,
        "temperature": cfg.rollout.temperature,
        "max_gen_rounds": a.max_gen_rounds,
        "kl_controller": a.kl_controller,
        "soft_overlong": a.soft_overlong,
        "recipe": cfg.recipe,
        "max_new_tokens": cfg.rollout.max_new_tokens,
        "truncated_reward": a.truncated_reward,
        # the agent.* settings the multi-turn detectors name in their fixes, as the doctor reads them from config.yaml
        **agent_context({"agent": dataclasses.asdict(cfg.agent)}),
    }
