"""Autopilot (opt-in, `--autopilot`): when a detector fires, apply its recommended config change within the
bounds the user set, and log every intervention with its reason and the metrics before and after.

Actions are config edits (`key=value`, `key+=delta`, `key*=factor`) on keys of the run config, so each one is
reversible by config: rerun with `--set key=<before>`. Runtime state that mirrors a key (learning rate,
entropy-bonus and KL coefficients) is updated with it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from .. import metric_names as mn
from ..algos.kl import AdaptiveKLController
from ..config import ConfigError, set_key
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


class Autopilot:
    """Applies alert actions to a live Trainer."""

    def __init__(self, trainer: Any, bounds: Bounds | None = None) -> None:
        self.trainer = trainer
        self.bounds = bounds or Bounds()
        self.log: list[dict[str, Any]] = []
        self.pending: list[dict[str, Any]] = []

    def _get(self, key: str) -> Any:
        section, name = key.split(".")
        return getattr(getattr(self.trainer.cfg, section), name)

    def _bounded(self, key: str, value: Any) -> Any:
        b = self.bounds
        limits = {
            "algo.eps_high": lambda v: min(v, b.max_eps_high),
            "algo.entropy_coef": lambda v: min(v, b.max_entropy_coef),
            "train.lr": lambda v: max(v, b.min_lr),
        }
        return limits.get(key, lambda v: v)(value)

    def _sync_runtime(self, key: str, value: Any) -> None:
        t = self.trainer
        if key == "train.lr":
            for g in t.optimizer.param_groups[:1]:
                g["lr"] = value
            t.scheduler.base_lrs[0] = value
        elif key == "algo.entropy_coef":
            t.ent_coef.value = value
        elif key == "algo.kl_coef":
            t.kl_ctl.value = value
        elif key == "algo.kl_controller" and value == "adaptive":
            a = t.cfg.algo
            t.kl_ctl = AdaptiveKLController(t.kl_ctl.value, a.kl_target, a.kl_horizon)

    def apply(self, action: str) -> tuple[Any, Any] | None:
        """Apply one action; returns (before, after) or None if it changes nothing or is out of bounds."""
        m = ACTION_RE.match(action.replace(" ", ""))
        if not m:
            return None
        key, op, raw = m["key"], m["op"], m["value"]
        before = self._get(key)
        if op == "=":
            value: Any = raw
        else:
            base = float(
                before if before is not None else (self.trainer.cfg.algo.eps_low if key == "algo.eps_high" else 0.0)
            )
            value = base + float(raw) if op == "+=" else base * float(raw)
            value = self._bounded(key, value)
        try:
            set_key(self.trainer.cfg, key, value)
        except ConfigError:
            return None
        after = self._get(key)
        if after == before:
            return None
        self._sync_runtime(key, after)
        return before, after

    def state_dict(self) -> dict[str, Any]:
        """What a checkpoint keeps: the interventions made (they count against the budget) and pending follow-ups."""
        return {"log": list(self.log), "pending": list(self.pending)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore after `--resume`: re-apply every intervention's config change (config.yaml holds the values the
        run started with) and the runtime state that mirrors a key but is not in the checkpoint."""
        self.log = list(state.get("log", []))
        self.pending = list(state.get("pending", []))
        for row in self.log:
            m = ACTION_RE.match(str(row.get("action", "")).replace(" ", ""))
            if m is None:
                continue
            key = m["key"]
            set_key(self.trainer.cfg, key, row["after"])
            if key == "algo.kl_controller":  # the coefficients themselves are restored from the checkpoint
                self._sync_runtime(key, row["after"])

    def react(self, step: int, alerts: list[Alert], metrics: dict[str, Any]) -> list[dict[str, Any]]:
        """Apply the actions of newly fired alerts; complete follow-ups that are due. Returns new log rows."""
        rows = []
        for p in [p for p in self.pending if step >= p["step"] + self.bounds.followup_steps]:
            p["metrics_after"] = {k: metrics.get(k) for k in FOLLOWUP_KEYS if k in metrics}
            p["after_step"] = step
            rows.append(dict(p, kind="followup"))
            self.pending.remove(p)
        for alert in alerts:
            for action in alert.actions:
                if len(self.log) >= self.bounds.max_interventions:
                    break
                change = self.apply(action)
                if change is None:
                    continue
                row = {
                    "kind": "intervention",
                    "step": step,
                    "reason": f"{alert.mode}: {alert.message}",
                    "action": action,
                    "before": change[0],
                    "after": change[1],
                    "metrics_before": {k: metrics.get(k) for k in FOLLOWUP_KEYS if k in metrics},
                }
                self.log.append(row)
                self.pending.append(row)
                rows.append(row)
        return rows


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
