"""A package's public names, imported from their modules on first use (PEP 562 module `__getattr__`), so that
importing the package, or one light module in it, does not import torch through its heavy siblings. The command
line depends on it: `grpokit --help` imports every subcommand's package."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def lazy_exports(
    package: str, modules: dict[str, tuple[str, ...]]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """`__getattr__` and `__dir__` for `package`: `modules` maps a submodule's name to the names it exports."""
    where = {name: module for module, names in modules.items() for name in names}

    def getattr_(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        globals_ = importlib.import_module(package).__dict__
        globals_[name] = value  # later lookups skip this function
        return value

    def dir_() -> list[str]:
        return sorted(where)

    return getattr_, dir_
