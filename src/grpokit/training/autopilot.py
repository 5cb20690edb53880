"""Autopilot (opt-in, `--autopilot`): when a detector fires, propose its recommended config change within the bounds
the user set, and log every intervention with its reason and the metrics before and after.

Actions are config edits (`key=value`, `key+=delta`, `key*=factor`) on keys of the run config, so each one is
reversible by config: rerun with `--set key=<before>`. The autopilot changes nothing itself: it returns each
change as a `Change` (key, value), and the trainer applies them in one place (`Trainer.apply_changes`), which also
refreshes every runtime mirror of the key (learning rate, entropy-bonus and KL coefficients, the KL controller) and
the detectors' context.
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass
from typing import Any

from .. import metric_names as mn
from ..config import Config, ConfigError, set_key
from ..monitor.detectors import Alert

ACTION_RE = re.compile(r"^(?P<key>[\w.]+)(?P<op>\+=|\*=|=)(?P<value>.+)$")
FOLLOWUP_KEYS = (mn.REWARD_MEAN, mn.REWARD_ACCURACY, mn.ENTROPY_TOKEN_MEAN, mn.ZV_FRAC, mn.KL_REF_K3, mn.LENGTH_MEAN)


@dataclass
class Bounds:
    """Limits the autopilot never crosses."""

    max_eps_high: float = 0.4
    max_entropy_coef: float = 0.01
    min_lr: float = 1e-7
    max_interventions: int = 5
    followup_steps: int = 5


@dataclass(frozen=True)
class Change:
    """One config change: `key` (`section.name`) takes `value` (checked and typed as the config holds it); `before`
    is what it held."""

    key: str
    value: Any
    before: Any = None


def _get(cfg: Config, key: str) -> Any:
    section, name = key.split(".")
    return getattr(getattr(cfg, section), name)


class Autopilot:
    """Turns alert actions into bounded config changes for the run whose config is `cfg` (read, never written)."""

    def __init__(self, cfg: Config, bounds: Bounds | None = None) -> None:
        self.cfg = cfg
        self.bounds = bounds or Bounds()
        self.log: list[dict[str, Any]] = []
        self.pending: list[dict[str, Any]] = []
        self.unable: set[str] = set()  # the failure modes it said it could not act on (once each)

    def _bounded(self, key: str, value: Any) -> Any:
        b = self.bounds
        limits = {
            "algo.eps_high": lambda v: min(v, b.max_eps_high),
            "algo.entropy_coef": lambda v: min(v, b.max_entropy_coef),
            "train.lr": lambda v: max(v, b.min_lr),
        }
        return limits.get(key, lambda v: v)(value)

    def change(self, action: str, cfg: Config | None = None) -> Change | None:
        """The change `action` makes to `cfg` (default: the run's), bounded; None when it changes nothing, is out of
        bounds or is not a valid value. `cfg` is not changed."""
        m = ACTION_RE.match(action.replace(" ", ""))
        if not m:
            return None
        cfg = cfg or self.cfg
        key, op, raw = m["key"], m["op"], m["value"]
        before = _get(cfg, key)
        if op == "=":
            value: Any = raw
        else:
            base = float(before if before is not None else (cfg.algo.eps_low if key == "algo.eps_high" else 0.0))
            value = self._bounded(key, base + float(raw) if op == "+=" else base * float(raw))
        trial = copy.deepcopy(cfg)
        try:
            set_key(trial, key, value)  # checked and typed as the config would hold it
        except ConfigError:
            return None
        after = _get(trial, key)
        return None if after == before else Change(key, after, before)

    def state_dict(self) -> dict[str, Any]:
        """What a checkpoint keeps: the interventions made (they count against the budget) and pending follow-ups."""
        return {"log": list(self.log), "pending": list(self.pending), "unable": sorted(self.unable)}

    def load_state_dict(self, state: dict[str, Any]) -> list[Change]:
        """Restore after `--resume`; returns every intervention's change, for the trainer to apply again
        (config.yaml holds the values the run started with)."""
        self.log = list(state.get("log", []))
        self.pending = list(state.get("pending", []))
        self.unable = set(state.get("unable", []))
        changes = []
        for row in self.log:
            m = ACTION_RE.match(str(row.get("action", "")).replace(" ", ""))
            if m is not None:
                changes.append(Change(m["key"], row["after"], row.get("before")))
        return changes

    def react(
        self, step: int, alerts: list[Alert], metrics: dict[str, Any]
    ) -> tuple[list[dict[str, Any]], list[Change]]:
        """The actions of newly fired alerts as changes (each seeing the ones before it), and the follow-ups that are
        due. Returns (new log rows, changes to apply)."""
        rows: list[dict[str, Any]] = []
        changes: list[Change] = []
        for p in [p for p in self.pending if step >= p["step"] + self.bounds.followup_steps]:
            p["metrics_after"] = {k: metrics.get(k) for k in FOLLOWUP_KEYS if k in metrics}
            p["after_step"] = step
            rows.append(dict(p, kind="followup"))
            self.pending.remove(p)
        trial = copy.deepcopy(self.cfg)
        for alert in alerts:
            made = len(changes)
            for action in alert.actions:
                if len(self.log) >= self.bounds.max_interventions:
                    break
                change = self.change(action, trial)
                if change is None:
                    continue
                set_key(trial, change.key, change.value)
                changes.append(change)
                row = {
                    "kind": "intervention",
                    "step": step,
                    "reason": f"{alert.mode}: {alert.message}",
                    "action": action,
                    "before": change.before,
                    "after": change.value,
                    "metrics_before": {k: metrics.get(k) for k in FOLLOWUP_KEYS if k in metrics},
                }
                self.log.append(row)
                self.pending.append(row)
                rows.append(row)
            if len(changes) == made and alert.severity in ("warning", "critical") and alert.mode not in self.unable:
                self.unable.add(alert.mode)
                rows.append(self.unable_row(step, alert))
        return rows, changes

    def unable_row(self, step: int, alert: Alert) -> dict[str, Any]:
        """An alert the autopilot made no change for: why, and what it would need (the alert's fix)."""
        if not alert.actions:
            why = "none of its fixes is a config change the autopilot can make during the run"
        elif len(self.log) >= self.bounds.max_interventions:
            why = f"its budget of {self.bounds.max_interventions} interventions is spent"
        else:
            why = (
                f"its changes ({', '.join(alert.actions)}) are in force already or outside the train.autopilot_* bounds"
            )
        return {
            "kind": "unable",
            "step": step,
            "mode": alert.mode,
            "reason": f"{alert.mode}: {alert.message}",
            "why": why,
            "needs": alert.fix,
        }


def write_rows(path: Any, rows: list[dict[str, Any]]) -> None:
    with open(path, "a") as f:
        for r in rows:
            f.write(json.dumps(r, default=str) + "\n")


def truncate_rows_after(path: Any, step: int) -> None:
    """On resume: drop intervention rows logged after the checkpoint's step (they will be redone)."""
    from pathlib import Path

    path = Path(path)
    if not path.exists():
        return
    keep = []
    for line in path.read_text().splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue  # a torn last line (killed mid-write)
        if int(row.get("after_step", row.get("step", 0))) <= step:
            keep.append(line)
    path.write_text("".join(ln + "\n" for ln in keep))
