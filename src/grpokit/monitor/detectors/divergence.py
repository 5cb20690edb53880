"""The divergence detector: the update has broken the model, and further steps (and checkpoints) only keep a dead
model. Registered in the detectors' registry like every other detector, last (`detectors/__init__.py`).

Three signs, each judged on the policy's own numbers:

- **non-finite updates**: a NaN/inf loss or gradient (`train/nonfinite_loss`, `train/nonfinite_grad`) on
  `nonfinite_patience` consecutive steps (one such step is skipped by the update and may pass);
- **exploding weights**: the largest |w| (`train/weight_max_abs`) above `weight_growth` x its value before
  training (context `initial_weight_max_abs`, else the first row's) and above `weight_floor`;
- **entropy pinned at its maximum**: the token entropy within `entropy_tol` nats of log |V| (context
  `max_entropy`) on `patience` consecutive steps with a zero gradient norm (at most `grad_zero`, when logged): the
  policy outputs one uniform distribution whatever the prompt, and nothing flows back to change it.

The alert is critical; its fix names the learning rate in force (context `lr`) and the last checkpoint written
before the divergence (context `last_checkpoint`), so a user can resume from it with a lower rate. The trainer
stops on it (`train.on_divergence=stop`, see `grpokit.training.guard`).
"""

from __future__ import annotations

import math
from typing import Any

from ... import metric_names as mn
from .base import Alert, Detector, register


def _value(m: dict[str, Any], key: str) -> float:
    v = m.get(key)
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return math.nan
    return float(v)


@register
class Divergence(Detector):
    """Non-finite updates on `nonfinite_patience` steps, weights above `weight_growth` x their start (and above
    `weight_floor`), or entropy within `entropy_tol` of log|V| with zero gradients for `patience` steps: the model
    is diverging or dead. Critical; the fix names the learning rate and the last healthy checkpoint."""

    name, mode = "divergence", "divergence"
    nonfinite_patience, patience = 2, 2
    weight_growth, weight_floor = 20.0, 50.0
    entropy_tol, grad_zero = 1e-3, 1e-6
    requires = ((mn.TRAIN_NONFINITE_LOSS, mn.TRAIN_NONFINITE_GRAD, mn.TRAIN_WEIGHT_MAX_ABS, mn.ENTROPY_TOKEN_MEAN),)

    def __init__(self, context: dict[str, Any] | None = None, **params: Any) -> None:
        super().__init__(context, **params)
        self._nonfinite = 0
        self._pinned = 0
        self._first_weight: float | None = None

    def check(self, step: int, m: dict[str, Any]) -> tuple[bool, Alert | None]:
        signs = [self._nonfinite_sign(m), self._weight_sign(m), self._entropy_sign(m)]  # each counts every step
        found = next((s for s in signs if s is not None), None)
        if found is None:
            return False, None
        message, evidence = found
        return True, self.new_alert(step, "critical", message, evidence, self._fix(), self._actions())

    def _nonfinite_sign(self, m: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
        loss, grad = _value(m, mn.TRAIN_NONFINITE_LOSS), _value(m, mn.TRAIN_NONFINITE_GRAD)
        if not (math.isfinite(loss) or math.isfinite(grad)):
            return None
        bad = (loss > 0 if math.isfinite(loss) else False) or (grad > 0 if math.isfinite(grad) else False)
        self._nonfinite = self._nonfinite + 1 if bad else 0
        if self._nonfinite < self.nonfinite_patience:
            return None
        what = "loss" if loss > 0 else "gradient"
        return (
            f"non-finite {what} on {self._nonfinite} consecutive steps: the update diverged",
            {"nonfinite_steps": self._nonfinite, "nonfinite_loss": loss, "nonfinite_grad": grad},
        )

    def _weight_sign(self, m: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
        w = _value(m, mn.TRAIN_WEIGHT_MAX_ABS)
        if not math.isfinite(w):
            return None if math.isnan(w) else (f"weights are infinite ({mn.TRAIN_WEIGHT_MAX_ABS} = {w})", {"weight": w})
        start = _value(self.context, "initial_weight_max_abs")
        if not math.isfinite(start) or start <= 0:
            if self._first_weight is None:
                self._first_weight = w
            start = self._first_weight
        if w > self.weight_floor and start > 0 and w > self.weight_growth * start:
            return (
                f"weights exploded: max |w| {w:.4g} is {w / start:.0f}x its value before training ({start:.3g})",
                {"weight_max_abs": round(w, 4), "initial": round(start, 4)},
            )
        return None

    def _entropy_sign(self, m: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
        h, h_max = _value(m, mn.ENTROPY_TOKEN_MEAN), _value(self.context, "max_entropy")
        g = _value(m, mn.TRAIN_GRAD_NORM)
        if not (math.isfinite(h) and math.isfinite(h_max)):
            return None
        pinned = h >= h_max - self.entropy_tol and (not math.isfinite(g) or g <= self.grad_zero)
        self._pinned = self._pinned + 1 if pinned else 0
        if self._pinned < self.patience:
            return None
        return (
            f"entropy pinned at its maximum log|V| = {h_max:.4f} nats for {self._pinned} steps with zero gradient: "
            "the policy outputs a uniform distribution (a dead model)",
            {"entropy": round(h, 5), "max_entropy": round(h_max, 5), "grad_norm": g, "steps": self._pinned},
        )

    def _fix(self) -> str:
        lr = self.context.get("lr")
        rate = f"train.lr={lr:g}" if isinstance(lr, (int, float)) else "train.lr"
        lower = f" (e.g. --set train.lr={lr / 10:g})" if isinstance(lr, (int, float)) else ""
        ckpt = self.context.get("last_checkpoint")
        run = self.context.get("run_dir")
        if ckpt:
            where = f"resume from the last healthy checkpoint {ckpt}: grpokit train --resume {run} --set train.lr=..."
        elif "last_checkpoint" in self.context:
            where = "no checkpoint was written before the divergence: start again with the lower rate"
        else:
            where = "resume from the last checkpoint written before the divergence"
        return f"the learning rate is too high: lower {rate}{lower} and {where}"

    def _actions(self) -> list[str]:
        return ["train.lr*=0.1"]
