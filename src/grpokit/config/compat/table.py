"""One table per trainer: its config keys -> grpokit keys, by meaning; every key mapped, ignored or unsupported.

A `Spec` is a trainer's table: `renames` (its dotted key -> grpokit key, converter), `defaults` (its values for
keys a file leaves unset, where they decide what is learned), `ignored` (fnmatch patterns of keys with no effect
on what is learned: parallelism, offload, logging) and `special` (what needs more than a rename: batch sizes
counted differently, the KL switch, the reward). `translate` applies it to a nested or dotted mapping; a key it
does not name is "not supported" (the run differs from the original there) and the message names it.
`parse_flags` reads argparse-style command lines (`--key value`, `--switch`), as ms-swift and OpenRLHF take them.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from . import interpolation
from .translation import Translation
from .trl import Unsupported
from .verl import KL_TYPES, flatten

Special = Callable[[dict[str, Any], dict[str, Any], Translation], None]


@dataclass(frozen=True)
class Spec:
    """A trainer's config table (module docstring)."""

    source: str  # the trainer's name, as messages say it: "EasyR1"
    renames: dict[str, tuple[str, Callable[[Any], Any]]]
    defaults: dict[str, Any] = field(default_factory=dict)
    ignored: tuple[str, ...] = ()
    special: Special | None = None


def translate(spec: Spec, data: dict[str, Any], path: str, valid_keys: set[str]) -> Translation:
    """The grpokit keys for `data` (nested sections or dotted keys) by `spec`'s table."""
    flat, failed = interpolation.resolve(flatten(data))
    t = Translation(spec.source, path)
    t.unsupported.update(failed)
    cfg = {**spec.defaults, **{k: v for k, v in flat.items() if k not in failed}}
    t.defaults = {k: v for k, v in spec.defaults.items() if k not in flat}
    if spec.special is not None:
        spec.special(cfg, flat, t)
    for key, (target, conv) in spec.renames.items():
        value = cfg.get(key)
        if value is None or key in t.unsupported or target in t.keys or target not in valid_keys:
            continue
        try:
            t.set(key, **{target.replace(".", "__"): conv(value)})
        except (Unsupported, TypeError, ValueError):
            t.unsupported[key] = value
    for key, value in flat.items():
        if key in t.mapped or key in t.unsupported or key in t.ignored:
            continue
        ignored = value is None or value == {} or any(fnmatch.fnmatch(key, pat) for pat in spec.ignored)
        (t.ignored if ignored else t.unsupported)[key] = value
    t.defaults = {k: v for k, v in t.defaults.items() if k in t.mapped}
    return t


def unsupported(v: Any) -> Any:
    raise Unsupported(v)


def positive(v: Any) -> int:
    """A period (save/eval every N steps) where -1 or 0 means never: grpokit's 0."""
    return max(0, int(v))


def per_batch(t: Translation, keys: tuple[str, str], prompts: Any, mini: Any, completions: bool, n: int) -> None:
    """`train.mini_batches` = the prompts of a rollout batch / the prompts of one optimizer step (`mini` counts
    completions when `completions`: divided by the group size `n` first); a batch that does not divide is not
    supported (the trainer refuses it too)."""
    if not prompts or not mini:
        return
    per_update = int(mini) // n if completions else int(mini)
    if per_update <= 0 or int(prompts) % per_update or (completions and int(mini) % n):
        t.unsupported[keys[1]] = mini
        t.notes.append(f"{keys[0]}={prompts} is not a whole number of {keys[1]}={mini} optimizer steps")
        return
    t.set(keys, train__mini_batches=int(prompts) // per_update)


def kl(t: Translation, keys: tuple[str, ...], coef: Any, estimator: Any = None, in_loss: bool = True) -> None:
    """A KL term of `coef` x `estimator` against the initial policy (docs/math.md §16); 0 or None keeps none."""
    if not coef:
        t.set(keys, algo__kl_coef=0.0, algo__reference="none")
        return
    t.set(keys, algo__kl_coef=float(coef), algo__reference="frozen", algo__kl_placement="loss" if in_loss else "reward")
    if estimator is not None:
        if estimator in KL_TYPES:  # verl's names, grpokit's too (kl is k1, low_var_kl a clamped k3)
            t.set(keys, algo__kl_estimator=estimator)
        else:
            t.unsupported[keys[-1]] = estimator


def parse_flags(args: list[str]) -> dict[str, Any]:
    """argparse-style `--key value` (`--key v1 v2` a list, `--switch` alone True, `--key=value`) -> {key: value},
    each value read as YAML (`1e-6` a number, `true` a bool); a word before any `--key` is refused."""
    from ...common import safe_yaml

    out: dict[str, Any] = {}
    key: str | None = None
    values: list[Any] = []

    def close() -> None:
        if key is not None:
            out[key] = True if not values else values[0] if len(values) == 1 else values

    for arg in args:
        if arg.startswith("--") and len(arg) > 2:
            close()
            key, _, raw = arg[2:].partition("=")
            values = [_value(raw, safe_yaml)] if raw else []
        elif key is None:
            raise ValueError(f"{arg[:80]!r} comes before any --flag; give the trainer's flags (--model ...)")
        else:
            values.append(_value(arg, safe_yaml))
    close()
    return out


def _value(raw: str, safe_yaml: Any) -> Any:
    try:
        return safe_yaml.load(raw)
    except Exception:  # not YAML (a path with a colon and a space, a '#' suffix): the text as it is
        return raw
