"""A config file as a mapping: YAML, or TOML (prime-rl's `rl.toml`) by its `.toml` suffix, read with `tomllib`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import tomllib


def read_config(path: Path) -> Any:
    """The file's mapping; a TOML syntax error is one ConfigError naming the file and the problem."""
    from ..errors import ConfigError
    from ..recipes import read_yaml

    if path.suffix != ".toml":
        return read_yaml(path)
    try:
        return tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: TOML syntax error ({e}); fix the file") from None
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path}: not UTF-8 text (byte {e.start}); save it as UTF-8") from None
