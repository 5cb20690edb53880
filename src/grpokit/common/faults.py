"""A test hook: make this process signal itself at a named point of a run, to test what a kill there leaves.

`GRPOKIT_TEST_KILL_AT=POINT[:N[:SIGNAL]]` sends SIGNAL (default SIGKILL) to this process the N-th time (default
the first) it reaches `point(POINT)`. Unset (always, outside tests) it costs one environment lookup. The points:

| point | where |
|---|---|
| `setup` | `open_session`, before the model loads |
| `log` | `RunWriter.log`, before a metrics row is written (a step computed, not yet logged) |
| `samples` | `RunWriter.samples`, before completion rows are written (the step's metrics row is written) |
| `checkpoint` | `save_checkpoint`, the model written into `.tmp-step_N`, the optimizer state not yet |
| `checkpoint_saved` | `save_checkpoint`, `step_N` in place, older checkpoints not yet pruned |
| `model_saved` | `save_model_dir`, the weights written, the tokenizer not yet (a checkpoint's or the final model's) |
| `final_saved` | the final model written, the run not yet closed |

`tests/training/test_resume_kill.py` kills a run at each of them and checks that `--resume` gives the rows of a run
never killed.
"""

from __future__ import annotations

import os
import signal

ENV = "GRPOKIT_TEST_KILL_AT"
_reached: dict[str, int] = {}


def parse(spec: str) -> tuple[str, int, int]:
    """(point, N, signal number) of a `POINT[:N[:SIGNAL]]` spec."""
    name, _, rest = spec.partition(":")
    count, _, sig = rest.partition(":")
    signum = getattr(signal, sig if sig.startswith("SIG") else f"SIG{sig}") if sig else signal.SIGKILL
    return name, int(count or 1), int(signum)


def point(name: str) -> None:
    """Signal this process here when `GRPOKIT_TEST_KILL_AT` names this point and this is its N-th passage."""
    spec = os.environ.get(ENV)
    if not spec:
        return
    want, count, signum = parse(spec)
    if want != name:
        return
    _reached[name] = _reached.get(name, 0) + 1
    if _reached[name] == count:
        os.kill(os.getpid(), signum)
