"""The one error type of configuration: a bad key or value, its message naming the key, the value and the fix."""

from __future__ import annotations


class ConfigError(ValueError):
    """A bad configuration key or value."""
