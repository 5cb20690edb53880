"""What a reward returned, checked: one float or None per completion, within bounds; and a batch's metrics."""

from __future__ import annotations

import math
from typing import Any

from .. import metric_names as mn
from .result import FAILURE_KINDS, RewardFailure
from .wire import InvalidValue, NotAList

MAX_ABS_VALUE = 1e6


def mean(values: list[float]) -> float:
    """The mean of the values that are not NaN (NaN when none is)."""
    finite = [v for v in values if not math.isnan(v)]
    return sum(finite) / len(finite) if finite else float("nan")


def check_value(value: Any, max_abs: float = MAX_ABS_VALUE) -> tuple[float | None, str | None, str]:
    """(float value, or None when not applicable; failure kind or None; message) for one returned value."""
    if value is None:
        return None, None, ""
    if isinstance(value, InvalidValue):  # checked in the worker already, where the value itself lives
        return math.nan, "exception", f"returned {value.description}, expected a float"
    if isinstance(value, (str, bytes)) or not hasattr(value, "__float__"):
        return math.nan, "exception", f"returned {type(value).__name__} {repr(value)[:60]}, expected a float"
    try:
        f = float(value)
    except (TypeError, ValueError, OverflowError) as e:
        return math.nan, "exception", f"returned {type(value).__name__} that is not a float ({e})"
    if not math.isfinite(f):
        return math.nan, "nan", f"returned {f}"
    if abs(f) > max_abs:
        return math.nan, "nan", f"returned {f:g}, outside +-{max_abs:g} (RewardManager max_abs_value); scale it down"
    return f, None, ""


def batch_metrics(
    rewards: list[float],
    accuracy: list[float],
    per_reward: dict[str, list[float]],
    failures: list[RewardFailure],
    n_failed: int,
    n_not_applicable: int = 0,
) -> dict[str, float]:
    """Mean reward and accuracy, failed share and failures by kind, the share of samples no reward applies to, and
    each reward's mean and share of samples it does not apply to (None, not failed)."""
    n = len(rewards)
    metrics = {
        mn.REWARD_MEAN: mean(rewards),
        mn.REWARD_ACCURACY: mean(accuracy),
        mn.REWARD_FAIL_FRAC: n_failed / n if n else 0.0,
        mn.REWARD_NA_FRAC: n_not_applicable / n if n else 0.0,
    }
    metrics |= {f"{mn.REWARD_FAILURES_PREFIX}{k}": float(sum(f.kind == k for f in failures)) for k in FAILURE_KINDS}
    metrics |= {f"{mn.REWARD_PREFIX}{name}_mean": mean(v) for name, v in per_reward.items()}
    failed_by = {name: {f.index for f in failures if f.reward == name} for name in per_reward}
    metrics |= {
        f"{mn.REWARD_PREFIX}{name}_none_frac": sum(math.isnan(x) and i not in failed_by[name] for i, x in enumerate(v))
        / n
        for name, v in per_reward.items()
        if n
    }
    return metrics


def shape_message(out: Any, n: int) -> str:
    """Why a reward's return value is not one value per completion, and, when it is no list at all, the fix."""
    what = f"{n} completion" + ("s" if n != 1 else "")
    if isinstance(out, list):
        return f"returned {len(out)} values for {what}"
    name = out.type_name if isinstance(out, NotAList) else type(out).__name__
    return (
        f"returned a {name} instead of a list for {what}; return a list (or tuple) holding one float, or None "
        "where the reward does not apply, per completion, in the completions' order"
    )
