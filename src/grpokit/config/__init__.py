"""Typed run configuration: defaults <- recipe YAML <- config file <- `--set key=value` overrides.

Every key is validated: an unknown key or a value of the wrong type is one error that names the key, the value
and the closest valid key. One module per job:

- `sections.py`: the section dataclasses and `Config` (the defaults)
- `coerce.py`: a YAML/CLI value coerced to a field's type
- `keys.py`: dotted keys set, mappings applied, `--set` parsed, did-you-mean
- `recipes.py`: recipe files and YAML reading
- `build.py`: the layers in order (`build_config`), and a saved config rebuilt (`config_from_dict`)
- `resolve.py`: derived values, component binding, validation
"""

from __future__ import annotations

from .build import build_config, config_from_dict
from .coerce import coerce
from .errors import ConfigError
from .keys import RECIPE_META_KEYS, all_keys, apply_mapping, did_you_mean, key_hint, parse_override, set_key, type_hints
from .recipes import list_recipes, load_recipe, read_yaml, recipe_dir
from .resolve import VAPO_ALPHA_TIMES_LMAX, resolve_config
from .sections import (
    Config,
    CriticConfig,
    DataConfig,
    ModelConfig,
    MonitorConfig,
    RewardConfig,
    RolloutConfig,
    TrainConfig,
)

__all__ = [
    "RECIPE_META_KEYS",
    "VAPO_ALPHA_TIMES_LMAX",
    "Config",
    "ConfigError",
    "CriticConfig",
    "DataConfig",
    "ModelConfig",
    "MonitorConfig",
    "RewardConfig",
    "RolloutConfig",
    "TrainConfig",
    "all_keys",
    "key_hint",
    "did_you_mean",
    "type_hints",
    "apply_mapping",
    "build_config",
    "coerce",
    "config_from_dict",
    "list_recipes",
    "load_recipe",
    "parse_override",
    "read_yaml",
    "recipe_dir",
    "resolve_config",
    "set_key",
]
