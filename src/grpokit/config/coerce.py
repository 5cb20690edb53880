"""Coercion of a YAML or `--set` value to a config field's declared type (bool, int, float, str, list, dict,
Optional), or one ConfigError naming the key, the value and what it must be.

Scalar types are registered in `SCALARS`; containers and unions are taken apart and their parts coerced.
"""

from __future__ import annotations

import math
import types
import typing
from collections.abc import Callable
from typing import Any

from .errors import ConfigError

NULL_WORDS = ("null", "none", "~")  # strings an Optional field reads as None (unless the field's choices name them)


def _to_bool(value: Any, key: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false", "yes", "no", "1", "0"):
        return value.lower() in ("true", "yes", "1")
    raise ConfigError(f"{key}={value!r} must be true or false")


def _to_int(value: Any, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ConfigError(f"{key}={value!r} must be an integer")
    try:
        f = float(value)
    except (ValueError, OverflowError):
        raise ConfigError(f"{key}={value!r} must be an integer") from None
    if not math.isfinite(f) or f != int(f):
        raise ConfigError(f"{key}={value!r} must be an integer")
    return int(f)


def to_float(value: Any, key: str) -> float:
    if isinstance(value, bool):
        raise ConfigError(f"{key}={value!r} must be a number")
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{key}={value!r} must be a number") from None


def _to_str(value: Any, key: str) -> str:
    if callable(value):
        raise ConfigError(
            f"{key}={value!r}: a function is not a config value; pass reward functions to "
            "grpokit.train(reward_funcs=[...]) (recorded by qualified name) or name them as 'module:function'"
        )
    if isinstance(value, (dict, list)) or value is None:
        raise ConfigError(f"{key}={value!r} must be a string")
    return str(value)


SCALARS: dict[Any, Callable[[Any, str], Any]] = {bool: _to_bool, int: _to_int, float: to_float, str: _to_str}


def _union(value: Any, args: tuple[Any, ...], key: str, choices: tuple[Any, ...]) -> Any:
    """An Optional/Union field: None (or the word null/none) is None when the union allows it, unless the field's
    declared `choices` name that word as a string (`algo.adv_scale=none` is the choice "none", not unset);
    otherwise the first member type that accepts the value."""
    if isinstance(value, str) and value in choices:
        return value
    if type(None) in args and (value is None or (isinstance(value, str) and value.lower() in NULL_WORDS)):
        return None
    errors = []
    for a in args:
        if a is type(None):
            continue
        try:
            return coerce(value, a, key)
        except ConfigError as e:
            errors.append(str(e))
    raise ConfigError(errors[0] if errors else f"{key}: bad value {value!r}")


def coerce(value: Any, tp: Any, key: str, choices: tuple[Any, ...] = ()) -> Any:
    """Coerce a YAML/CLI value to the field type `tp`, or raise ConfigError naming `key`. `choices`: the field's
    declared valid values (a string among them is never read as null)."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        return _union(value, args, key, choices)
    if tp is Any:
        return value
    if origin is list:
        if isinstance(value, str):
            value = [v for v in value.split(",") if v]
        if not isinstance(value, list):
            raise ConfigError(f"{key}={value!r} must be a list (e.g. a,b or [a, b])")
        return [coerce(v, args[0], key) if args else v for v in value]
    if origin is dict or tp is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{key}={value!r} must be a mapping")
        return value
    if tp in SCALARS:
        return SCALARS[tp](value, key)
    return value
