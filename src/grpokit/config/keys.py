"""Dotted config keys: `section.key=value` overrides parsed, set with type checking, nested mappings applied;
an unknown key is one error with a did-you-mean (TRL's and verl's names first, then the closest grpokit key)."""

from __future__ import annotations

import dataclasses
import difflib
import math
import typing
from typing import Any

import yaml

from ..common import safe_yaml
from .coerce import coerce
from .errors import ConfigError
from .ranges import as_number, check_range
from .sections import Config

RECIPE_META_KEYS = ("description", "paper", "spec")


class SetText(str):
    """A value as its text was written (`--set KEY=TEXT`, a scalar of a config file): `set_key` reads it by the
    type the key declares, so `no`, `1.10`, `12:30` and `010` stay that text for a str key and `010` is 10 for an
    int key (YAML 1.1 would make them False, 1.1, 750 and 8). A mapping or `Any` key reads it as YAML."""


def _wants_yaml(tp: Any) -> bool:
    """Whether a key of type `tp` takes YAML's typed values (a mapping, or anything) rather than text."""
    if tp is Any or tp is dict or typing.get_origin(tp) is dict:
        return True
    return any(_wants_yaml(a) for a in typing.get_args(tp) if a is not type(None))


def typed_text(text: str, tp: Any, dotted: str) -> Any:
    """`text` parsed for a key of type `tp`: YAML with every scalar a string (`coerce` then types it), or typed
    YAML for a mapping / `Any` key; text that is not YAML stays the text."""
    if text == "":
        return ""
    try:
        return safe_yaml.load(text, literal=not _wants_yaml(tp))
    except safe_yaml.YAMLLimitError as e:
        raise ConfigError(f"{dotted}={text[:80]!r}: YAML refused ({e.problem}); give a plain value") from None
    except yaml.YAMLError:
        return str(text)


def type_hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def did_you_mean(key: str, valid: list[str]) -> str:
    close = difflib.get_close_matches(key, valid, n=1, cutoff=0.5)
    return f" Did you mean {close[0]!r}?" if close else ""


def all_keys(cfg: Config) -> list[str]:
    keys = []
    for f in dataclasses.fields(cfg):
        sub = getattr(cfg, f.name)
        if dataclasses.is_dataclass(sub):
            keys += [f"{f.name}.{g.name}" for g in dataclasses.fields(sub)]
        else:
            keys.append(f.name)
    return keys


def key_hint(key: str, valid: list[str]) -> str:
    """Did-you-mean: TRL's and verl's names first (`learning_rate` -> train.lr), else the closest grpokit key; in a
    known section the closest key of that section by its own name, so a shared `algo.` prefix suggests nothing."""
    from .compat import foreign_hint

    section, _, name = key.partition(".")
    same = [k.partition(".")[2] for k in valid if k.startswith(section + ".")]
    if not same or not name:
        return foreign_hint(key) or did_you_mean(key, valid)
    close = difflib.get_close_matches(name, same, n=1, cutoff=0.6)
    return foreign_hint(key) or (f" Did you mean {section + '.' + close[0]!r}?" if close else "")


def set_key(cfg: Config, dotted: str, value: Any) -> None:
    """Set `section.key` (e.g. `algo.eps_high`) with type and range checking; unknown keys suggest the closest
    one."""
    parts = dotted.split(".")
    valid = all_keys(cfg)
    if len(parts) == 1 and parts[0] == "recipe":
        cfg.recipe = str(value)
        return
    if len(parts) != 2 or not hasattr(cfg, parts[0]) or not dataclasses.is_dataclass(getattr(cfg, parts[0])):
        raise ConfigError(f"unknown config key {dotted!r}.{key_hint(dotted, valid)} Keys look like algo.eps_high")
    section = getattr(cfg, parts[0])
    hints = type_hints(type(section))
    if parts[1] not in hints or parts[1] not in {f.name for f in dataclasses.fields(section)}:
        raise ConfigError(f"unknown config key {dotted!r}.{key_hint(dotted, valid)}")
    choices = getattr(type(section), "CHOICES", {}).get(parts[1], ())  # a section's declared valid values
    if isinstance(value, SetText):
        value = typed_text(value, hints[parts[1]], dotted)
    x = as_number(value)
    if x is not None and not math.isfinite(x):  # "1e400", "inf", "nan": out of every range, refused before int()
        check_range(dotted, value)
    value = coerce(value, hints[parts[1]], dotted, choices)
    check_range(dotted, value)  # grpokit.config.ranges: before anything is built
    setattr(section, parts[1], value)


def apply_mapping(cfg: Config, data: dict[str, Any], source: str, texts: Any = None) -> None:
    """Apply a nested mapping (a recipe or config file) onto cfg; `texts`, the same file read with every scalar
    a string (`safe_yaml.load(literal=True)`), gives each scalar value as written, typed by its key."""
    for sec, body in data.items():
        if not isinstance(sec, str):
            raise ConfigError(f"{source}: top-level key {sec!r} is not a section name (e.g. train, algo, rollout)")
        if sec in RECIPE_META_KEYS:
            continue
        if sec == "recipe":
            cfg.recipe = str(body)
            continue
        if not isinstance(body, dict):
            raise ConfigError(
                f"{source}: top-level key {sec!r} must be a section mapping.{did_you_mean(sec, all_keys(cfg))}"
            )
        written = texts.get(sec) if isinstance(texts, dict) else None
        for k, v in body.items():
            text = written.get(str(k)) if isinstance(written, dict) else None
            if isinstance(text, str) and not isinstance(v, (dict, list)):
                v = SetText(text)
            try:
                set_key(cfg, f"{sec}.{k}", v)
            except ConfigError as e:
                raise ConfigError(f"{source}: {e}") from None


def parse_override(text: str) -> tuple[str, Any]:
    """`algo.eps_high=0.28` -> ("algo.eps_high", SetText("0.28")): `set_key` types the text by the key's type."""
    if "=" not in text:
        raise ConfigError(f"override {text!r} must look like section.key=value (e.g. algo.eps_high=0.28)")
    key, raw = text.split("=", 1)
    try:
        safe_yaml.load(raw, literal=True)  # refused here, before anything is set: a nesting or alias bomb
    except safe_yaml.YAMLLimitError as e:
        raise ConfigError(f"--set {text[:80]!r}: YAML refused ({e.problem}); give a plain value") from None
    except yaml.YAMLError:
        pass
    return key.strip(), SetText(raw)
