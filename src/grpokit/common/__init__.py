"""Shared helpers every layer may use, with no grpokit import of their own: `safe_yaml.py` (YAML read with bounds),
`faults.py` (the test hook that makes a process signal itself at a named point) and `version.py`."""
