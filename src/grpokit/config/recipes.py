"""Recipe files: the packaged `recipes/*.yaml`, a recipe by name or path, and YAML reading with errors that name
the file, line and column."""

from __future__ import annotations

import difflib
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from ..common import safe_yaml
from ..common.bounded_read import CONFIG_LIMIT, UnreadableInput, read_text
from .errors import ConfigError


def recipe_dir() -> Path:
    return Path(str(resources.files("grpokit") / "recipes"))


def list_recipes() -> dict[str, dict[str, Any]]:
    """name -> the recipe YAML as a dict."""
    out = {}
    for p in sorted(recipe_dir().glob("*.yaml")):
        out[p.stem] = yaml.safe_load(p.read_text())
    return out


def read_yaml(path: Path, literal: bool = False) -> Any:
    """A YAML file's content (`literal`: every scalar as its text); a syntax error, a key given twice, a FIFO or
    a file past CONFIG_LIMIT is one ConfigError naming the file (and the line and column)."""
    try:
        return safe_yaml.load(read_text(path, CONFIG_LIMIT), literal=literal)
    except UnreadableInput as e:
        raise ConfigError(str(e)) from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f", line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        kind = "YAML refused" if isinstance(e, safe_yaml.YAMLLimitError) else "YAML syntax error"
        raise ConfigError(f"{path}{where}: {kind} ({problem}); fix the file") from None
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path}: not UTF-8 text (byte {e.start}); save it as UTF-8") from None


def load_recipe(name: str) -> dict[str, Any]:
    path = Path(name)
    if path.suffix in (".yaml", ".yml") and path.exists():
        return read_yaml(path) or {}
    recipes = list_recipes()
    if name not in recipes:
        close = difflib.get_close_matches(name, list(recipes), n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise ConfigError(f"unknown recipe {name!r}.{hint} Known: {', '.join(recipes)} (or a path to a .yaml file)")
    return recipes[name]
