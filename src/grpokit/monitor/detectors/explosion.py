"""Entropy explosion: token entropy climbing towards the uniform distribution (the model emitting noise), the
opposite failure to entropy collapse and usually the last sign before a run diverges or crashes (§17.2)."""

from __future__ import annotations

import math
import statistics
from typing import Any

from ... import metric_names as mn
from .base import Alert, Detector, register
from .rows import number_at


@register
class EntropyExplosion(Detector):
    """Mean token entropy above `h_floor` nats AND above `growth` x its baseline (the mean of the values logged in the
    first `baseline_steps` training steps, at least the first row) for more than `patience` consecutive logged rows
    (critical). The baseline is in steps, not rows: a log written every 10 steps has one row there, where 10 rows
    would reach 100 steps in, past an explosion (bench/latency.py measured one spliced at step 29 of a verl run
    logged every 10 steps: the exploded rows joined the baseline and no alert came).

    The absolute floor keeps a model that starts near-uniform (a random initialisation: ~log V nats from step 1)
    from counting as an explosion, since its baseline is already high; the relative rule keeps a legitimately
    high-entropy task from alarming. A language model sampling text has a token entropy of ~0.1-2 nats; 4 nats is
    already e^4 ~ 55 equally likely tokens at every position."""

    name, mode = "entropy_explosion", "entropy explosion"
    h_floor, growth, patience, baseline_steps = 4.0, 3.0, 1, 10
    requires = ((mn.ENTROPY_TOKEN_MEAN,),)

    def __init__(self, context: dict[str, Any] | None = None, **params: Any) -> None:
        super().__init__(context, **params)
        self.baseline: list[float] = []
        self.rows_above = 0
        self.since: int | None = None
        self.first_step: int | None = None  # the first logged step: the baseline covers `baseline_steps` from it

    @property
    def min_steps(self) -> int:
        return int(self.patience) + 1

    def check(self, step: int, m: dict[str, Any]) -> tuple[bool, Alert | None]:
        if mn.ENTROPY_TOKEN_MEAN not in m:
            return self.active, None
        h = number_at(m, mn.ENTROPY_TOKEN_MEAN)
        if not math.isfinite(h):
            return self.active, None
        if self.first_step is None:
            self.first_step = step
        if not self.baseline or step < self.first_step + self.baseline_steps:
            self.baseline.append(h)
        base = statistics.fmean(self.baseline)
        if h > self.h_floor and h > self.growth * base:
            self.since = step if self.since is None else self.since
            self.rows_above += 1
        else:
            self.since, self.rows_above = None, 0
        if self.rows_above <= self.patience:
            return False, None
        assert self.since is not None
        return True, self.new_alert(
            step,
            "critical",
            f"token entropy rose to {h:.2f} nats from a baseline of {base:.2f}"
            # no ratio against a baseline of ~0 (it would read as billions of times)
            + (f" ({h / base:.0f}x)" if base >= 0.01 else "")
            + ": the policy is drifting towards uniform noise",
            {"entropy": round(h, 4), "initial_entropy": round(base, 4), "rows_above": self.rows_above},
            "stop and restore the last healthy checkpoint; lower the learning rate (train.lr); check that an entropy "
            "bonus is not unbounded (algo.entropy_coef, adaptive targets) and that the sampling temperature is the "
            "learner's",
            ["train.lr*=0.5"],
            onset=self.since,
        )
