"""Cross-field checks of a resolved config: contradictory settings are refused, settings that would do nothing are
warned about. Each check is one registered function of the config returning a `Finding` or None, so a new rule
is one function, not a branch in `Config.resolve`.

A refusal (`level="error"`) becomes one `ConfigError` naming the key, its value, why it cannot work and the fix.
A warning (`level="warning"`) is kept on the config (`Config.warnings`) and printed by the command line once,
before the run starts: the run goes on exactly as configured.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from ..common.registry import Registry
from ..data.registry import task_tools

# advantage estimators that give a non-zero signal with one sample per prompt: a batch-level baseline
# (REINFORCE++, docs/math.md §6) or a learned value (GAE, docs/math.md §2/§11); every other estimator is group-relative
ONE_SAMPLE_ADVANTAGES = ("reinforce_pp", "gae", "vapo_gae", "length_adaptive_gae")
ON_LONG_PROMPT = ("skip", "error")
ON_DIVERGENCE = ("stop", "continue")


@dataclass(frozen=True)
class Finding:
    """One problem with a config: `key` names the setting, `message` says what is wrong and how to fix it."""

    level: str  # error | warning
    key: str
    message: str


CHECKS = Registry("config check")


def multi_turn(cfg: Any) -> bool:
    """Whether a run samples multi-turn episodes (grpokit/agents): `agent.tools` or `agent.environment` is set, or
    the built-in task brings tools (add2-tool)."""
    return bool(cfg.agent.tools or cfg.agent.environment or task_tools(cfg.data.task))


def run_checks(cfg: Any) -> list[Finding]:
    """Every registered check's finding, refusals first."""
    found = [f for fn in CHECKS.values() if (f := fn(cfg)) is not None]
    return sorted(found, key=lambda f: f.level != "error")


# ---------------------------------------------------------------------------------------------------- refusals


@CHECKS.register("group_size_one")
def _group_size_one(cfg: Any) -> Finding | None:
    a, g = cfg.algo, cfg.rollout.group_size
    if g != 1:
        return None
    if a.dynamic_sampling:
        return Finding(
            "error",
            "rollout.group_size",
            "rollout.group_size=1 with algo.group_filter=dynamic_sampling: dynamic sampling keeps only groups whose "
            "samples disagree, and a group of one never does, so every update would be skipped; use "
            "rollout.group_size>=2 (DAPO uses 16)",
        )
    if a.advantage not in ONE_SAMPLE_ADVANTAGES and not a.uses_critic:
        return Finding(
            "error",
            "rollout.group_size",
            f"rollout.group_size=1 with algo.advantage={a.advantage!r}: a group-relative advantage of a group of one "
            f"is always 0 (no learning signal); use rollout.group_size>=2, or an estimator that works with one "
            f"sample ({', '.join(ONE_SAMPLE_ADVANTAGES[:2])})",
        )
    return None


@CHECKS.register("kl_without_reference")
def _kl_without_reference(cfg: Any) -> Finding | None:
    a = cfg.algo
    if a.kl_coef <= 0 or a.reference != "none":
        return None
    return Finding(
        "error",
        "algo.kl_coef",
        f"algo.kl_coef={a.kl_coef} needs a reference policy but algo.reference=none (there would be no KL term): "
        "set algo.reference=frozen (or ema / sync), or algo.kl_coef=0",
    )


@CHECKS.register("prompt_limits")
def _prompt_limits(cfg: Any) -> Finding | None:
    d = cfg.data
    if d.on_long_prompt not in ON_LONG_PROMPT:
        return Finding(
            "error",
            "data.on_long_prompt",
            f"data.on_long_prompt={d.on_long_prompt!r} is invalid: use skip (drop and count) or error (stop)",
        )
    return None


@CHECKS.register("on_divergence")
def _on_divergence(cfg: Any) -> Finding | None:
    v = cfg.train.on_divergence
    if v in ON_DIVERGENCE:
        return None
    return Finding(
        "error",
        "train.on_divergence",
        f"train.on_divergence={v!r} is invalid: use stop (stop the run, keep the last healthy checkpoint) or continue",
    )


@CHECKS.register("reward_not_applicable")
def _reward_not_applicable(cfg: Any) -> Finding | None:
    """reward.not_applicable names a policy of grpokit/rewards/applicability.py (zero | exclude)."""
    from ..rewards.applicability import not_applicable_policy

    try:
        not_applicable_policy(cfg.reward.not_applicable)
    except ValueError as e:
        return Finding("error", "reward.not_applicable", str(e))
    return None


@CHECKS.register("reward_verl_solution_str")
def _reward_verl_solution_str(cfg: Any) -> Finding | None:
    """reward.verl_solution_str is what a verl compute_score gets (grpokit/rewards/callers.py SOLUTION_STR)."""
    from ..rewards.callers import SOLUTION_STR

    v = cfg.reward.verl_solution_str
    if v in SOLUTION_STR:
        return None
    return Finding(
        "error",
        "reward.verl_solution_str",
        f"reward.verl_solution_str={v!r} is invalid: use response (verl today) or prompt+response (the decoded "
        "prompt, then the response: TinyZero, and verl before its reward-manager change)",
    )


@CHECKS.register("reward_model_device")
def _reward_model_device(cfg: Any) -> Finding | None:
    """reward.model_device is auto, cpu, cuda, cuda:N or mps (grpokit/rewards/reward_model.py)."""
    from ..rewards.reward_model import check_model_device

    try:
        check_model_device(cfg.reward.model_device)
    except ValueError as e:
        return Finding("error", "reward.model_device", str(e))
    return None


@CHECKS.register("max_staleness")
def _max_staleness(cfg: Any) -> Finding | None:
    """rollout.max_staleness=1 (one-step off-policy, training/phases/batch_source.py; its range, 0 or 1, is in
    grpokit.config.ranges) needs the in-process `hf` engine, where its sampler copy runs."""
    r = cfg.rollout
    if r.max_staleness == 1 and r.engine != "hf":
        return Finding(
            "error",
            "rollout.max_staleness",
            f"rollout.max_staleness=1 is not supported with rollout.engine={r.engine!r}: its sampler copy runs with "
            "the hf engine only; use rollout.engine=hf or rollout.max_staleness=0",
        )
    return None


@CHECKS.register("rollout_decode")
def _rollout_decode(cfg: Any) -> Finding | None:
    """rollout.decode is one of DECODE_MODES (grpokit/config/sections.py); graphs needs CUDA, checked when the
    engine is built on its device (grpokit/rollout/hf.py)."""
    from .sections import DECODE_MODES

    d = cfg.rollout.decode
    if d not in DECODE_MODES:
        modes = "; ".join(f"{k}: {v}" for k, v in DECODE_MODES.items())
        return Finding("error", "rollout.decode", f"rollout.decode={d!r} is not a decode mode; choose one of {modes}")
    return None


# ---------------------------------------------------------------------------------------------------- warnings


def _changed(section: Any, names: tuple[str, ...] | None = None) -> list[str]:
    """Fields of a config section whose value differs from the section's default."""
    default = type(section)()
    fields = [f.name for f in dataclasses.fields(section) if names is None or f.name in names]
    return [n for n in fields if getattr(section, n) != getattr(default, n)]


def _unused(section: Any, prefix: str, why: str, names: tuple[str, ...] | None = None) -> Finding | None:
    """A warning naming every field of `section` (keys `prefix.name`) changed from its default, with their values,
    and `why` they have no effect and what to do instead; None when none was changed."""
    changed = _changed(section, names)
    if not changed:
        return None
    shown = ", ".join(f"{prefix}.{n}={getattr(section, n)!r}" for n in changed)
    return Finding("warning", f"{prefix}.{changed[0]}", f"{shown} has no effect: {why}")


@CHECKS.register("unused_dynamic_sampling")
def _unused_dynamic_sampling(cfg: Any) -> Finding | None:
    a = cfg.algo
    if a.dynamic_sampling:
        return None
    names = ("ds_oversample", "ds_shortfall", "filter_metric")
    if a.group_filter != "gpg":  # GPG resampling bounds its rounds with max_gen_rounds too
        names += ("max_gen_rounds",)
    why = f"algo.group_filter is {a.group_filter!r}; set algo.group_filter=dynamic_sampling, or drop it"
    return _unused(a, "algo", why, names)


@CHECKS.register("unused_gpg_threshold")
def _unused_gpg_threshold(cfg: Any) -> Finding | None:
    """`algo.gpg_threshold` is the gpg group filter's valid-group fraction (docs/math.md §6); with another filter it
    does nothing."""
    a = cfg.algo
    if a.gpg_threshold is None or a.group_filter == "gpg":
        return None
    return Finding(
        "warning",
        "algo.gpg_threshold",
        f"algo.gpg_threshold={a.gpg_threshold!r} has no effect: algo.group_filter is {a.group_filter!r}; it is the "
        "gpg filter's valid-group fraction: set algo.group_filter=gpg, or drop it",
    )


@CHECKS.register("unused_critic")
def _unused_critic(cfg: Any) -> Finding | None:
    if cfg.algo.uses_critic:
        return None
    why = (
        f"recipe {cfg.recipe!r} trains no critic (algo.advantage={cfg.algo.advantage!r}); use a recipe with a critic "
        "(ppo, vapo), or drop it"
    )
    return _unused(cfg.critic, "critic", why)


@CHECKS.register("unused_agent")
def _unused_agent(cfg: Any) -> Finding | None:
    """`agent.*` shapes multi-turn episodes (grpokit/agents, docs/agents.md), which run only when `agent.tools` or
    `agent.environment` is set or the built-in task brings tools; otherwise its other settings do nothing."""
    if multi_turn(cfg):
        return None
    why = (
        f"the run is single-turn (no agent.tools, no agent.environment, and task {cfg.data.task!r} brings no "
        "tools); set agent.tools (e.g. [calculator]) or agent.environment, use a task with tools (add2-tool), "
        "or drop it"
    )
    return _unused(cfg.agent, "agent", why)
