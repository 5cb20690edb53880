"""Shared helpers every layer may use, with no grpokit import of their own: `safe_yaml.py` (YAML read with bounds),
`faults.py` (the test hook that makes a process signal itself at a named point), `safe_text.py` (foreign text
made safe to print or store: control characters escaped, length bounded) and `version.py`."""
