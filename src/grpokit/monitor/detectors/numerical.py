"""Numerical trouble: non-finite loss or gradients, gradient-norm spikes."""

from __future__ import annotations

import math
import statistics
from collections import deque
from typing import Any

from ... import metric_names as mn
from .base import Alert, Detector, register
from .rows import finite_at, number_at


@register
class Numerical(Detector):
    """NaN/inf loss (`train/nonfinite_loss`), non-finite gradients (`train/nonfinite_grad`), or a gradient-norm spike
    above `spike` x the median of the previous `history` logged non-zero values (at least `min_rows` of them) and
    above the absolute floor `grad_floor` (a norm going 0.01 -> 0.2 is no trouble). A norm of exactly 0 is a step
    without an update (every group had equal rewards), not a level: it is left out of the median, so no ratio is ever
    taken against a median of 0. The history counts logged rows, not steps: a spike is one row against the run's
    recent level, so a log written every 5 or 10 steps (TRL's default logging) is judged as soon as it has
    `min_rows` rows (a step-based window there never held enough rows to judge).

    Before `min_rows` earlier norms exist, a log's first rows are judged with a much larger ratio: from
    `early_rows` (2) earlier norms on, a norm above `early_spike` (50) x their median (and above `grad_floor`) is a
    spike. A median of two or
    three norms is a rough level, hence the 5x stricter ratio: the first rows of the corpus' healthy runs vary by
    less than 10x, while a blow-up such as SkyRL's 103 against 0.75 and 1.24 (104x their median) is caught at the
    row it happens instead of going unjudged.

    A norm above `grad_abs_max` (1e5) is numerical trouble at any row, history or not: no healthy LLM update has a
    gradient norm that large (the corpus' worst blow-up, SkyRL's KL explosion, peaks at 837), so it is an overflow or
    a broken norm (slime on SWE-Gym: 2.96e9 at step 1 and 2.2e9 at step 28, "unexpectedly large" by its user)."""

    name, mode = "numerical", "numerical trouble"
    spike, history, grad_floor, min_rows = 10.0, 20, 1.0, 5
    early_spike, early_rows, grad_abs_max = 50.0, 2, 1e5
    requires = ((mn.TRAIN_GRAD_NORM, mn.TRAIN_NONFINITE_GRAD, mn.TRAIN_NONFINITE_LOSS),)

    def __init__(self, context: dict[str, Any] | None = None, **params: Any) -> None:
        super().__init__(context, **params)
        self.norms: deque[float] = deque(maxlen=int(self.history))

    @property
    def min_steps(self) -> int:
        return 6

    def check(self, step: int, m: dict[str, Any]) -> tuple[bool, Alert | None]:
        # logs store a NaN loss as null (indistinguishable from "not logged"), so the trainer flags it explicitly
        if finite_at(m, mn.TRAIN_NONFINITE_LOSS) > 0:
            return True, self.new_alert(
                step,
                "critical",
                "the loss is NaN or infinite",
                {"nonfinite_loss": 1},
                "lower the learning rate; check rewards for NaN",
                ["train.lr*=0.5"],
            )
        if finite_at(m, mn.TRAIN_NONFINITE_GRAD) > 0:
            return True, self.new_alert(
                step,
                "critical",
                "non-finite gradient: the gradient norm is NaN or infinite",
                {"nonfinite_grad": 1},
                "lower the learning rate; use fp32",
                ["train.lr*=0.5"],
            )
        g = number_at(m, mn.TRAIN_GRAD_NORM)
        if g == math.inf:
            return True, self.new_alert(
                step,
                "critical",
                "the gradient norm is infinite",
                {"grad_norm": "inf"},
                "lower the learning rate; use fp32",
                ["train.lr*=0.5"],
            )
        if not math.isfinite(g):
            return (self.active, None) if mn.TRAIN_GRAD_NORM not in m else (False, None)
        prev = list(self.norms)
        self.norms.append(g)
        if g > self.grad_abs_max:
            return True, self.new_alert(
                step,
                "warning",
                f"gradient norm {g:.3g} is beyond any healthy scale (above {self.grad_abs_max:g}): an overflow or a "
                "broken norm computation",
                {"grad_norm": g, "ceiling": self.grad_abs_max},
                "check the gradient-norm computation and the precision (fp32 master weights, loss scaling); lower "
                "the learning rate (train.lr)",
                ["train.lr*=0.5"],
            )
        prev = [x for x in prev if x > 0]  # a zero norm is a step without an update, not a level to compare with
        early = len(prev) < self.min_rows
        if len(prev) >= min(self.min_rows, self.early_rows):
            med = statistics.median(prev)
            if g > self.grad_floor and g > (self.early_spike if early else self.spike) * med:
                return True, self.new_alert(
                    step,
                    "warning",
                    f"gradient norm {g:.3g} is {g / med:.0f}x its recent median {med:.3g}",
                    {"grad_norm": g, "median": med},
                    "lower the learning rate (train.lr) or tighten train.max_grad_norm",
                    ["train.lr*=0.5"],
                )
        return False, None
