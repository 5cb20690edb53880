"""slime's console (Python logging, `[YYYY-MM-DD HH:MM:SS] <file>:<line> - <message>`, often behind Ray's
`(Actor pid=N)` prefix). Per rollout R the rollout side prints `perf R: {...}` (its `rollout/` and `perf/` summary),
the training side `rollout R: {...}` (`rollout/raw_reward`, `rollout/response_lengths`, ...), then one
`step N: {'train/loss': ..., 'train/step': N}` line per optimizer step (`critic-step N` for a critic; N counts
optimizer steps from 0 over the whole run) and a `perf R: {...}` of training times; `eval R: {...}` for evaluations.
Lines pasted without their logging prefix (`step N: {...}` at the start of a line) are read the same way.
The rows are slime's training steps; each rollout's values join the row of its first training step. The detectors'
context comes from Megatron's printed arguments (`  eps_clip ........ 0.2`); with --calculate-per-token-loss there
the entropy is read as a token mean (`SLIME_PER_TOKEN_NAMES`)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .canonical import RawRows, Segment
from .console_text import TextLogReader, dict_pairs, in_table_order, merge, read_text, table_mapper
from .names_more import SLIME_NAMES, SLIME_PER_TOKEN_NAMES

# after the logging prefix (` - `), or at the start of a line (lines pasted without their prefix, as in issue reports)
_LINE = re.compile(r"(?:^\s*| - )((?:[a-z]+-)?step|rollout|perf|eval) (\d+): (\{.*\})\s*$")
_ARG = re.compile(r"^[ \t]*(\w{1,100}) \.{3,} (\S+)[ \t]*$", re.M)
_CONTEXT_ARGS = (
    "eps_clip",
    "eps_clip_high",
    "entropy_coef",
    "advantage_estimator",
    "use_tis",
    "calculate_per_token_loss",
)


@dataclass
class _State:
    """Training rows, each rollout's own values, the rollout being trained and each rollout's first step."""

    rows: RawRows = field(default_factory=dict)
    by_rollout: dict[int, dict[str, float]] = field(default_factory=dict)
    training: int | None = None  # the rollout of the last `rollout R:` line: the steps that follow train it
    first_step: dict[int, int] = field(default_factory=dict)


def _train_step(st: _State, step: int, values: dict[str, float]) -> None:
    values.pop("train/step", None)
    merge(st.rows, step, values)
    if st.training is not None:
        st.first_step.setdefault(st.training, step)


def _parse_line(st: _State, line: str) -> None:
    m = _LINE.search(line)
    if not m:
        return
    kind, n, values = m.group(1), int(m.group(2)), dict_pairs(m.group(3))
    if kind.endswith("step"):
        _train_step(st, n, values)
        return
    if kind == "rollout":
        st.training = n
    st.by_rollout.setdefault(n, {}).update(values)


def _place_rollouts(st: _State) -> list[str]:
    """Move each rollout's values into the row of its first training step; a rollout never trained in the log is
    left out (with a note)."""
    notes = []
    for rollout, values in sorted(st.by_rollout.items()):
        step = st.first_step.get(rollout)
        if step is None:
            notes.append(
                f"rollout {rollout} has no training step in the log: its rollout/perf/eval values are left out"
            )
            continue
        st.rows[step] = {**values, **st.rows[step]}
    return notes


def slime_rows(text: str) -> tuple[RawRows, list[str]]:
    """slime console text -> (rows by training step, notes)."""
    st = _State()
    for line in text.splitlines():
        _parse_line(st, line)
    notes = _place_rollouts(st)
    return in_table_order(st.rows, SLIME_NAMES), notes


def megatron_args(text: str) -> dict[str, str]:
    """The arguments among `_CONTEXT_ARGS` in Megatron's printed argument list, as printed."""
    return {k: v for k, v in _ARG.findall(text[: 4 << 20]) if k in _CONTEXT_ARGS}


def slime_context(args: dict[str, str]) -> dict[str, Any]:
    """The detectors' context from Megatron's argument dump ({} when the log has none)."""
    if not args:
        return {}
    ctx: dict[str, Any] = {"trainer": "slime"}
    try:
        if "eps_clip" in args:
            ctx["eps_low"] = float(args["eps_clip"])
            high = args.get("eps_clip_high", "None")
            ctx["eps_high"] = float(high) if high != "None" else ctx["eps_low"]
        if "entropy_coef" in args:
            ctx["entropy_coef"] = float(args["entropy_coef"])
    except ValueError:
        pass
    if "advantage_estimator" in args:
        ctx["recipe"] = args["advantage_estimator"]
        if args["advantage_estimator"] in ("gspo", "cispo"):
            ctx["policy_loss"] = args["advantage_estimator"]  # their clipping is by design (see ClippingAnomaly)
    if "use_tis" in args:
        ctx["is_correction"] = args["use_tis"] == "True"
    return ctx


class SlimeReader(TextLogReader):
    """slime's printed output (the driver's console, Ray actors' lines included)."""

    name = "slime"

    def claims(self, head: str) -> bool:
        return any(
            (m := _LINE.search(line)) and ("'train/" in m.group(3) or "'rollout/" in m.group(3))
            for line in head.splitlines()
            if ": {" in line
        )

    def read(self, files: list[Path]) -> list[Segment]:
        text = read_text(files[0])
        rows, notes = slime_rows(text)
        args = megatron_args(text)
        table = SLIME_PER_TOKEN_NAMES if args.get("calculate_per_token_loss") == "True" else SLIME_NAMES
        return [Segment(rows, table_mapper(table), "slime", "", slime_context(args), {}, notes)]
