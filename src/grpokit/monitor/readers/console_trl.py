"""The per-step dicts transformers' Trainer prints for TRL / Unsloth / ms-swift, among progress bars: steps from
the dict, the progress bar or the logging interval, and a printed file split into its trainings."""

from __future__ import annotations

import re
from typing import Any

from .canonical import RawRows, _merge
from .values import _ANSI, _dict_at, _numeric_items, _step_of

# TRL / transformers: the Trainer prints each log as a Python dict (`{'loss': 0.1, 'reward': ...}`); ms-swift as JSON
_TRL_DICT = re.compile(r"\{\s*['\"](?:loss|reward|train_runtime|eval_loss|learning_rate|grad_norm)['\"]\s*:")
# a tqdm bar's counter: `| 12/300 [00:41<...`
_BAR = re.compile(r"(\d+)/(\d+) \[")
_TRAINER_START = re.compile(r"\*\*\*\*\* Running training \*\*\*\*\*|Num examples = ")


_RL_KEYS = ("reward", "kl", "entropy", "frac_reward_zero_std", "reward_std", "completion_length")


def _is_rl_row(d: dict[str, Any]) -> bool:
    return any(k in d or any(str(x).startswith(k) for x in d) for k in _RL_KEYS) or any(
        str(k).startswith(("rewards/", "completions/", "clip_ratio")) for k in d
    )


def _trl_console_segments(text: str) -> list[tuple[RawRows, list[str]]]:
    """Per-step dicts printed by transformers' Trainer (TRL, Unsloth, ms-swift), among progress bars and other
    output. The step of a dict is its `global_step/max_steps` (ms-swift) or `step` entry, else the counter of the
    training progress bar printed since the previous dict, else the previous step plus the logging interval seen
    so far (1 at first). A new run starts when rows switch between supervised (no reward) and RL, when the
    progress bar's total changes, or when the step goes back."""
    segments: list[tuple[RawRows, list[str]]] = []
    rows: RawRows = {}
    kind: bool | None = None
    total: int | None = None
    last_step: int | None = None
    interval = 1
    inferred = known = 0
    bar: tuple[int, int] | None = None

    def close() -> None:
        nonlocal rows, inferred, known, last_step, interval, total, kind
        if rows:
            notes = []
            if inferred and not known:
                notes.append(
                    "this console log prints no step numbers or progress bars for these rows: they are numbered "
                    "1, 2, ... and the logging interval is unknown"
                )
            elif inferred:
                notes.append(f"{inferred} of {inferred + known} rows had no progress bar: their step was inferred")
            segments.append((rows, notes))
        rows, inferred, known, last_step, interval, total, kind = {}, 0, 0, None, 1, None, None

    for raw_line in text.replace("\r", "\n").splitlines():
        line = _ANSI.sub("", raw_line)
        m = _TRL_DICT.search(line)
        for b in _BAR.finditer(line[: m.start()] if m else line):
            n, t = int(b.group(1)), int(b.group(2))
            if 1 <= n <= t:
                bar = (n, t)
        if not m:
            continue
        d = _dict_at(line, m.start())
        if d is None or "train_runtime" in d:
            if d is not None:
                close()  # the end-of-training summary closes a run
            bar = None
            continue
        step: int | None = None
        this_total = None
        gs = d.get("global_step/max_steps")
        if isinstance(gs, str) and "/" in gs:
            a, _, b_ = gs.partition("/")
            step, this_total = _step_of(a), _step_of(b_)
        elif _step_of(d.get("step")) is not None:
            step = _step_of(d.get("step"))
        elif bar is not None:
            step, this_total = bar
        if all(str(k).startswith("eval_") or k in ("epoch", "step") for k in d):
            # an evaluation log: it belongs to the training step it was printed at
            at = step if step is not None else last_step
            if at is not None:
                _merge(rows, at, _numeric_items({k: v for k, v in d.items() if k != "step"}))
            bar = None
            continue
        is_rl = _is_rl_row(d)
        restart = (
            (kind is not None and is_rl != kind)
            or (this_total is not None and total is not None and this_total != total)
            or (step is not None and last_step is not None and step < last_step)
        )
        if restart:
            close()
        kind = is_rl
        total = this_total if this_total is not None else total
        if step is None or (last_step is not None and step == last_step):
            if step is None:
                inferred += 1
            step = (last_step or 0) + interval
        else:
            known += 1
            if last_step is not None and step > last_step:
                interval = step - last_step
        values = _numeric_items({k: v for k, v in d.items() if k not in ("step", "global_step/max_steps")})
        _merge(rows, step, values)
        last_step = step
        bar = None
    close()
    return segments
