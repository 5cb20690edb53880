"""One registry mechanism for every extension point: a named table of components.

A component registers itself where it is defined, `@REGISTRY.register("name", *aliases)` on a class or a function
(or `REGISTRY.add(name, obj)` for an instance), and is looked up by name: `REGISTRY[name]` / `REGISTRY.get(name)`
raise one KeyError naming the kind, the unknown name, the closest known one and every known name. A registry is a
read-only mapping (`in`, iteration, `.items()`), so config validation reads the allowed values from it
(`names()`), and `grpokit methods` lists them with the first line of each docstring (`describe()`).

A component's **declared hyper-parameters** are its keyword-only arguments (a class: those of `__init__`), with their
defaults (`REQUIRED` when there is none), minus the registry's `inputs` (tensors a caller supplies): `params(name)`.
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")


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


def declared_params(obj: Any, inputs: tuple[str, ...] = ()) -> dict[str, Param]:
    """The keyword-only arguments of a function (of a class's `__init__`) that are not tensor `inputs`, in order."""
    fn = obj.__init__ if inspect.isclass(obj) else obj
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):  # a builtin or an instance without a signature declares nothing
        return {}
    out = {}
    for p in parameters:
        if p.kind is not inspect.Parameter.KEYWORD_ONLY or p.name in inputs:
            continue
        default = REQUIRED if p.default is inspect.Parameter.empty else p.default
        annotation = p.annotation if isinstance(p.annotation, str) else getattr(p.annotation, "__name__", "")
        out[p.name] = Param(p.name, default, "" if annotation is inspect.Parameter.empty else str(annotation))
    return out


def _signature_names(obj: Any) -> frozenset[str]:
    fn = obj.__init__ if inspect.isclass(obj) else obj
    try:
        return frozenset(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return frozenset()


class Registry(Mapping[str, Any]):
    """The named components of one extension point (`kind` names it in errors and listings).

    `inputs`: keyword-only arguments of the call signature that are data the caller supplies, not hyper-parameters.
    """

    def __init__(self, kind: str, inputs: tuple[str, ...] = ()) -> None:
        self.kind = kind
        self.inputs = inputs
        self._items: dict[str, Any] = {}
        self._primary: dict[str, str] = {}  # every name (aliases too) -> its primary name
        self._params: dict[str, dict[str, Param]] = {}  # read once per component

    @classmethod
    def of(cls, kind: str, items: Mapping[str, Any]) -> Registry:
        """A registry holding `items` (name -> component), for components that are values, not definitions."""
        reg = cls(kind)
        for name, obj in items.items():
            reg.add(name, obj)
        return reg

    def add(self, name: str, obj: Any, *aliases: str) -> Any:
        """Register `obj` under `name` (and `aliases`); a name registered twice is refused."""
        for n in (name, *aliases):
            if n in self._items:
                raise ValueError(f"{self.kind} {n!r} registered twice")
            self._items[n] = obj
            self._primary[n] = name
        return obj

    def register(self, name: str, *aliases: str) -> Callable[[T], T]:
        """Decorator: register the class or function under `name` (and `aliases`)."""

        def deco(obj: T) -> T:
            return self.add(name, obj, *aliases)

        return deco

    def get(self, name: Any, default: Any = None) -> Any:  # type: ignore[override]
        """The component named `name`; an unknown name is a KeyError with a did-you-mean (no default is given)."""
        return self[name]

    def __getitem__(self, name: Any) -> Any:
        try:
            return self._items[name]
        except (KeyError, TypeError):
            close = difflib.get_close_matches(str(name), list(self._items), n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise KeyError(f"unknown {self.kind} {name!r}.{hint} Known: {', '.join(self.names())}") from None

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def names(self) -> list[str]:
        """Every registered name (aliases included), sorted."""
        return sorted(self._items)

    def primary(self) -> list[str]:
        """The primary names (no aliases), in registration order."""
        return [n for n in self._items if self._primary[n] == n]

    def describe(self) -> dict[str, str]:
        """Primary name -> the first line of the component's `description` (a value) or docstring."""
        out = {}
        for n in sorted(self.primary()):
            obj = self._items[n]
            text = obj.description if isinstance(getattr(obj, "description", None), str) else inspect.getdoc(obj)
            doc = (text or "").strip().splitlines()
            out[n] = doc[0] if doc else ""
        return out

    def params(self, name: str) -> dict[str, Param]:
        """The declared hyper-parameters of component `name` (name -> Param), in signature order."""
        obj = self[name]
        if name not in self._params:
            self._params[name] = declared_params(obj, self.inputs)
        return dict(self._params[name])

    def takes(self, name: str) -> frozenset[str]:
        """Every argument name of component `name` (data inputs included)."""
        return _signature_names(self[name])

    def owners(self, key: str) -> list[str]:
        """Primary names of the components that declare hyper-parameter `key`."""
        return [n for n in sorted(self.primary()) if key in self.params(n)]

    def param_names(self) -> set[str]:
        """Every hyper-parameter some component of this registry declares."""
        return {k for n in self.primary() for k in self.params(n)}
