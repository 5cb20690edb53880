"""Learning-rate schedules (`train.lr_schedule`), registered by name: the factor on the base learning rate after a
linear warm-up, as a function of the fraction of the post-warm-up steps done (transformers' schedules of the same
names)."""

from __future__ import annotations

import math
from collections.abc import Callable

from ..common.registry import Registry

LR_SCHEDULES = Registry("learning-rate schedule")


@LR_SCHEDULES.register("constant")
def constant(frac: float) -> float:
    """The base learning rate throughout."""
    return 1.0


@LR_SCHEDULES.register("linear")
def linear(frac: float) -> float:
    """Linear decay to 0 at the last step."""
    return 1.0 - frac


@LR_SCHEDULES.register("cosine")
def cosine(frac: float) -> float:
    """Half a cosine from 1 to 0: 0.5 (1 + cos(pi frac))."""
    return 0.5 * (1 + math.cos(math.pi * frac))


def lr_lambda(schedule: str, warmup: int, total: int) -> Callable[[int], float]:
    """The factor for optimizer step `step` (0-based): (step + 1) / warmup during the warm-up, then the schedule of the
    fraction of the remaining steps done (1.0 when there are none)."""
    shape = LR_SCHEDULES[schedule]

    def fn(step: int) -> float:
        if warmup > 0 and step < warmup:
            return (step + 1) / warmup
        if total <= warmup:
            return 1.0
        return shape(min(1.0, (step - warmup) / max(1, total - warmup)))

    return fn
