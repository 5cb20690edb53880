"""A recipe's component slots (advantage estimator, policy loss, aggregation, KL estimator, IS correction, and
the critic's targets and the centred KL placement when it has them): which name each slot chooses, and the
hyper-parameters each chosen component *declares* (the keyword-only arguments of its registered function, with
defaults from its paper; `Registry.params`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .advantages import value_targets
from .kl import centered_sequence_kl
from .registry import (
    ADVANTAGES,
    AGGREGATIONS,
    IS_CORRECTIONS,
    KL_ESTIMATORS,
    POLICY_LOSSES,
    Param,
    Registry,
)

# Two components are not chosen by name but switched on by the recipe: the critic's targets (a recipe with a
# critic, docs/math.md §2/§11) and the centred on-policy KL (algo.kl_placement=reward_centered, docs/math.md §12). They
# declare
# their parameters the same way.
CRITIC_TARGETS = Registry("critic", inputs=("token_rewards",))
CRITIC_TARGETS.register("value_targets")(value_targets)
CENTRED_KL = Registry("kl_placement")
CENTRED_KL.register("reward_centered")(centered_sequence_kl)


@dataclass(frozen=True)
class Component:
    """One chosen component of a recipe: the config key that chooses it, its name and declared parameters."""

    slot: str
    name: str
    params: dict[str, Param]

    def __str__(self) -> str:
        return f"{self.slot} {self.name!r}"


# (config key that chooses the component, its registry, which name the config chooses or None when it has none)
SLOTS: tuple[tuple[str, Registry, Callable[[Any], str | None]], ...] = (
    ("advantage", ADVANTAGES, lambda c: c.advantage),
    ("policy_loss", POLICY_LOSSES, lambda c: c.policy_loss),
    ("loss_agg", AGGREGATIONS, lambda c: c.loss_agg),
    ("kl_estimator", KL_ESTIMATORS, lambda c: c.kl_estimator if c.kl_coef > 0 and c.kl_placement == "loss" else None),
    ("is_correction", IS_CORRECTIONS, lambda c: c.is_correction),
    ("critic", CRITIC_TARGETS, lambda c: "value_targets" if c.uses_critic else None),
    ("kl_placement", CENTRED_KL, lambda c: c.kl_placement if c.kl_placement in CENTRED_KL else None),
)


def component_keys() -> dict[str, list[str]]:
    """Every hyper-parameter any component declares -> the slots whose components declare it."""
    out: dict[str, list[str]] = {}
    for slot, reg, _ in SLOTS:
        for key in sorted(reg.param_names()):
            out.setdefault(key, []).append(slot)
    return out


def unused_message(key: str, value: Any, slots: list[str], comps: list[Component]) -> str:
    """The error for a set parameter that no chosen component takes: what each chosen component takes, which
    components would take the key, and the valid keys here."""
    chosen = {c.slot: c for c in comps}
    regs = {s: r for s, r, _ in SLOTS}
    parts = []
    for slot in slots:
        c = chosen.get(slot)
        if c is None:
            parts.append(f"no {slot} component is chosen")
        else:
            parts.append(f"{c} takes {', '.join(c.params) or 'no parameters'}")
    owners = " and ".join(f"{slot} {', '.join(repr(n) for n in regs[slot].owners(key))}" for slot in slots)
    valid = sorted({k for c in comps for k in c.params})
    return (
        f"algo.{key}={value!r} is not a parameter of the chosen components: {'; '.join(parts)}. "
        f"{key} is a parameter of {owners}. Remove it (or set it to null) or choose a component that takes it. "
        f"Valid component keys here: {', '.join(valid) or 'none'}"
    )
