"""`grpokit train --resume RUN`: what a resumed run may change, and putting its logs and monitor back as they were.

- The run's own config.yaml is the config. `--set` on keys that do not change what the checkpoint holds (steps,
  schedules of eval/saving, the learning rate, thresholds, `SAFE_KEYS`) is honoured and printed as a diff; keys
  that change the model, the data or the algorithm, and `--model/--recipe/--task/--config/--seed` that differ
  from the run's, are refused with the reason (the checkpoint would not match them).
- No checkpoint yet: refused (restarting at step 0 would duplicate the rows already logged). A finished run asked
  for more steps (`--steps M` past its last) continues from its last checkpoint, which holds the optimizer state by
  default (as in TRL); one written with `train.save_only_model=true` holds the model only, so that resume is refused,
  before the claim, in one line naming `--model` and `train.save_only_model=false`. A completed run at its
  `train.steps`: nothing left to train (`grpokit.training.run.nothing_left`), said, and nothing changed.
- The run is claimed for the resume as a new run claims its directory (`grpokit.run.directory.claim_existing_run`): a
  second `--resume` of a run that is still training is refused; a claim left by a dead process is taken over.
- `--output-dir`, `--out` or `--name` naming another directory than the resumed one are refused (the run stays
  where it is); a run file that is a symbolic link (metrics.jsonl pointing outside the run) is refused, since a
  resume rewrites those files, and so is a checkpoint that is one (`checkpoints/step_9` planted as the newest).
- A line in metrics.jsonl / completions.jsonl / alerts.jsonl / interventions.jsonl that is not a JSON object with
  an integer step (a kill mid-write tears the last line) is dropped and said so; what was logged after the
  checkpoint is removed by the trainer's restore, so no row is ever duplicated (a finished run extended keeps its
  final evaluation row, which no later step writes again: `grpokit.training.checkpointing`).
- After the restore, the detectors replay the logged rows up to the checkpoint, so alerts already raised are not
  raised again, and they see the autopilot's fixes in force.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..config import Config, ConfigError, config_from_dict, parse_override, read_yaml, resolve_config, set_key
from ..run.checkpoint import CheckpointError, ModelOnlyCheckpoint, latest_checkpoint, read_state

if TYPE_CHECKING:  # typed only: `grpokit train --resume` reads configs before it imports torch
    from .trainer import Trainer

# keys a resumed run may change: they alter neither the weights' meaning nor the data or the algorithm
SAFE_KEYS = frozenset(
    {
        "train.steps",
        "train.lr",
        "train.max_grad_norm",
        "train.eval_every",
        "train.save_every",
        "train.save_total_limit",
        "train.log_completions",
        "train.on_divergence",
        "train.autopilot_max_interventions",
        "reward.timeout_s",
        "reward.model_device",
        "train.save_only_model",
        "reward.max_fail_frac",
        "rollout.eval_temperature",
        "model.device",
        "monitor.stop_when_learned",
    }
)
LOGS = ("metrics.jsonl", "completions.jsonl", "alerts.jsonl", "interventions.jsonl")
# the files and folders a resume rewrites (and their temporary copies): never through a symbolic link
RUN_FILES = (*LOGS, "config.yaml", "run.json", "outcome.json", "checkpoints", "final", "tb")


class ResumeError(ValueError):
    """A resume that cannot be done as asked; the message says why and what to do."""


def _get(cfg: Config, key: str) -> Any:
    section, name = key.split(".", 1)
    return getattr(getattr(cfg, section), name)


def resume_config(run_dir: Path, overrides: list[str], flags: dict[str, Any]) -> tuple[Config, list[str]]:
    """The run's config with the allowed overrides applied, and one diff line per changed key.

    `flags` are the other command-line options given with --resume (model, recipe, task, config, seed, steps):
    `steps` is honoured, the others must match the run."""
    path = run_dir / "config.yaml"
    if not path.exists():
        raise ResumeError(f"--resume {str(run_dir)!r}: no config.yaml there; pass a run directory")
    data = read_yaml(path)
    if not isinstance(data, dict):
        raise ResumeError(f"{path}: not a grpokit config (expected config sections, got {type(data).__name__})")
    cfg = config_from_dict(data)
    run_values = {"model": cfg.model.name, "recipe": cfg.recipe, "task": cfg.data.task, "seed": cfg.train.seed}
    for flag, value in flags.items():
        if flag in run_values and value is not None and str(value) != str(run_values[flag]):
            raise ResumeError(
                f"--{flag} {value} differs from the resumed run's {flag} {run_values[flag]!r}: its checkpoint "
                f"belongs to that {flag}; drop --{flag}, or start a new run without --resume"
            )
        if flag == "config" and value is not None:
            raise ResumeError("--config cannot be combined with --resume: the run keeps its config.yaml; use --set")
    pairs = [parse_override(o) for o in overrides]
    if flags.get("steps") is not None:
        pairs.append(("train.steps", flags["steps"]))
    diffs = []
    for key, value in pairs:
        if key not in SAFE_KEYS and not key.startswith("monitor."):
            raise ResumeError(
                f"--set {key}={value} cannot change a resumed run: {key} changes the model, the data or the algorithm "
                f"its checkpoint was trained with; start a new run for it. A resume may change: "
                f"{', '.join(sorted(SAFE_KEYS))}, monitor.*"
            )
        before = _get(cfg, key)
        try:
            set_key(cfg, key, value)
        except ConfigError as e:
            raise ResumeError(str(e)) from None
        if _get(cfg, key) != before:
            diffs.append(f"{key}: {before!r} -> {_get(cfg, key)!r}")
    return resolve_config(cfg), diffs


def check_location(run_dir: Path, output_dir: str | None, out: str | None, name: str | None) -> None:
    """A resume continues the run where it is: `--output-dir` naming another directory, `--out` and `--name`
    (which place new runs) are contradictions, refused rather than ignored."""
    if output_dir and Path(output_dir).resolve() != run_dir.resolve():
        raise ResumeError(
            f"--output-dir {output_dir} differs from the resumed run {run_dir}: a resume continues the run in its own "
            "directory; drop --output-dir, or copy the run there and resume the copy"
        )
    for flag, value in (("--out", out), ("--name", name)):
        if value:
            raise ResumeError(
                f"{flag} {value} cannot be combined with --resume: {flag} places a new run, a resume continues "
                f"{run_dir} where it is; drop {flag}"
            )


def refuse_symlinks(run_dir: Path) -> None:
    """ResumeError when a file a resume rewrites is a symbolic link, or a checkpoint is one: rewriting it would write
    wherever it points, and a linked checkpoint (an old state planted as the newest) would be loaded and trained
    from, then the run's real newest one pruned in its favour."""
    root = run_dir / "checkpoints"
    checkpoints = sorted(root.iterdir()) if root.is_dir() and not root.is_symlink() else []
    for name in RUN_FILES:
        for path in (run_dir / name, run_dir / f"{name}.tmp", *(checkpoints if name == "checkpoints" else [])):
            if path.is_symlink():
                raise ResumeError(
                    f"--resume {run_dir}: {path.relative_to(run_dir)} is a symbolic link (to {os.readlink(path)!r}); a "
                    "resume rewrites it (or trusts it as a checkpoint), and would write outside the run. Remove the "
                    "link or replace it with a copy, or resume a copy of the run"
                )


def require_checkpoint(run_dir: Path, steps: int) -> Path:
    """The newest checkpoint, which a resume loads; ResumeError when there is none, or when it holds the model only
    (`grpokit.run.checkpoint.ModelOnlyCheckpoint`) and is short of `steps`, said before the run is claimed."""
    path = latest_checkpoint(run_dir)
    if path is None:
        raise ResumeError(
            f"--resume {run_dir}: no checkpoint in {run_dir / 'checkpoints'} (the run stopped before its first one); "
            "nothing to resume: start the run again without --resume (a new directory)"
        )
    try:
        state = read_state(path)
    except CheckpointError:  # unreadable: the restore moves it aside and says so
        return path
    if state.get("model_only") and state["step"] < steps:
        raise ResumeError(f"--resume {run_dir}: {ModelOnlyCheckpoint(path)}")
    return path


def is_row(raw: bytes) -> bool:
    """Whether a log line is a row a resume can read: a JSON object whose `step` (and an intervention's
    `after_step`), when present, is an integer."""
    try:
        row = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
        return False
    if not isinstance(row, dict):
        return False
    return all(isinstance(row.get(k, 0), int) and not isinstance(row.get(k), bool) for k in ("step", "after_step"))


def repair_logs(run_dir: Path) -> list[str]:
    """Drop lines that are not rows (`is_row`: a torn last line after a kill, or anything else) from the run's
    JSONL logs; one note per log."""
    notes = []
    for name in LOGS:
        path = run_dir / name
        if not path.exists():
            continue
        lines = [x for x in path.read_bytes().split(b"\n") if x.strip()]
        bad = [i for i, raw in enumerate(lines, start=1) if not is_row(raw)]
        if not bad:
            continue
        dropped = set(bad)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_bytes(b"".join(g + b"\n" for i, g in enumerate(lines, start=1) if i not in dropped))
        os.replace(tmp, path)
        if bad == [len(lines)]:
            notes.append(f"{name}: dropped 1 torn line(s) (its last line, cut by a kill mid-write)")
        else:
            notes.append(f"{name}: dropped {len(bad)} line(s) that are not log rows (lines {bad[:5]})")
    return notes


def apply_runtime_overrides(trainer: Trainer, diffs: list[str]) -> None:
    """A changed train.lr reaches the restored optimizer (its state dict holds the old rate)."""
    if not any(d.startswith("train.lr:") for d in diffs):
        return
    lr = trainer.cfg.train.lr
    sched = trainer.scheduler
    sched.base_lrs = [lr for _ in sched.base_lrs]
    factor = sched.lr_lambdas[0](sched.last_epoch) if getattr(sched, "lr_lambdas", None) else 1.0
    for group in trainer.optimizer.param_groups:
        group["lr"] = lr * factor


def replay_monitor(trainer: Trainer) -> int:
    """Feed the logged training rows up to the checkpoint to the detectors (alerts already in alerts.jsonl are
    not written again); returns the rows replayed."""
    from .detector_context import monitor_context

    trainer.monitor_context.update(monitor_context(trainer.cfg))  # autopilot fixes restored with the checkpoint
    path = trainer.run_dir / "metrics.jsonl"
    if not path.exists():
        return 0
    n = 0
    for line in path.read_text().splitlines():
        row = json.loads(line) if line.strip() else {}
        if "time/step" in row and int(row.get("step", 0)) <= trainer.step:
            trainer.monitor.observe(int(row["step"]), row)
            n += 1
    return n


def restore(trainer: Trainer, diffs: list[str], notes: list[str], display: Any) -> int:
    """Restore the trainer from its latest checkpoint, then overrides and the monitor; print what changed."""
    for line in notes:
        display.message(f"resume: {line}")
    for line in diffs:
        display.message(f"resume: override {line}")
    step = trainer.restore()
    if step == 0:  # every checkpoint unreadable: starting over would duplicate the logged rows
        raise ResumeError(f"--resume {trainer.run_dir}: no readable checkpoint; start the run again without --resume")
    apply_runtime_overrides(trainer, diffs)
    replay_monitor(trainer)
    return step
