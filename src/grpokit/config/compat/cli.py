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
    try:
        found = translate(data, label, set(all_keys(Config())), fmt=fmt, strict=False)
    except ValueError as e:
        raise ConfigError(str(e)) from None
    if found is None:  # a format was named, so translate always answers
        raise ConfigError(f"{label}: not a {fmt} config")
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


def register_cli(sub: Any) -> None:
    c = sub.add_parser("config", help="write the grpokit config equivalent to a TRL GRPOConfig or verl config")
    c.add_argument("action", choices=["from-trl", "from-verl"], help="the format of the sources")
    c.add_argument("sources", nargs="+", help="from-trl: a YAML file; from-verl: YAML files and/or key=value overrides")
    c.add_argument("--out", "-o", default=None, help="write the YAML here (default: stdout)")
    c.set_defaults(fn=cmd_config)
