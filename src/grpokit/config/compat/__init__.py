"""Configs of other trainers read as grpokit configs, and did-you-mean for their key names.

A `--config` file is recognised as a TRL `GRPOConfig` YAML (flat, TRL's names: `learning_rate`,
`num_generations`, ...) or a verl Hydra config (`actor_rollout_ref`, `algorithm`, ... as sections or dotted keys)
and translated by meaning (`trl.py`, `verl.py`); one message names every key that was not mapped.
`grpokit config from-trl FILE` / `from-verl FILE|KEY=VALUE...` write the equivalent grpokit YAML.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from . import axolotl, easyr1, nemo_rl, openrlhf, prime_rl, skyrl, swift, trl, verl
from . import table as tables
from .translation import Translation

# format name -> (detector, translator); the first detector that accepts a mapping wins, so the trainers whose
# configs share verl's or TRL's names (EasyR1's `trainer`, axolotl's `learning_rate`) are asked first
FORMATS: dict[str, tuple[Callable[[dict[str, Any]], bool], Callable[..., Translation]]] = {
    "easyr1": (easyr1.is_easyr1, partial(tables.translate, easyr1.SPEC)),
    "skyrl": (skyrl.is_skyrl, partial(tables.translate, skyrl.SPEC)),
    "nemo-rl": (nemo_rl.is_nemo_rl, partial(tables.translate, nemo_rl.SPEC)),
    "prime-rl": (prime_rl.is_prime_rl, partial(tables.translate, prime_rl.SPEC)),
    "axolotl": (axolotl.is_axolotl, axolotl.translate),
    "ms-swift": (swift.is_swift, swift.translate),
    "openrlhf": (openrlhf.is_openrlhf, openrlhf.translate),
    "trl": (trl.is_trl, trl.translate),
    "verl": (verl.is_verl, verl.translate),
}
NAMES = {"easyr1": "EasyR1", "skyrl": "SkyRL", "nemo-rl": "NeMo-RL", "prime-rl": "prime-rl", "axolotl": "axolotl",
         "ms-swift": "ms-swift", "openrlhf": "OpenRLHF", "trl": "TRL GRPOConfig", "verl": "verl"}  # fmt: skip


def detect(data: dict[str, Any]) -> str | None:
    """The trainer whose config `data` is (a FORMATS name), or None for a grpokit config (sections
    model/data/rollout/...)."""
    for name, (accepts, _) in FORMATS.items():
        if accepts(data):
            return name
    return None


def translate(
    data: dict[str, Any],
    path: str,
    valid_keys: set[str],
    fmt: str | None = None,
    strict: bool = True,
    later: set[str] | frozenset[str] = frozenset(),
) -> Translation | None:
    """The translation of a foreign config mapping, or None when `data` is a grpokit config. A value that cannot
    be translated (batch sizes that do not divide) raises ValueError naming the keys; so does, when `strict`
    (a run is about to start from it), anything the translation refused (a reward name that resolves to nothing)
    that the grpokit keys `later` (set after the file: `--set`, grpokit's own options) do not replace."""
    fmt = fmt or detect(data)
    if fmt is None:
        return None
    found = FORMATS[fmt][1](data, path, valid_keys)
    found.lift(set(later))
    if strict and found.refused:
        raise ValueError(f"{path}: " + "; ".join(found.refused))
    return found


def parse_dotted(items: list[str]) -> dict[str, Any]:
    """verl command-line overrides `a.b.c=value` (a leading `+` as Hydra allows) -> {dotted key: YAML value}."""
    import yaml

    from ...common import safe_yaml

    out: dict[str, Any] = {}
    for item in items:
        if "=" not in item:
            raise ValueError(f"{item!r} is not key=value (e.g. actor_rollout_ref.actor.clip_ratio_high=0.28)")
        key, raw = item.split("=", 1)
        try:
            out[key.strip().lstrip("+")] = safe_yaml.load(raw) if raw else ""
        except safe_yaml.YAMLLimitError as e:
            raise ValueError(f"{item[:80]!r}: YAML refused ({e.problem}); give a plain value") from None
        except yaml.YAMLError:
            out[key.strip().lstrip("+")] = raw
    return out


# foreign key -> (grpokit key, what differs); for did-you-mean on `--set` and config keys
_EXPLAINED: dict[str, tuple[str, str]] = {
    "learning_rate": ("train.lr", ""),
    "num_generations": ("rollout.group_size", ""),
    "beta": ("algo.kl_coef", "TRL's beta is the KL coefficient"),
    "epsilon": ("algo.eps_low", "TRL's epsilon is the lower clip"),
    "epsilon_high": ("algo.eps_high", ""),
    "num_iterations": ("train.ppo_epochs", ""),
    "max_steps": ("train.steps", "grpokit counts rollout batches, TRL optimizer steps"),
    "loss_type": ("algo.loss_agg", "TRL's loss_type is mostly the aggregation"),
    "importance_sampling_level": ("algo.policy_loss", "sequence is algo.policy_loss=gspo"),
    "scale_rewards": ("algo.adv_scale", ""),
    "per_device_train_batch_size": (
        "rollout.prompts_per_step",
        "TRL counts completions: prompts_per_step x group_size completions per step",
    ),
    "gradient_accumulation_steps": ("train.mini_batches", "grpokit splits a rollout batch into mini-batches"),
    "max_completion_length": ("rollout.max_new_tokens", ""),
    "save_steps": ("train.save_every", ""),
    "eval_steps": ("train.eval_every", ""),
    "mask_truncated_completions": ("algo.overlong_filter", ""),
    "top_entropy_quantile": ("algo.top_entropy_rho", ""),
    "lr_scheduler_type": ("train.lr_schedule", ""),
    verl.A + "clip_ratio_high": ("algo.eps_high", ""),
    verl.A + "clip_ratio_low": ("algo.eps_low", ""),
    verl.A + "clip_ratio": ("algo.eps_low", "and algo.eps_high"),
    verl.A + "clip_ratio_c": ("algo.dual_clip_c", ""),
    verl.A + "kl_loss_coef": ("algo.kl_coef", "with algo.kl_placement=loss"),
    verl.A + "kl_loss_type": ("algo.kl_estimator", ""),
    verl.A + "use_kl_loss": ("algo.kl_coef", "a positive algo.kl_coef with algo.kl_placement=loss"),
    verl.A + "loss_agg_mode": ("algo.loss_agg", ""),
    verl.A + "policy_loss.loss_mode": ("algo.policy_loss", ""),
    verl.A + "ppo_mini_batch_size": ("train.mini_batches", "verl's counts prompts: mini_batches = batch / mini"),
    "algorithm.adv_estimator": ("algo.advantage", ""),
    "algorithm.kl_ctrl.kl_coef": ("algo.kl_coef", "with algo.kl_placement=reward"),
    "algorithm.norm_adv_by_std_in_grpo": ("algo.advantage", "false is algo.advantage=dr_grpo"),
    "algorithm.filter_groups.enable": ("algo.group_filter", "true is algo.group_filter=dynamic_sampling"),
}


def _aliases() -> dict[str, tuple[str, str]]:
    out: dict[str, tuple[str, str]] = {}
    for table in (trl.RENAMES, verl.RENAMES):
        out.update({k: (target, "") for k, (target, _) in table.items()})
    out.update(_EXPLAINED)
    return out


ALIASES = _aliases()
_SHORT = {k.rsplit(".", 1)[-1]: v for k, v in ALIASES.items() if "." in k}  # clip_ratio_high, ppo_epochs, ...


def foreign_hint(key: str) -> str | None:
    """' Did you mean ...?' for a TRL or verl key name (`learning_rate`, `train.learning_rate`,
    `actor_rollout_ref.actor.clip_ratio_high`, `algo.clip_ratio_high`), or None."""
    last = key.rsplit(".", 1)[-1]
    for candidate in (key, last):
        found = ALIASES.get(candidate) or (_SHORT.get(candidate) if candidate == last else None)
        if found:
            target, why = found
            src = "TRL" if candidate in _TRL_NAMES else "verl"
            return f" Did you mean {target!r}? ({candidate!r} is {src}'s name{': ' + why if why else ''})"
    return None


_TRL_NAMES = set(trl.RENAMES) | {k for k in _EXPLAINED if "." not in k}


__all__ = ["FORMATS", "NAMES", "Translation", "detect", "foreign_hint", "parse_dotted", "translate"]
