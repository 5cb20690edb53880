"""`grpokit doctor PATH`: diagnose a finished or running training from its logs alone.

Reads the logs people have (`monitor/readers`: grpokit runs, TRL output directories and console logs, verl console /
JSONL logs, W&B exports, TensorBoard event directories; a folder holding several runs is diagnosed run by run, or
`--run NAME` picks one; several runs print a summary table, their diagnoses with `--details`), replays every
detector over the logged training steps and returns a ranked diagnosis:
what is wrong, since when, its current value, the evidence, what to change (only changes the run does not already
have and that can act in its configuration). Besides the detectors' alerts, the diagnosis states facts about the
log itself: a run that never trained, updates that did not happen, a log too short to judge a failure mode, a
sparse logging interval, generation rounds at their cap. Signals the log lacks are listed as not measurable.

Exit status of `doctor_main`: 0 nothing critical, 1 a critical failure mode or a run that never trained,
2 the input cannot be read as a training log (one line on stderr, never a traceback).

Modules: `diagnose` (replay, verdict), `facts` (facts about the log), `knobs` (fixes in the log's trainer's
terms), `render` (text); `doctor_main` here is the command.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from ...common.safe_text import safe_text
from .diagnose import HEADLINE, diagnose, diagnose_all, diagnose_log, verdict_line
from .facts import RL_SIGNALS
from .knobs import TRAINER_KNOBS
from .render import render, summary_table


def _exit_code(diags: list[dict[str, Any]]) -> int:
    for d in diags:
        if any(a["severity"] == "critical" and not a.get("explained_by") for a in d["alerts"]):
            return 1
        if any(f["severity"] == "critical" for f in d.get("findings", [])):
            return 1
    return 0


def doctor_main(path: str, as_json: bool = False, run: str | None = None, details: bool = False) -> int:
    """Print the diagnosis of every run under `path` (or the one named `run`); see the module docstring for the
    exit status. Unreadable input is one line on stderr (GRPOKIT_DEBUG=1 shows the traceback). A path holding
    several runs prints a summary table (one row per run), then each run's diagnosis only with `details`."""
    try:
        diags = diagnose_all(path, run=run)
    except (ValueError, OSError, UnicodeDecodeError) as e:
        if os.environ.get("GRPOKIT_DEBUG"):
            raise
        print(safe_text(f"error: {e}"), file=sys.stderr)
        return 2
    except Exception as e:  # noqa: BLE001 - a corrupt file of a supported kind must not print a traceback
        if os.environ.get("GRPOKIT_DEBUG"):
            raise
        print(safe_text(f"error: {path}: cannot read it as a training log ({type(e).__name__}: {e})"), file=sys.stderr)
        return 2
    try:
        print(_text(path, diags, as_json, details))
        sys.stdout.flush()
    except BrokenPipeError:  # `grpokit doctor runs/ | head`: the reader stopped reading, which is no error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return _exit_code(diags)


def _text(path: str, diags: list[dict[str, Any]], as_json: bool, details: bool) -> str:
    if as_json:
        payload: Any = diags[0] if len(diags) == 1 else {"path": str(path), "runs": diags}
        return json.dumps(payload, indent=1, default=str)  # JSON writes every control character as \uXXXX
    if len(diags) == 1:
        return render(diags[0])
    head = f"{safe_text(path, limit=None)}: {len(diags)} runs, each diagnosed on its own\n\n{summary_table(diags)}"
    if not details:
        return head + "\n\nOne run's diagnosis: --run NAME; every run's: --details"
    return head + "\n\n" + "\n\n".join(render(d) for d in diags)


__all__ = [
    "HEADLINE",
    "RL_SIGNALS",
    "TRAINER_KNOBS",
    "diagnose",
    "diagnose_all",
    "verdict_line",
    "diagnose_log",
    "doctor_main",
    "render",
    "summary_table",
]
