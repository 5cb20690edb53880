"""`grpokit config from-trl FILE`, `from-verl FILE|KEY=VALUE...` (and from-easyr1, -skyrl, -nemo-rl, -prime-rl,
-axolotl, -ms-swift, -openrlhf; `grpokit config from` recognises which): the equivalent grpokit YAML.

The YAML goes to stdout (or `--out`), commented with the foreign key behind each value; the message naming what
was not mapped goes to stderr. The result is checked by building a grpokit config from it, so a file written here
trains as it is: `grpokit train --config grpokit.yaml`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

# how each format's sources are given: one file, files and/or key=value overrides, or --flag value command lines
ONE_FILE = {"trl", "easyr1", "nemo-rl", "prime-rl", "axolotl"}
OVERRIDES = {"verl", "skyrl"}
FLAGS = {"ms-swift", "openrlhf"}
ACTIONS = ["from", *(f"from-{f}" for f in ("trl", "verl", "easyr1", "skyrl", "nemo-rl", "prime-rl", "axolotl",
                                           "ms-swift", "openrlhf"))]  # fmt: skip


def _read(fmt: str, sources: list[str]) -> tuple[dict[str, Any], str]:
    """The sources as one mapping: YAML/TOML files and dotted overrides (later ones win), or --flag command lines;
    `fmt` "" (`grpokit config from`) reads whatever the sources are."""
    from .. import ConfigError
    from . import parse_dotted
    from .files import read_config
    from .table import parse_flags

    if not sources:
        raise ConfigError(f"grpokit config from{'-' + fmt if fmt else ''}: give the config file (or its arguments)")
    label = " ".join(sources)
    if fmt in FLAGS or (not fmt and sources[0].startswith("--")):
        try:
            return parse_flags(sources), label
        except ValueError as e:
            raise ConfigError(f"config from-{fmt or 'flags'}: {e}") from None
    files = [s for s in sources if "=" not in s]
    if fmt in ONE_FILE and (len(sources) != 1 or not files):
        raise ConfigError(f"grpokit config from-{fmt} takes one config file")
    data: dict[str, Any] = {}
    for src in files:
        if not Path(src).is_file():
            raise ConfigError(f"{src}: no such file")
        body = read_config(Path(src)) or {}
        if not isinstance(body, dict):
            raise ConfigError(f"{src}: expected a mapping of config keys, got {type(body).__name__}")
        data.update(body)
    if fmt in OVERRIDES or (not fmt and len(files) < len(sources)):
        from .verl import flatten

        data = {**flatten(data), **parse_dotted([s for s in sources if "=" in s])}
    return data, label


def _split_out(args: argparse.Namespace) -> list[str]:
    """grpokit's own options among the sources (after the action they are read with them; a script's `$@` passes
    them there): `-o FILE` / `--out FILE` -> args.out, `--reward-module M` -> args.reward_module."""
    sources: list[str] = []
    items = iter(args.sources)
    for item in items:
        name, eq, value = item.partition("=")
        dest = {"-o": "out", "--out": "out", "--reward-module": "reward_module"}.get(name)
        if dest is None:
            sources.append(item)
        else:
            setattr(args, dest, value if eq else next(items, None))
    return sources


def _format(action: str, data: dict[str, Any], label: str) -> str:
    """The trainer the sources are a config of: the one named, unless they are recognisably another's (then one
    line naming it and the command); `grpokit config from` takes the one recognised."""
    from .. import ConfigError
    from . import NAMES, detect

    named = action.removeprefix("from").removeprefix("-")
    found = detect(data)
    if not named:
        if found is None:
            raise ConfigError(
                f"{label[:100]}: not a config of a trainer grpokit reads ({', '.join(NAMES.values())}); "
                "a grpokit config trains as it is: grpokit train --config FILE"
            )
        return found
    if found is not None and found != named:
        raise ConfigError(
            f"{label[:100]} is {_a(NAMES[found])} config, not {_a(NAMES[named])} one: grpokit config from-{found} "
            "(or grpokit config from, which recognises it)"
        )
    return named


def cmd_config(args: argparse.Namespace) -> int:
    from .. import Config, ConfigError, all_keys, apply_mapping, resolve_config
    from . import translate
    from .verl import flatten

    sources = _split_out(args)
    data, label = _read(args.action.removeprefix("from").removeprefix("-"), sources)
    fmt = _format(args.action, data, label)
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
    if not any(carried(found, k) for k in ("data.task", "reward.functions", "rollout.group_size")):
        keys = ", ".join(list(found.unsupported)[:8]) or "none"
        raise ConfigError(
            f"config from-{fmt}: {label[:100]} is {_a(found.source)} config, but none of its data, reward or group "
            f"size maps to grpokit (keys with no grpokit meaning: {keys}); nothing written"
        )
    lost = dropped(found, flatten(data), fmt)
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
    "easyr1": [
        ("data.task", "the data", ("data.train_files",)),
        ("reward.functions", "the reward", ("worker.reward.reward_function", "worker.reward.score_function")),
        ("model.name", "the model", ("worker.actor.model.model_path",)),
    ],
    "skyrl": [
        ("data.task", "the data", ("data.train_data",)),
        ("reward.functions", "the reward", ("environment.env_class",)),
        ("model.name", "the model", ("trainer.policy.model.path",)),
    ],
    "nemo-rl": [
        ("data.task", "the data", ("data.dataset_name", "data.train.dataset_name")),
        ("model.name", "the model", ("policy.model_name",)),
    ],
    "prime-rl": [
        (
            "agent.environment",
            "the environment (its data and reward)",
            ("orchestrator.train.source", "orchestrator.env"),
        ),
        ("model.name", "the model", ("model.name",)),
    ],
    "axolotl": [
        ("data.task", "the data", ("datasets",)),
        ("reward.functions", "the reward", ("trl.reward_funcs",)),
        ("model.name", "the model", ("base_model",)),
    ],
    "ms-swift": [
        ("data.task", "the data", ("dataset",)),
        ("reward.functions", "the reward", ("reward_funcs",)),
        ("model.name", "the model", ("model",)),
    ],
    "openrlhf": [
        ("data.task", "the data", ("data.prompt_dataset", "prompt_data")),
        ("reward.functions", "the reward", ("reward.remote_url", "train.agent_func_path", "remote_rm_url")),
        ("model.name", "the model", ("actor.model_name_or_path", "pretrain")),
    ],
}


def carried(found: Any, key: str) -> bool:
    """Whether the translation sets `key` from a key the source gives (not from the trainer's defaults alone)."""
    origins = [f for f, targets in found.mapped.items() if key in targets]
    return key in found.keys and any(f not in found.defaults for f in origins)


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


def _a(name: str) -> str:
    return ("an " if name[0].lower() in "aeiou" else "a ") + name
