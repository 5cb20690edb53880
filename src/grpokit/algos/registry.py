"""Name -> function registries. A recipe composes algorithms by name; nothing branches on method names."""

from __future__ import annotations

import difflib
from collections.abc import Callable
from typing import Any


class Registry:
    """A named table of functions with a helpful error for unknown names."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._fns: dict[str, Callable[..., Any]] = {}
        self._docs: dict[str, str] = {}

    def register(self, name: str, *aliases: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
            for n in (name, *aliases):
                if n in self._fns:
                    raise ValueError(f"{self.kind} {n!r} registered twice")
                self._fns[n] = fn
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

    def __contains__(self, name: str) -> bool:
        return name in self._fns

    def names(self) -> list[str]:
        return sorted(self._fns)

    def describe(self) -> dict[str, str]:
        return dict(sorted(self._docs.items()))


ADVANTAGES = Registry("advantage estimator")
POLICY_LOSSES = Registry("policy loss")
AGGREGATIONS = Registry("aggregation mode")
KL_ESTIMATORS = Registry("KL estimator")
IS_CORRECTIONS = Registry("importance-sampling correction")
