"""The final-figures table of `grpokit compare`: each run's final value of the headline signals and totals, and
each run's difference to the first run (the baseline).

A per-step signal's final value is its mean over the run's last `TAIL` logged steps (one step is noise); held-out
accuracy is its last evaluation; totals are sums over the run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ... import metric_names as M
from ..rundata import RunData, finite

TAIL = 5


def _tail_mean(key: str) -> Callable[[RunData], float | None]:
    def value(run: RunData) -> float | None:
        vals = [v for r in run.training_rows if (v := finite(r.get(key))) is not None][-TAIL:]
        return sum(vals) / len(vals) if vals else None

    return value


def _last(key: str) -> Callable[[RunData], float | None]:
    def value(run: RunData) -> float | None:
        vals = [v for r in run.rows if (v := finite(r.get(key))) is not None]
        return vals[-1] if vals else None

    return value


def first_logged(key: str) -> Callable[[RunData], float | None]:
    def value(run: RunData) -> float | None:
        vals = [v for r in run.rows if (v := finite(r.get(key))) is not None]
        return vals[0] if vals else None

    return value


def _total(key: str) -> Callable[[RunData], float | None]:
    return lambda run: run.total(key)


def _wall(run: RunData) -> float | None:
    wall = finite(run.info.get("wall_s"))
    if wall is not None:
        return wall
    parts = [run.total(M.TIME_STEP), run.total(M.TIME_EVAL)]
    return sum(p for p in parts if p is not None) if any(p is not None for p in parts) else None


@dataclass(frozen=True)
class Figure:
    """One row of the table: label (with unit and how it is taken), value rule, number format."""

    label: str
    value: Callable[[RunData], float | None]
    fmt: str = "{:.3f}"


FIGURES: tuple[Figure, ...] = (
    Figure("held-out accuracy, first evaluation", first_logged(M.EVAL_ACCURACY), "{:.1%}"),
    Figure("held-out accuracy, last evaluation", _last(M.EVAL_ACCURACY), "{:.1%}"),
    Figure(f"reward (mean of last {TAIL} steps)", _tail_mean(M.REWARD_MEAN)),
    Figure(f"train accuracy (last {TAIL} steps)", _tail_mean(M.REWARD_ACCURACY), "{:.1%}"),
    Figure(f"token entropy, nats (last {TAIL} steps)", _tail_mean(M.ENTROPY_TOKEN_MEAN)),
    Figure(f"zero-variance: all correct (last {TAIL})", _tail_mean(M.ZV_ALL_CORRECT), "{:.1%}"),
    Figure(f"zero-variance: all wrong (last {TAIL})", _tail_mean(M.ZV_ALL_WRONG), "{:.1%}"),
    Figure(f"length of correct, tokens (last {TAIL})", _tail_mean(M.LENGTH_CORRECT_MEAN), "{:.1f}"),
    Figure(f"length of incorrect, tokens (last {TAIL})", _tail_mean(M.LENGTH_INCORRECT_MEAN), "{:.1f}"),
    Figure(f"KL to reference k3, nats (last {TAIL})", _tail_mean(M.KL_REF_K3), "{:.4f}"),
    Figure(f"clip fraction low (last {TAIL})", _tail_mean(M.ACTOR_CLIPFRAC_LOW), "{:.4f}"),
    Figure(f"clip fraction high (last {TAIL})", _tail_mean(M.ACTOR_CLIPFRAC_HIGH), "{:.4f}"),
    Figure("training steps", lambda r: float(len(r.training_rows)) or None, "{:.0f}"),
    Figure("steps without update", lambda r: float(len(r.skipped_steps())), "{:.0f}"),
    Figure("generated samples", _total(M.REWARD_SAMPLED_N), "{:,.0f}"),
    Figure("generated tokens", _total(M.PERF_GEN_TOKENS), "{:,.0f}"),
    Figure("wall time, s", _wall, "{:,.0f}"),
    Figure("alerts raised", lambda r: float(len(r.alerts)), "{:.0f}"),
)


def _fmt(fmt: str, v: float) -> str:
    return fmt.format(v)


def _delta(fmt: str, v: float, base: float) -> str:
    d = v - base
    if fmt.endswith("%}"):
        return f"{d * 100:+.1f} pt"
    text = fmt.replace("{:", "{:+")
    return text.format(d)


def final_table(runs: list[RunData], tags: list[str]) -> tuple[list[str], list[list[str]]]:
    """(headers, rows): one column per run; from the second run on, each cell adds `(+d vs A)`."""
    headers = ["figure", *[f"{t}: {r.name}" for t, r in zip(tags, runs)]]
    rows: list[list[str]] = []
    for fig in FIGURES:
        values = [fig.value(r) for r in runs]
        if all(v is None for v in values):
            continue
        base = values[0]
        cells = [fig.label]
        for i, v in enumerate(values):
            if v is None:
                cells.append("not logged")
            elif i == 0 or base is None:
                cells.append(_fmt(fig.fmt, v))
            else:
                cells.append(f"{_fmt(fig.fmt, v)} ({_delta(fig.fmt, v, base)} vs {tags[0]})")
        rows.append(cells)
    return headers, rows
