"""The one error type of configuration: a bad key or value, its message naming the key, the value and the fix."""

from __future__ import annotations

from ..common.errors import GrpokitError


class ConfigError(GrpokitError, ValueError):
    """A bad configuration key or value: `config error: ...`, exit status 2 (a usage error)."""

    label = "config error"
    exit_code = 2
