"""The `grpokit` command line: `main` (the commands, `main.py`), their grammar (`args.py`), the terminal display
(`console.py`) and how a command ends on a stop that is not a bug (`exits.py`).

A new subcommand is a function in `args.py` that adds its parser (or, for a package with its own command, a
`register_cli` it calls) and a `cmd_*` handler in `main.py`.
"""

from .main import build_parser, main

__all__ = ["build_parser", "main"]
