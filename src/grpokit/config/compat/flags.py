"""TRL's command-line flags (`trl grpo --learning_rate 3e-6 --num_generations 4 ...`) read as a TRL config mapping.

The flags are parsed as TRL's `HfArgumentParser` takes them: `--name value`, `--name=value`, several values for a
list field (`--reward_funcs accuracy format`), a bare boolean flag meaning true (`--bf16`). Values are read as
bool / int / float / string, as the field types of TRL's dataclasses make them (`none` stays the string TRL's
`report_to` takes). A name that is no field of
TRL's GRPOConfig, `trl grpo` script or ModelConfig (`trl_names.py`) is refused with the closest TRL name.

`overrides` turns a translation of those flags into grpokit `--set` strings: with flags alone, only the grpokit
keys a flag produced (a TRL default behind no flag does not replace the recipe's value); with a TRL config file,
every key of the file's translation, as `--config` alone would apply them.
"""

from __future__ import annotations

import difflib
from typing import Any

import yaml

from . import trl_names
from .translation import Translation


class FlagError(ValueError):
    """A token on the command line that is neither a grpokit option nor a TRL flag."""


def _value(raw: str) -> Any:
    low = raw.lower()
    if low in ("true", "false"):
        return low == "true"
    for conv in (int, float):
        try:
            return conv(raw)
        except ValueError:
            pass
    return raw


def _name(token: str) -> str:
    name = token[2:].split("=", 1)[0]
    if name in trl_names.ALL:
        return name
    close = difflib.get_close_matches(name, sorted(trl_names.ALL), n=1, cutoff=0.75)
    hint = f"; did you mean --{close[0]} (TRL)?" if close else ""
    raise FlagError(f"{token.split('=', 1)[0]} is neither a grpokit option nor a TRL GRPOConfig field{hint}")


def parse_flags(tokens: list[str]) -> dict[str, Any]:
    """{TRL field: value} from the command-line tokens argparse did not take; FlagError on anything else."""
    out: dict[str, Any] = {}
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if not token.startswith("--"):
            raise FlagError(f"unexpected argument {token!r} (not the value of a --flag)")
        name = _name(token)
        if "=" in token:
            values = [token.split("=", 1)[1]]
            i += 1
        else:
            j = i + 1
            while j < len(tokens) and not tokens[j].startswith("--"):
                j += 1
            values, i = tokens[i + 1 : j], j
        parsed = [_value(v) for v in values]
        out[name] = True if not parsed else parsed[0] if len(parsed) == 1 and name not in LIST_FIELDS else parsed
    return out


# TRL fields that are lists (HfArgumentParser takes several values after the flag)
LIST_FIELDS = {"reward_funcs", "reward_weights", "report_to", "lora_target_modules", "lora_modules_to_save"}


def _dump(value: Any) -> str:
    text = yaml.safe_dump(value, default_flow_style=True, width=1_000_000).strip()
    return text.removesuffix("\n...").removesuffix("...").strip()


def produced_by(t: Translation, given: set[str]) -> dict[str, list[str]]:
    """grpokit key -> the given foreign keys behind it (keys no given key produced are left out)."""
    out: dict[str, list[str]] = {}
    for foreign, targets in t.mapped.items():
        if foreign in given:
            for target in targets:
                out.setdefault(target, []).append(foreign)
    return out


def overrides(t: Translation, given: set[str], whole_file: bool) -> list[str]:
    """`KEY=VALUE` strings for `--set`: every key of `t` (a file's translation) or only those `given` produced."""
    keys = t.keys if whole_file else {k: t.keys[k] for k in produced_by(t, given)}
    return [f"{k}={_dump(v)}" for k, v in keys.items()]


def describe(t: Translation, flags: dict[str, Any]) -> list[str]:
    """One line per flag: what it was translated to, ignored as bookkeeping, or why it is refused."""
    lines = []
    for name, value in flags.items():
        shown = " ".join(map(str, value)) if isinstance(value, list) else str(value)
        targets = t.mapped.get(name)
        if targets:
            to = ", ".join(f"{k}={_dump(t.keys[k])}" for k in targets)
            lines.append(f"--{name} {shown} -> {to}")
        elif targets is not None:
            lines.append(f"--{name} {shown} -> grpokit's behaviour (nothing to set)")
        elif name in t.ignored:
            lines.append(f"--{name} {shown} -> ignored (no effect on what is learned)")
    return lines
