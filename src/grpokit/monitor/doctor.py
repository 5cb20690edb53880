"""`grpokit doctor PATH`: diagnose a finished or running training from its logs alone.

Reads grpokit run directories, TRL output directories, verl console/JSONL logs and TensorBoard event
directories (`readers.py`), replays every detector over the logged steps and returns a ranked diagnosis: what is
wrong, since when, the evidence, what to change. Signals the log lacks are listed as not measurable.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import yaml

from .detectors import Monitor, rank
from .readers import read_run

HEADLINE = (
    "reward/mean",
    "reward/accuracy",
    "entropy/token_mean",
    "zv/frac",
    "kl_ref/k3",
    "length/mean",
    "length/truncation_rate",
    "eval/accuracy",
)


TRAINING_KEYS = (
    "reward/mean",
    "entropy/token_mean",
    "actor/loss",
    "train/grad_norm",
    "zv/frac",
    "zv/sample_frac",
    "length/mean",
)


def _run_config(path: Path, source: str) -> dict[str, Any]:
    cfg_path = (path if path.is_dir() else path.parent) / "config.yaml"
    if source != "grpokit" or not cfg_path.exists():
        return {}
    return yaml.safe_load(cfg_path.read_text()) or {}


def _context(cfg: dict[str, Any]) -> dict[str, Any]:
    if not cfg:
        return {}
    a, t = cfg.get("algo", {}), cfg.get("train", {})
    return {
        "dynamic_sampling": a.get("dynamic_sampling"),
        "policy_loss": a.get("policy_loss"),
        "eps_low": a.get("eps_low"),
        "eps_high": a.get("eps_high"),
        "epochs": t.get("epochs", 1),
        "mini_batches": t.get("mini_batches", 1),
        "is_correction": a.get("is_correction"),
        "recipe": cfg.get("recipe"),
    }


def _last(rows: list[dict[str, Any]], key: str) -> float | None:
    for r in reversed(rows):
        v = r.get(key)
        if isinstance(v, (int, float)) and math.isfinite(float(v)):
            return float(v)
    return None


def diagnose(path: str | Path, thresholds: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """Replay the detectors over a log; returns a JSON-able diagnosis. A grpokit run's own `monitor.thresholds`
    apply unless `thresholds` is given."""
    log = read_run(path)
    cfg = _run_config(Path(path), log.source)
    if thresholds is None:
        thresholds = (cfg.get("monitor") or {}).get("thresholds") or None
    mon = Monitor(_context(cfg), thresholds)
    for row in log.rows:
        # readers fill a signal a step did not log with NaN: in a replay NaN means "not logged", so drop it; rows
        # with no training signal at all (evaluation-only rows) are not training steps
        present = {k: v for k, v in row.items() if not (isinstance(v, float) and math.isnan(v))}
        if not any(k in present for k in TRAINING_KEYS):
            continue
        mon.observe(int(row.get("step", 0)), present)
    alerts = rank(mon.alerts)
    steps = [int(r["step"]) for r in log.rows if "step" in r]
    return {
        "path": str(path),
        "source": log.source,
        "steps": len(steps),
        "last_step": max(steps) if steps else None,
        "alerts": [a.to_dict() for a in alerts],
        "active": mon.active(),
        "not_measurable": mon.not_measurable(log.available),
        "last_values": {k: v for k in HEADLINE if (v := _last(log.rows, k)) is not None},
    }


def render(diag: dict[str, Any]) -> str:
    """A short, ranked, human-readable diagnosis."""
    out = [f"{diag['path']}: {diag['source']} log, {diag['steps']} steps (last step {diag['last_step']})"]
    if diag["last_values"]:
        out.append("  now: " + ", ".join(f"{k} {v:.3g}" for k, v in diag["last_values"].items()))
    if not diag["alerts"]:
        out.append("No failure mode detected.")
    for i, a in enumerate(diag["alerts"], 1):
        still = " (still active)" if a["mode"] in diag["active"] else ""
        out.append(
            f"{i}. {a['severity'].upper()} {a['mode']}{still}: since step {a['step']} "
            f"(confirmed at step {a['fired_at']})"
        )
        out.append(f"   what: {a['message']}")
        out.append("   evidence: " + ", ".join(f"{k}={v}" for k, v in a["evidence"].items()))
        out.append(f"   change: {a['fix']}")
    if diag["not_measurable"]:
        out.append("Not measurable from this log (signals it does not record):")
        for name, miss in diag["not_measurable"].items():
            out.append(f"  - {name}: needs {', '.join(miss)}")
    return "\n".join(out)


def doctor_main(path: str, as_json: bool = False) -> int:
    diag = diagnose(path)
    print(json.dumps(diag, indent=1, default=str) if as_json else render(diag))
    return 1 if any(a["severity"] == "critical" for a in diag["alerts"]) else 0
