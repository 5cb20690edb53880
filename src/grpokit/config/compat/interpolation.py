"""OmegaConf-style `${...}` interpolations in a flattened verl config, resolved without OmegaConf.

verl's configs are Hydra/OmegaConf YAML, and its fully resolved config (`_generated_ppo_trainer.yaml`) still holds
interpolations; read as plain YAML they are strings such as `checkpoints/${trainer.project_name}/${...}`, which
would become folder names literally. Resolved here, as OmegaConf resolves them (omegaconf.readthedocs.io,
"Variable interpolation", "oc.select", "oc.env"):

* `${a.b.c}`: the value at that absolute key; `${.x}` (`${..x}`): a key beside (above) the one being resolved;
* `${oc.select:key,default}`: the value at `key`, else `default` (read as YAML); `${oc.env:NAME,default}`: the
  environment variable, else `default`;
* a value that is only an interpolation takes the referenced value as it is (a number stays a number); one inside
  a longer string is replaced by its text.

What cannot be resolved (a missing key without a default, another resolver, a cycle) is returned separately, so
the translation can refuse it where it matters instead of writing `${...}` into a path.
"""

from __future__ import annotations

import os
import re
from typing import Any

import yaml

_REF = re.compile(r"\$\{([^${}]*)\}")
_MISSING = object()


class Unresolvable(ValueError):
    """An interpolation this resolver cannot resolve."""


def _parse(text: str) -> Any:
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


def _absolute(ref: str, key: str) -> str:
    """`.x` / `..x` relative to `key`'s parent -> an absolute dotted key."""
    if not ref.startswith("."):
        return ref
    dots = len(ref) - len(ref.lstrip("."))
    parent = key.split(".")[:-dots] if dots <= key.count(".") + 1 else []
    return ".".join([*parent, ref[dots:]])


def _lookup(flat: dict[str, Any], key: str, ref: str, seen: tuple[str, ...]) -> Any:
    target = _absolute(ref.strip(), key)
    if target in seen:
        raise Unresolvable(f"a cycle through {target}")
    if target not in flat:
        return _MISSING
    return _resolve_value(flat, target, flat[target], (*seen, target))


def _one(flat: dict[str, Any], key: str, body: str, seen: tuple[str, ...]) -> Any:
    """The value of one `${body}`."""
    body = " ".join(body.split())  # YAML may fold a long interpolation over lines
    if ":" in body:
        resolver, _, args = body.partition(":")
        ref, _, default = args.partition(",")
        if resolver == "oc.select":
            found = _lookup(flat, key, ref, seen)
            return (_parse(default.strip()) if default else None) if found is _MISSING else found
        if resolver == "oc.env":
            value = os.environ.get(ref.strip())
            return value if value is not None else (_parse(default.strip()) if default else None)
        raise Unresolvable(f"the resolver {resolver!r}")
    found = _lookup(flat, key, body, seen)
    if found is _MISSING:
        raise Unresolvable(f"no key {_absolute(body.strip(), key)!r}")
    return found


def _resolve_value(flat: dict[str, Any], key: str, value: Any, seen: tuple[str, ...]) -> Any:
    if not isinstance(value, str) or "${" not in value:
        return value
    whole = _REF.fullmatch(value.strip())
    if whole:
        return _one(flat, key, whole.group(1), seen)
    return _REF.sub(lambda m: str(_one(flat, key, m.group(1), seen)), value)


def resolve(flat: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """(the flat config with every `${...}` resolved, {key: "its raw value: why not"} for those that cannot be)."""
    out: dict[str, Any] = {}
    failed: dict[str, str] = {}
    for key, value in flat.items():
        try:
            out[key] = _resolve_value(flat, key, value, (key,))
        except Unresolvable as e:
            failed[key] = f"{value} ({e})"
    return out, failed
