"""`grpokit train --resume RUN`: what a resumed run may change, and putting its logs and monitor back as they were.

- The run's own config.yaml is the config. `--set` on keys that do not change what the checkpoint holds (steps,
  schedules of eval/saving, the learning rate, thresholds, `SAFE_KEYS`) is honoured and printed as a diff; keys
  that change the model, the data or the algorithm, and `--model/--recipe/--task/--config/--seed` that differ
  from the run's, are refused with the reason (the checkpoint would not match them).
- No checkpoint yet: refused (restarting at step 0 would duplicate the rows already logged).
- A torn line in metrics.jsonl / completions.jsonl / alerts.jsonl (a kill mid-write) is dropped and said so;
  rows after the checkpoint's step are removed by the trainer's restore, so no row is ever duplicated.
- After the restore, the detectors replay the logged rows up to the checkpoint, so alerts already raised are not
  raised again, and they see the autopilot's fixes in force.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import yaml

from .checkpoint import latest_checkpoint
from .config import Config, ConfigError, config_from_dict, parse_override, set_key

# keys a resumed run may change: they alter neither the weights' meaning nor the data or the algorithm
SAFE_KEYS = frozenset(
    {
        "train.steps",
        "train.lr",
        "train.max_grad_norm",
        "train.eval_every",
        "train.save_every",
        "train.keep_checkpoints",
        "train.log_completions",
        "train.on_divergence",
        "train.autopilot_max_interventions",
        "reward.timeout_s",
        "reward.max_fail_frac",
        "rollout.eval_temperature",
        "model.device",
    }
)
LOGS = ("metrics.jsonl", "completions.jsonl", "alerts.jsonl")


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
    cfg = config_from_dict(yaml.safe_load(path.read_text()))
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
    return cfg.resolve(), diffs


def require_checkpoint(run_dir: Path) -> Path:
    path = latest_checkpoint(run_dir)
    if path is None:
        raise ResumeError(
            f"--resume {run_dir}: no checkpoint in {run_dir / 'checkpoints'} (the run stopped before its first one); "
            "nothing to resume: start the run again without --resume (a new directory)"
        )
    return path


def repair_logs(run_dir: Path) -> list[str]:
    """Drop lines that are not JSON (a torn last line after a kill) from the run's JSONL logs; one note each."""
    notes = []
    for name in LOGS:
        path = run_dir / name
        if not path.exists():
            continue
        lines = path.read_bytes().split(b"\n")
        good, bad = [], []
        for i, raw in enumerate(lines, start=1):
            if not raw.strip():
                continue
            try:
                json.loads(raw)
                good.append(raw)
            except (json.JSONDecodeError, UnicodeDecodeError):
                bad.append(i)
        if not bad:
            continue
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_bytes(b"".join(g + b"\n" for g in good))
        os.replace(tmp, path)
        where = "its last line" if bad == [len([x for x in lines if x.strip()])] else f"lines {bad[:5]}"
        notes.append(f"{name}: dropped {len(bad)} torn line(s) ({where}, cut by a kill mid-write)")
    return notes


def apply_runtime_overrides(trainer: Any, diffs: list[str]) -> None:
    """A changed train.lr reaches the restored optimizer (its state dict holds the old rate)."""
    if not any(d.startswith("train.lr:") for d in diffs):
        return
    lr = trainer.cfg.train.lr
    sched = trainer.scheduler
    sched.base_lrs = [lr for _ in sched.base_lrs]
    factor = sched.lr_lambdas[0](sched.last_epoch) if getattr(sched, "lr_lambdas", None) else 1.0
    for group in trainer.optimizer.param_groups:
        group["lr"] = lr * factor


def replay_monitor(trainer: Any) -> int:
    """Feed the logged training rows up to the checkpoint to the detectors (alerts already in alerts.jsonl are
    not written again); returns the rows replayed."""
    from .trainer import monitor_context

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


def restore(trainer: Any, diffs: list[str], notes: list[str], display: Any) -> int:
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
