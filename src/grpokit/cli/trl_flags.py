"""TRL's flag names on `grpokit train` / `grpokit preflight`, translated by meaning as `--config` translates a TRL file.

`grpokit train --learning_rate 3e-6 --num_generations 4` reads the flags argparse did not take
(`grpokit.config.compat.flags`), translates them with the TRL translation (`grpokit.config.compat.trl`, the same
code `--config trl.yaml` and `grpokit config from-trl` use) and applies the grpokit keys as `--set` overrides ahead
of the user's own `--set` (which win). Each flag gets one line on stderr saying what it became. A TRL `--config`
file and TRL flags are translated together, as `trl grpo --config F --flag V` merges them (the flags win), because
batch sizes mean something only together (`num_generations` divides the completions of
`per_device_train_batch_size`). A TRL flag with no grpokit meaning is refused, naming the flag and what to do.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

TAKES_TRL_FLAGS = ("train", "preflight")
# grpokit's own options and the key each sets: given on the command line, they win over a translated file's value
DIRECT = {"model": "model.name", "task": "data.task", "seed": "train.seed", "steps": "train.steps",
          "output_dir": "train.output_dir"}  # fmt: skip


def _trl_file(path: str | None) -> dict[str, Any] | None:
    """The mapping of a TRL config file, or None when `path` is no file or another format."""
    from ..config import read_yaml
    from ..config.compat import detect

    if not path or not Path(path).is_file():
        return None
    data = read_yaml(Path(path)) or {}
    return data if isinstance(data, dict) and detect(data) == "trl" else None


def _own_options(args: argparse.Namespace) -> dict[str, str]:
    """{grpokit key: "--option value"} for grpokit's own options given on this command line (a value that is the
    subcommand's default, such as preflight's --model, counts as not given)."""
    from . import args as grammar

    sub = argparse.ArgumentParser().add_subparsers(dest="command")
    grammar.train(sub)
    grammar.package_commands(sub)  # preflight among them
    parser = sub.choices.get(getattr(args, "command", None))
    defaults = {attr: parser.get_default(attr) for attr in DIRECT} if parser is not None else {}
    out = {}
    for attr, key in DIRECT.items():
        value = getattr(args, attr, None)
        if value is not None and value != defaults.get(attr):
            out[key] = f"--{attr.replace('_', '-')} {value}"
    return out


def _check_job(args: argparse.Namespace, keys: dict[str, Any], later: set[str]) -> None:
    """`grpokit.config.build.check_job` on a TRL file translated with its flags; exit 2 when it names no data or
    no reward."""
    from ..config import ConfigError
    from ..config.build import check_job

    given = set(keys) | later
    task = args.task or keys.get("data.task") or ""
    try:
        check_job(args.config, given, task, ["given"] if "reward.functions" in given else [], None)
    except ConfigError as e:
        _fail(args.command, str(e))


def _fail(command: str, message: str) -> None:
    print(f"grpokit {command}: error: {message}", file=sys.stderr)
    raise SystemExit(2)


def apply_trl_flags(args: argparse.Namespace, extra: list[str]) -> None:
    """Translate the TRL flags among `extra` (and `args.reward_module`) into `args.set`; exit 2 on a bad one."""
    command = getattr(args, "command", "")
    module = getattr(args, "reward_module", None) if command in TAKES_TRL_FLAGS else None  # config from-trl: its own
    if not extra and not module:
        return
    if command not in TAKES_TRL_FLAGS:
        _fail(command, f"unrecognized arguments: {' '.join(extra)}")
    from ..config import Config, all_keys
    from ..config.compat import flags as trl_flags
    from ..config.compat import translate

    try:
        given = trl_flags.parse_flags(extra)
    except trl_flags.FlagError as e:
        _fail(command, str(e))
    base = _trl_file(getattr(args, "config", None))
    data = {**(base or {}), **given, **({"reward_module": module} if module else {})}
    label = f"{args.config} with TRL flags" if base is not None else "TRL flags"
    own = _own_options(args)  # grpokit's own options win over a file's value and over a TRL flag in the same command
    later = set(own) | {o.split("=", 1)[0].strip() for o in args.set or []}  # what the user sets after the file
    try:
        t = translate(data, label, set(all_keys(Config())), fmt="trl", later=later)
    except ValueError as e:
        _fail(command, str(e))
    assert t is not None
    refused = [k for k in given if k in t.unsupported]
    if refused:
        from ..config.compat import foreign_hint

        shown = "; ".join(f"--{k} {given[k]}" + (foreign_hint(k) or ": no grpokit equivalent") for k in refused)
        _fail(command, f"TRL flags with no grpokit meaning (the run would differ from TRL's): {shown}; drop them")
    yielded: dict[str, list[str]] = {}  # TRL flag -> the own options it yields to (--model_name_or_path -> --model)
    for key, flags in trl_flags.produced_by(t, set(given)).items():
        for flag in flags if key in own else ():
            yielded.setdefault(flag, []).append(own[key])
    for line in trl_flags.describe(t, given):
        name = line.split(" ", 1)[0].removeprefix("--")
        said = f"yields to {', '.join(yielded[name])} (grpokit's own options win)" if name in yielded else ""
        print(f"grpokit: TRL flag {line.split(' -> ')[0] + ' ' + said if said else line}", file=sys.stderr)
    if base is not None:
        print(f"grpokit: {t.message()}", file=sys.stderr)
        if command == "train":  # the file's data and reward, or what is given after it: never a built-in default
            _check_job(args, t.keys, later)
        args.config = None  # translated here, together with the flags
    keys = set(given) | ({"reward_module"} if module else set())
    translated = [o for o in trl_flags.overrides(t, keys, whole_file=base is not None) if o.split("=")[0] not in own]
    args.set = translated + list(args.set or [])
    if t.recipe and getattr(args, "recipe", None) == "grpo":
        args.recipe = t.recipe
