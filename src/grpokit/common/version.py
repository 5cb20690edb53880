"""grpokit's version (also `grpokit.__version__`; pyproject.toml carries the same number)."""

VERSION = "0.1.0"
