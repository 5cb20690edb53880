"""The training engine: one run's state and its step, the loop around it, and everything a step needs.

- `run.py`: `run`, the one way to run a training (the CLI and `grpokit.train` wrap it): warnings, the session's
  lifetime, signals, resume.
- `trainer.py`: `Trainer`, a run's state and `train_step` (the phases in order); `loop.py`: `fit`, the loop around
  the steps (evaluation, detectors and alerts, autopilot, checkpoints, the final model); `timer.py`: a step's `Timer`.
- `phases/`: the step's phases, one module each: rollout, scoring, advantage, update, signals, value pretraining,
  and `batch_source.py` (rollout + scoring + the group filter of `algos/group_filter.py`, now or one update behind).
- `session.py` (model, tokenizer, engine, rewards, data of a run), `batch.py` (the typed data of a step).
- The terms around the policy: `critic.py` (the value model of the PPO family); the KL reference and where the KL
  enters are `grpokit.algos` (`reference.py`, `kl_placement.py`).
- Around each step: `guard.py` (divergence, interrupts, stop when learned), `interrupts.py`, `autopilot.py`,
  `evaluation.py` (held-out accuracy), `checkpointing.py` and `resume.py` (a run's state saved and restored).
Elsewhere: rollout engines in `grpokit.rollout`; torchrun process groups and weight layouts in `grpokit.parallel`;
a group's shared prompt and the learner's forward pass in `grpokit.models` (`prefix.py`, `forward.py`); the run
directory's files in `grpokit.run`; detectors in `grpokit.monitor`. `Trainer` and `fit` are imported on first use,
so importing a module of this package stays light.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Trainer", "fit"]


def __getattr__(name: str) -> Any:
    if name == "Trainer":
        from .trainer import Trainer

        return Trainer
    if name == "fit":
        from .loop import fit

        return fit
    raise AttributeError(f"module 'grpokit.training' has no attribute {name!r}")
