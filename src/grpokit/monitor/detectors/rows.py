"""Reading metric rows: numbers that may be missing, NaN or not numbers at all, windows measured in training
steps, slopes, the best accuracy signal of a row, and whether a reward is a 0/1 score."""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable
from typing import Any

from ... import metric_names as mn


def number_at(m: dict[str, Any], key: str) -> float:
    v = m.get(key)
    if isinstance(v, bool):
        return float(v)
    try:
        f = float(v)
    except (TypeError, ValueError, OverflowError):
        return math.nan
    return f


def finite_at(m: dict[str, Any], key: str) -> float:
    """The value if it is a finite number, else NaN (inf counts as not logged for trend rules)."""
    f = number_at(m, key)
    return f if math.isfinite(f) else math.nan


def first_logged(m: dict[str, Any], keys: Iterable[str]) -> tuple[str | None, float]:
    for k in keys:
        v = number_at(m, k)
        if math.isfinite(v):
            return k, v
    return None, math.nan


def slope(ys: list[float]) -> float:
    n = len(ys)
    if n < 2:
        return 0.0
    xm, ym = (n - 1) / 2, sum(ys) / n
    den = sum((i - xm) ** 2 for i in range(n))
    return sum((i - xm) * (y - ym) for i, y in enumerate(ys)) / den


def rounded(x: float, nd: int = 4) -> float | None:
    return round(x, nd) if isinstance(x, (int, float)) and math.isfinite(x) else None


class StepWindow:
    """The rows of the last `size` training steps, whatever the logging interval.

    A row stands for the steps since the previous row (`interval`, the latest step difference), so the window is
    full once the rows it holds cover `size` steps: `size` rows when every step is logged, one row when the log is
    written every `size` steps or less often. A step that goes backwards (a restart) empties the window; a
    repeated step replaces its row."""

    def __init__(self, size: int) -> None:
        self.size = max(int(size), 1)
        self.items: deque[tuple[int, Any]] = deque()
        self.interval = 1

    def add(self, step: int, item: Any) -> None:
        if self.items:
            last = self.items[-1][0]
            if step == last:
                self.items[-1] = (step, item)
                return
            if step < last:
                self.items.clear()
                self.interval = 1
            else:
                self.interval = step - last
        self.items.append((step, item))
        while self.items and self.items[0][0] <= step - self.size:
            self.items.popleft()

    def full(self) -> bool:
        return bool(self.items) and self.items[-1][0] - self.items[0][0] + self.interval >= self.size

    def values(self) -> list[Any]:
        return [x for _, x in self.items]

    def first_step(self) -> int:
        return self.items[0][0]

    def __len__(self) -> int:
        return len(self.items)


def accuracy_now(m: dict[str, Any], reward_is_accuracy: bool = False) -> tuple[str | None, float]:
    """The best accuracy signal in a row: train accuracy, held-out accuracy, or (when the caller knows the reward is
    a 0/1 score) the mean reward."""
    keys = [mn.REWARD_ACCURACY, mn.EVAL_ACCURACY] + ([mn.REWARD_MEAN] if reward_is_accuracy else [])
    return first_logged(m, keys)


class RewardRange:
    """Tracks whether a log's reward has stayed within [0, 1] (per-step min/max when logged): then its mean is
    an accuracy (verl's `critic/score` with a 0/1 verifier)."""

    def __init__(self) -> None:
        self.lo, self.hi, self.seen = math.inf, -math.inf, False

    def update(self, m: dict[str, Any]) -> None:
        lo, hi = finite_at(m, mn.REWARD_MIN), finite_at(m, mn.REWARD_MAX)
        if math.isfinite(lo) and math.isfinite(hi):
            self.lo, self.hi, self.seen = min(self.lo, lo), max(self.hi, hi), True

    @property
    def zero_one(self) -> bool:
        return self.seen and self.lo >= 0.0 and self.hi <= 1.0 and self.hi > self.lo


def task_learned(ev: dict[str, Any], floor: float) -> bool:
    """The zero-variance groups are the task learned: at least `floor` of them are all-correct (all-correct share /
    (all-correct + all-wrong) over the window). Records that share in `ev` as `learned_share`."""
    right, wrong = ev.get("all_correct_frac"), ev.get("all_wrong_frac")
    if not (isinstance(right, float) and isinstance(wrong, float)) or right + wrong <= 0:
        return False
    ev["learned_share"] = round(right / (right + wrong), 3)
    return ev["learned_share"] >= floor
