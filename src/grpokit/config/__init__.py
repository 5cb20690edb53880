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

from ..common.lazy import lazy_exports

# imported on first use: `grpokit --help` imports this package and must not import torch through it
__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "build": (
            "build_config",
            "config_from_dict",
        ),
        "coerce": ("coerce",),
        "errors": ("ConfigError",),
        "keys": (
            "RECIPE_META_KEYS",
            "all_keys",
            "apply_mapping",
            "did_you_mean",
            "key_hint",
            "parse_override",
            "set_key",
            "type_hints",
        ),
        "recipes": (
            "list_recipes",
            "load_recipe",
            "read_yaml",
            "recipe_dir",
        ),
        "resolve": (
            "VAPO_ALPHA_TIMES_LMAX",
            "resolve_config",
        ),
        "sections": (
            "AgentConfig",
            "Config",
            "CriticConfig",
            "DataConfig",
            "ModelConfig",
            "MonitorConfig",
            "RewardConfig",
            "RolloutConfig",
            "TrainConfig",
        ),
    },
)
__all__ = __dir__()  # the names of the table above, each listed once
