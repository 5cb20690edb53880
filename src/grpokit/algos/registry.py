"""Name -> function registries. A recipe composes algorithms by name; nothing branches on method names.

Every registry has one fixed call signature: positional tensors, then keyword-only arguments. The keyword-only
arguments named in the registry's `inputs` are tensors the caller supplies (a mask, values, a generator); every
other keyword-only argument is a **declared hyper-parameter** of the component, with its default taken from the
component's paper (or `REQUIRED` when it has none). `Registry.params(name)` lists them; `AlgoConfig.bind` binds
them once from a recipe (see `algo_config.py`).
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Any = _Required()  # the default of a parameter that has none: a recipe must set it


@dataclass(frozen=True)
class Param:
    """One declared hyper-parameter of a component: its name, default (or REQUIRED) and annotation."""

    name: str
    default: Any
    annotation: str

    @property
    def required(self) -> bool:
        return self.default is REQUIRED


def declared_params(fn: Callable[..., Any], inputs: tuple[str, ...] = ()) -> dict[str, Param]:
    """The keyword-only arguments of `fn` that are not tensor `inputs`, in signature order."""
    out = {}
    for p in inspect.signature(fn).parameters.values():
        if p.kind is not inspect.Parameter.KEYWORD_ONLY or p.name in inputs:
            continue
        default = REQUIRED if p.default is inspect.Parameter.empty else p.default
        annotation = p.annotation if isinstance(p.annotation, str) else getattr(p.annotation, "__name__", "")
        out[p.name] = Param(p.name, default, "" if annotation is inspect.Parameter.empty else str(annotation))
    return out


class Registry:
    """A named table of functions with a helpful error for unknown names.

    `inputs`: the keyword-only tensor arguments of this registry's call signature (not hyper-parameters).
    """

    def __init__(self, kind: str, inputs: tuple[str, ...] = ()) -> None:
        self.kind = kind
        self.inputs = inputs
        self._fns: dict[str, Callable[..., Any]] = {}
        self._docs: dict[str, str] = {}
        self._params: dict[str, dict[str, Param]] = {}
        self._takes: dict[str, frozenset[str]] = {}

    def register(self, name: str, *aliases: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
            params = declared_params(fn, self.inputs)
            takes = frozenset(inspect.signature(fn).parameters)
            for n in (name, *aliases):
                if n in self._fns:
                    raise ValueError(f"{self.kind} {n!r} registered twice")
                self._fns[n] = fn
                self._params[n] = params
                self._takes[n] = takes
            doc = (fn.__doc__ or "").strip().splitlines()
            self._docs[name] = doc[0] if doc else ""
            return fn

        return deco

    def get(self, name: str) -> Callable[..., Any]:
        try:
            return self._fns[name]
        except KeyError:
            close = difflib.get_close_matches(str(name), list(self._fns), n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise KeyError(f"unknown {self.kind} {name!r}.{hint} Known: {', '.join(sorted(self._fns))}") from None

    def params(self, name: str) -> dict[str, Param]:
        """The declared hyper-parameters of component `name` (name -> Param), in signature order."""
        self.get(name)
        return dict(self._params[name])

    def takes(self, name: str) -> frozenset[str]:
        """Every argument name of component `name` (tensor inputs included)."""
        self.get(name)
        return self._takes[name]

    def owners(self, key: str) -> list[str]:
        """Primary names of the components that declare hyper-parameter `key`."""
        return [n for n in sorted(self._docs) if key in self._params[n]]

    def param_names(self) -> set[str]:
        """Every hyper-parameter some component of this registry declares."""
        return {k for ps in self._params.values() for k in ps}

    def __contains__(self, name: str) -> bool:
        return name in self._fns

    def names(self) -> list[str]:
        return sorted(self._fns)

    def describe(self) -> dict[str, str]:
        return dict(sorted(self._docs.items()))


ADVANTAGES = Registry("advantage estimator", inputs=("valid", "mask", "values", "token_rewards"))
POLICY_LOSSES = Registry("policy loss", inputs=("generator",))
AGGREGATIONS = Registry("aggregation mode", inputs=("denominators",))
KL_ESTIMATORS = Registry("KL estimator")
IS_CORRECTIONS = Registry("importance-sampling correction")
