"""Building a run's config in layers: defaults <- recipe <- config file (grpokit's, or TRL's / verl's translated)
<- direct values <- `--set` overrides, then resolved; and rebuilding one from a saved `to_dict()`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from .errors import ConfigError
from .keys import all_keys, apply_mapping, parse_override, set_key
from .recipes import load_recipe, read_yaml
from .resolve import resolve_config
from .sections import Config


def _foreign_to_grpokit(data: dict[str, Any], source: str, cfg: Config, later: set[str]) -> dict[str, Any]:
    """A TRL GRPOConfig or verl config file, translated (grpokit.config.compat); one message on stderr names
    every key that was not mapped. A refusal that a key set `later` (`--set`, a direct value) replaces stops
    nothing. A grpokit config is returned as is."""
    from .compat import translate

    try:
        found = translate(data, source, set(all_keys(cfg)), later=later)
    except ValueError as e:
        raise ConfigError(str(e)) from None
    if found is None:
        return data
    print(f"grpokit: {found.message()}", file=sys.stderr)
    return found.to_mapping()


def _apply_config_file(cfg: Config, config_file: str, later: set[str]) -> set[str]:
    """Apply `--config FILE` onto cfg (`later`: the keys set after it); the algo keys it set."""
    p = Path(config_file)
    if not p.exists():
        raise ConfigError(f"--config {config_file!r} does not exist")
    data = read_yaml(p) or {}
    if not isinstance(data, dict):
        raise ConfigError(f"{config_file}: expected config sections (e.g. train: {{steps: 10}}), got {data!r}")
    data = _foreign_to_grpokit(data, config_file, cfg, later)
    apply_mapping(cfg, data, config_file)
    return set((data.get("algo") or {}) if isinstance(data.get("algo"), dict) else ())


def build_config(
    recipe: str = "grpo",
    overrides: list[str] | None = None,
    config_file: str | None = None,
    **direct: Any,
) -> Config:
    """defaults <- recipe <- config file <- direct values (dotted keys) <- `--set` overrides; validated and bound.

    Component parameters the recipe set belong to the component it chose: when a later layer switches that
    component (`--set algo.policy_loss=gspo` on grpo), the recipe's values for it are dropped and the new
    component's own defaults apply, unless the later layer sets them too."""
    cfg = Config(recipe=recipe)
    apply_mapping(cfg, load_recipe(recipe), f"recipe {recipe}")
    cfg.recipe = Path(recipe).stem if recipe.endswith((".yaml", ".yml")) else recipe
    recipe_choices = cfg.algo.choices()
    later: set[str] = set()  # algo keys set after the recipe
    if config_file:
        given = {k for k, v in direct.items() if v is not None} | {parse_override(o)[0] for o in overrides or []}
        later |= _apply_config_file(cfg, config_file, given)
    for k, v in direct.items():
        if v is not None:
            set_key(cfg, k, v)
            later.add(k.removeprefix("algo."))
    for o in overrides or []:
        k, v = parse_override(o)
        set_key(cfg, k, v)
        later.add(k.removeprefix("algo."))
    cfg.algo.forget_switched(recipe_choices, keep=later)
    return resolve_config(cfg)


def config_from_dict(data: dict[str, Any]) -> Config:
    """Rebuild a Config from `to_dict()` output (resume)."""
    cfg = Config(recipe=str(data.get("recipe", "grpo")))
    apply_mapping(cfg, {k: v for k, v in data.items() if k != "recipe"}, "saved config")
    cfg.algo.drop_unused()  # a config saved before components declared their parameters held every key
    return resolve_config(cfg)
