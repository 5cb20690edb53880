"""The errors a command reports as one line and an exit status, not a traceback: each grpokit error type that means
"the input or the run cannot go on" derives from `GrpokitError` and says how it is shown (`label`) and with what
status (`exit_code`). The command line catches this one base, so it imports no layer above `common` to do it."""

from __future__ import annotations


class GrpokitError(Exception):
    """An error with a message meant for the user: shown as `<label>: <message>`, the command exits `exit_code`."""

    label = "error"
    exit_code = 1
