"""Building a run's config in layers: defaults <- recipe <- config file (grpokit's, or TRL's / verl's translated)
<- direct values <- `--set` overrides, then resolved; and rebuilding one from a saved `to_dict()`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from .errors import ConfigError
from .keys import all_keys, apply_mapping, parse_override, set_key
from .recipes import load_recipe
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


def check_job(source: str, given: set[str], task: str, rewards: list[str], answer_key: str | None = "answer") -> None:
    """A training config file names its data and its reward: `given` (the keys the file, or what was given after
    it, set) must hold `data.task`, and `reward.functions` unless that task is a built-in task (which brings its
    own reward). The built-in defaults (task add1, its exact_numeric; math_verify for data files) apply only to a
    bare command line: a file that lost its task or reward in a conversion must not train something else."""
    from ..data.registry import TASKS, default_reward_for

    if "data.task" not in given:
        raise ConfigError(
            f"{source} names no data (data.task; TRL's dataset_name, verl's data.train_files): set it in the file (a "
            "data file, a datasets name or a built-in task) or pass --task; the built-in add1 task applies only to a "
            "bare command line"
        )
    if not rewards and task not in TASKS:
        fallback = default_reward_for(task, answer_key)
        raise ConfigError(
            f"{source} names no reward for data.task={task!r} (reward.functions; TRL's reward_funcs, verl's "
            "custom_reward_function): set it in the file or pass --set reward.functions=[NAME or module:function]; "
            f"the {fallback or 'built-in'} default applies only to a bare command line"
        )


def _bare_defaults(given: set[str], cfg: Config) -> str | None:
    """The line naming the built-in defaults a bare command line trains with (no --config), or None when the
    command line chose both the task and the reward."""
    from ..data.registry import default_reward_for

    parts = [] if "data.task" in given else [f"task {cfg.data.task}"]
    if not cfg.reward.functions:
        reward = default_reward_for(cfg.data.task, cfg.data.answer_key)
        parts.append(f"reward {reward} (the task's own)" if "data.task" not in given else f"reward {reward}")
    if not parts:
        return None
    return (
        f"grpokit: built-in defaults: {', '.join(parts)}; choose with --task and --set reward.functions=[...] "
        "(or --config FILE)"
    )


def _apply_config_file(cfg: Config, config_file: str, later: set[str]) -> set[str]:
    """Apply `--config FILE` onto cfg (`later`: the keys set after it); the dotted keys it set."""
    p = Path(config_file)
    if not p.exists():
        raise ConfigError(f"--config {config_file!r} does not exist")
    from .compat.files import read_config

    data = read_config(p) or {}  # YAML, or TOML by its suffix (prime-rl)
    if not isinstance(data, dict):
        raise ConfigError(f"{config_file}: expected config sections (e.g. train: {{steps: 10}}), got {data!r}")
    translated = _foreign_to_grpokit(data, config_file, cfg, later)
    from .recipes import read_yaml

    # grpokit's own YAML: each scalar as written, typed by its key (keys.SetText)
    texts = read_yaml(p, literal=True) if translated is data and p.suffix != ".toml" else None
    data = translated
    apply_mapping(cfg, data, config_file, texts)
    return {f"{section}.{k}" for section, body in data.items() if isinstance(body, dict) for k in body}


def build_config(
    recipe: str = "grpo",
    overrides: list[str] | None = None,
    config_file: str | None = None,
    job: bool = False,
    **direct: Any,
) -> Config:
    """defaults <- recipe <- config file <- direct values (dotted keys) <- `--set` overrides; validated and bound.

    Component parameters the recipe set belong to the component it chose: when a later layer switches that
    component (`--set algo.policy_loss=gspo` on grpo), the recipe's values for it are dropped and the new
    component's own defaults apply, unless the later layer sets them too. `job`: the config of a training run
    (`grpokit train`): a config file must name its data and reward (`check_job`); without one, the built-in
    defaults used are named on stderr before anything else."""
    cfg = Config(recipe=recipe)
    apply_mapping(cfg, load_recipe(recipe), f"recipe {recipe}")
    cfg.recipe = Path(recipe).stem if recipe.endswith((".yaml", ".yml")) else recipe
    recipe_choices = cfg.algo.choices()
    given = {k for k, v in direct.items() if v is not None} | {parse_override(o)[0] for o in overrides or []}
    from_file: set[str] = set()
    if config_file:
        from_file = _apply_config_file(cfg, config_file, given)
    later = {k.removeprefix("algo.") for k in from_file if k.startswith("algo.")}  # algo keys set after the recipe
    for k, v in direct.items():
        if v is not None:
            set_key(cfg, k, v)
            later.add(k.removeprefix("algo."))
    for o in overrides or []:
        k, v = parse_override(o)
        set_key(cfg, k, v)
        later.add(k.removeprefix("algo."))
    cfg.algo.forget_switched(recipe_choices, keep=later)
    if job and config_file:
        check_job(config_file, from_file | given, cfg.data.task, cfg.reward.functions, cfg.data.answer_key)
    resolve_config(cfg)
    if job and not config_file and (line := _bare_defaults(given, cfg)):
        print(line, file=sys.stderr)  # after the checks: a refused command line prints its one error line only
    return cfg


def config_from_dict(data: dict[str, Any]) -> Config:
    """Rebuild a Config from `to_dict()` output (resume)."""
    cfg = Config(recipe=str(data.get("recipe", "grpo")))
    apply_mapping(cfg, {k: v for k, v in data.items() if k != "recipe"}, "saved config")
    cfg.algo.drop_unused()  # a config saved before components declared their parameters held every key
    return resolve_config(cfg)
