"""The training loop's safety checks around each step (`grpokit.training.loop.fit` calls them):

- `health()`: the largest |w| of the trainable weights (`train/weight_max_abs`), and the learning rate, for the
  divergence detector (`grpokit.monitor.detectors.divergence`), which also gets log|V| and the weights before training;
- `after_step(alerts)`: a divergence alert stops the run (`train.on_divergence=stop`, the default) before the
  step's checkpoint, so no checkpoint of a dead model is written; `continue` keeps training;
- `learned()`: with `monitor.stop_when_learned`, an active alert that reads the task as learned ends the run after
  this step, as if it were the last;
- `after_save()`: a SIGINT/SIGTERM received during the step (`grpokit.training.interrupts`) writes this step's
  checkpoint (when the schedule did not) and stops with one line naming it and the resume command.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from .. import metric_names as mn
from ..run.checkpoint import latest_checkpoint
from . import interrupts

if TYPE_CHECKING:  # the loop hands its trainer over; the guard never imports the training machinery itself
    from .trainer import Trainer

LEARNED_MODES = ("convergence", "converged / saturated")  # alert modes that mean the task is learned, not a failure


class Diverged(RuntimeError):
    """The run stopped on a divergence alert; the message names the learning rate and the last healthy checkpoint."""

    run_status = "diverged"  # the run's outcome (grpokit.run.outcome)


def weight_max_abs(model: torch.nn.Module) -> float:
    """Largest |w| over the trainable parameters (every parameter when none is trainable)."""
    params = [p for p in model.parameters() if p.requires_grad] or list(model.parameters())
    with torch.no_grad():
        return max((float(torch.linalg.vector_norm(p.detach(), float("inf"))) for p in params), default=0.0)


def _vocab_size(model: Any) -> int | None:
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    weight = getattr(head, "weight", None)
    if weight is not None and weight.ndim == 2:
        return int(weight.shape[0])
    return getattr(getattr(model, "config", None), "vocab_size", None)


class RunGuard:
    """Divergence and signal checks of one `fit` call."""

    def __init__(self, trainer: Trainer) -> None:
        self.trainer = trainer
        ctx = trainer.monitor_context  # shared by every detector
        vocab = _vocab_size(trainer.model)
        if vocab:
            ctx["max_entropy"] = math.log(vocab)
        ctx["initial_weight_max_abs"] = weight_max_abs(trainer.model)
        ctx["run_dir"] = str(trainer.run_dir)
        self._note_checkpoint()

    def _note_checkpoint(self) -> Path | None:
        path = latest_checkpoint(Path(self.trainer.run_dir))
        self.trainer.monitor_context["last_checkpoint"] = str(path) if path is not None else None
        return path

    def health(self) -> dict[str, float]:
        """Metrics of the step just taken that the detectors need (added to its row before they see it)."""
        self.trainer.monitor_context["lr"] = float(self.trainer.optimizer.param_groups[0]["lr"])
        return {mn.TRAIN_WEIGHT_MAX_ABS: weight_max_abs(self.trainer.model)}

    def after_step(self, new_alerts: list[Any]) -> None:
        """Raise `Diverged` on a divergence alert unless `train.on_divergence=continue`."""
        alert = next((a for a in new_alerts if a.detector == "divergence"), None)
        if alert is None or self.trainer.cfg.train.on_divergence == "continue":
            return
        raise Diverged(
            f"the run diverged at step {self.trainer.step}: {alert.message}. Fix: {alert.fix}. No checkpoint of "
            "this step was written (set train.on_divergence=continue to keep training anyway)"
        )

    def learned(self) -> Any | None:
        """With `monitor.stop_when_learned`, the active alert that reads the task as learned (the run stops after
        this step), else None."""
        if not self.trainer.cfg.monitor.stop_when_learned:
            return None
        return next((a for a in self.trainer.monitor.active_alerts() if a.mode in LEARNED_MODES), None)

    def after_save(self) -> None:
        """After the step's checkpoint (if any): on a received signal, make sure this step is saved, then stop."""
        path = self._note_checkpoint()
        signum = interrupts.requested()
        if signum is None:
            return
        t = self.trainer
        if t.step > 0 and (path is None or path.name != f"step_{t.step}"):
            path = t.save()
            self._note_checkpoint()
        saved = f"checkpoint {path}" if path is not None else "no checkpoint (no step finished)"
        raise interrupts.Interrupted(
            signum,
            f"grpokit: stopped by {interrupts.signal_name(signum)} after step {t.step}; {saved}; "
            f"continue with: grpokit train --resume {t.run_dir}",
        )
