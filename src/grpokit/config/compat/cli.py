"""`grpokit config from-trl FILE` and `grpokit config from-verl FILE|KEY=VALUE...`: the equivalent grpokit YAML.

The YAML goes to stdout (or `--out`), commented with the foreign key behind each value; the message naming what
was not mapped goes to stderr. The result is checked by building a grpokit config from it, so a file written here
trains as it is: `grpokit train --config grpokit.yaml`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any


def _read(fmt: str, sources: list[str]) -> tuple[dict[str, Any], str]:
    """verl takes YAML files and/or dotted overrides (later ones win); TRL one YAML file."""
    from .. import ConfigError, read_yaml
    from . import parse_dotted

    data: dict[str, Any] = {}
    files = [s for s in sources if "=" not in s]
    if fmt == "trl" and (len(sources) != 1 or not files):
        raise ConfigError("grpokit config from-trl takes one TRL GRPOConfig YAML file")
    for src in files:
        if not Path(src).is_file():
            raise ConfigError(f"{src}: no such file")
        body = read_yaml(Path(src)) or {}
        if not isinstance(body, dict):
            raise ConfigError(f"{src}: expected a mapping of config keys, got {type(body).__name__}")
        data.update(body)
    if fmt == "verl":
        from .verl import flatten

        data = {**flatten(data), **parse_dotted([s for s in sources if "=" in s])}
    return data, " ".join(sources)


def cmd_config(args: argparse.Namespace) -> int:
    from .. import Config, ConfigError, all_keys, apply_mapping, resolve_config
    from . import translate

    fmt = args.action.removeprefix("from-")
    data, label = _read(fmt, args.sources)
    if getattr(args, "reward_module", None):
        if fmt != "trl":
            raise ConfigError("--reward-module names where a TRL recipe's reward_funcs live: it is for from-trl")
        data["reward_module"] = args.reward_module
    try:
        found = translate(data, label, set(all_keys(Config())), fmt=fmt, strict=False)
    except ValueError as e:
        raise ConfigError(str(e)) from None
    if found is None:  # a format was named, so translate always answers
        raise ConfigError(f"{label}: not a {fmt} config")
    lost = dropped(found, data, fmt)
    if found.refused or lost:
        print(f"grpokit: {found.message()}", file=sys.stderr)
        what = "; ".join(lost + [r for r in found.refused if not any(r in x for x in lost)])
        raise ConfigError(f"config from-{fmt}: the conversion would drop {what}; nothing written")
    cfg = Config(recipe=found.recipe or "grpo")
    apply_mapping(cfg, found.to_mapping(), label)
    resolve_config(cfg)  # a written file must train as it is
    text = found.to_yaml()
    print(f"grpokit: {found.message()}", file=sys.stderr)
    if args.out:
        Path(args.out).write_text(text)
        print(f"wrote {args.out}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


# what a conversion must carry when the source names it: (grpokit key, what it is, the foreign keys naming it);
# verl without custom_reward_function is scored by its data's data_source, so its train files name the reward too
CARRIED: dict[str, list[tuple[str, str, tuple[str, ...]]]] = {
    "trl": [
        ("data.task", "the data", ("dataset_name",)),
        ("reward.functions", "the reward", ("reward_funcs",)),
        ("model.name", "the model", ("model_name_or_path",)),
    ],
    "verl": [
        ("data.task", "the data", ("data.train_files",)),
        ("reward.functions", "the reward", ("custom_reward_function.path", "reward_model.enable", "data.train_files")),
        ("model.name", "the model", ("actor_rollout_ref.model.path",)),
    ],
}


def dropped(found: Any, data: dict[str, Any], fmt: str) -> list[str]:
    """What the source names (data, reward, model) that the translation does not carry, each with its reason: the
    refusal about it, or its foreign keys' values and the fix."""
    out = []
    for key, what, names in CARRIED[fmt]:
        named = [n for n in names if data.get(n)]
        if not named or key in found.keys:
            continue
        why = [r for r in found.refused if any(n in r for n in names)] or [
            ", ".join(f"{n}={data[n]!r:.80}" for n in named) + " is not supported (see the 'not supported' line); "
            f"give a value grpokit reads, or drop it and pass {key} to grpokit train (--set {key}=...)"
        ]
        out.append(f"{what} ({'; '.join(why)})")
    return out
