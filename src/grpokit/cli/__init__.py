"""The `grpokit` command line: `main` (the commands, `main.py`), their grammar (`args.py`), the terminal display
(`console.py`) and how a command ends on a stop that is not a bug (`exits.py`).

A new subcommand is a function in `args.py` that adds its parser, and a `cmd_*` handler in `main.py` (or, for a
package with its own command, in that package, attached by `args.package_commands`).
"""

from .main import build_parser, main

__all__ = ["build_parser", "main"]
