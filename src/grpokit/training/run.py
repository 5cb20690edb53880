"""One way to run a training: `run(cfg, run_dir, display=...)`, which the command line (`grpokit train`, `grpokit
demo`) and the Python API (`grpokit.train`) each wrap in a few lines.

`run` owns what every entry point needs and none should assemble by hand:

- the config's warnings (deprecations, settings that have no effect), shown before anything loads;
- the session's lifetime: opened here (model, engine, rewards, data, a multi-turn run's tools) and closed when the run
  ends, also on an error or a signal, so no reward or tool worker is left running;
- signals: SIGINT/SIGTERM finish the step, write a checkpoint and stop (`grpokit.training.interrupts`);
- resume: with `resume`, the precision the run trained in, its newest checkpoint restored, the overrides applied
  and the monitor replayed (`grpokit.training.resume`); a run already at `train.steps` is not trained, saved or
  evaluated again (`nothing_left`).

The run directory's claim and outcome (`grpokit.run.directory.claimed_run`) stay with the caller, which chose it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config import Config
from ..run.checkpoint import CheckpointError, latest_checkpoint, read_state, recorded_precision
from ..run.outcome import read_outcome
from .interrupts import handle_signals
from .loop import fit
from .resume import restore
from .session import open_session
from .trainer import Trainer


@dataclass
class Resume:
    """What `grpokit train --resume` brings to `run`: the overrides honoured (one diff line each, printed) and the
    notes of log lines repaired before the restore."""

    diffs: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def nothing_left(run_dir: Path, steps: int) -> str | None:
    """The line to say, instead of training, when the run completed (its outcome recorded) and its newest checkpoint
    is already at `steps` (a finished run resumed without a larger `--steps`); None when there is something to do,
    also a run killed after its last step but before its final model was written."""
    path = latest_checkpoint(Path(run_dir))
    if path is None or (read_outcome(Path(run_dir)) or {}).get("status") != "completed":
        return None
    try:
        state = read_state(path)
    except CheckpointError:  # unreadable: the restore moves it aside and says so
        return None
    step = int(state["step"])
    if step < steps:
        return None
    further = (
        f"start a new run from its weights with --model {Path(run_dir) / 'final'} (its checkpoint holds the model "
        "only: train.save_only_model=false, the default, keeps a finished run continuable)"
        if state.get("model_only")
        else f"grpokit train --resume {run_dir} --steps N with N > {step}"
    )
    return (
        f"grpokit: nothing left to train: {run_dir} has trained {step} steps (checkpoint {path.name}), "
        f"train.steps is {steps}; nothing was trained, saved or evaluated. To train further: {further}"
    )


def run(
    cfg: Config,
    run_dir: str | Path,
    *,
    display: Any,
    resume: Resume | None = None,
    functions: dict[str, Callable[..., Any]] | None = None,
    eval_samples: int = 1,
) -> dict[str, Any]:
    """Train `cfg` in `run_dir` (already claimed by the caller) and return the summary of `fit`: evaluation before
    (not on a resume) and after, the final model, why it stopped early if it did.

    `display` gets every line (`message`), the progress and alerts, and is closed when the run ends. `functions`
    maps names in `reward.functions` to in-memory callables (the Python API's `reward_funcs`)."""
    run_dir = Path(run_dir)
    try:
        display.message(f"grpokit: recipe {cfg.recipe}, task {cfg.data.task}, model {cfg.model.name}, run {run_dir}")
        for warning in cfg.warnings:
            display.message(f"warning: {warning}")
        if resume is not None and (line := nothing_left(run_dir, cfg.train.steps)) is not None:
            display.message(line)
            return {"run_dir": str(run_dir), "nothing_left": True}
        # a resume keeps the precision the run trained in, not a fresh `auto` probe (which could flip bf16 <-> fp32)
        precision = recorded_precision(run_dir) if resume is not None else None
        session = open_session(cfg, precision=precision, functions=functions)
        try:
            trainer = Trainer(cfg, run_dir, session=session)
            if resume is not None:
                step = restore(trainer, resume.diffs, resume.notes, display)  # overrides, logs, the monitor
                display.message(f"resumed from step {step}")
            display.message(
                f"precision {trainer.precision.name} on {trainer.device}; {cfg.rollout.prompts_per_step} prompts x "
                f"{cfg.rollout.group_size} samples x {cfg.rollout.max_new_tokens} new tokens per step"
            )
            with handle_signals():  # SIGINT/SIGTERM: finish the step, checkpoint, stop
                return fit(trainer, display, eval_before=resume is None, eval_samples=eval_samples)
        finally:
            session.close()  # the reward worker, and a multi-turn run's tool worker and environments
    finally:
        display.close()
