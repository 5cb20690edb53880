"""The `Alert` a detector raises, the `Detector` base (onset, cooldown, escalation), `Windowed` for rules over
the last training steps of one signal, and the registry `DETECTORS` (`@register`)."""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass, field
from typing import Any

from ...common.registry import Registry
from .rows import StepWindow, first_logged

SEVERITY_RANK = {"critical": 0, "warning": 1, "info": 2}


ESCALATIONS_KEPT = 16


@dataclass
class Alert:
    """A failure mode that started at `step` (onset) and was confirmed at `fired_at`.

    While the mode lasts, `current` holds the latest step's message and evidence, `escalations` its severity and
    reading changes (the last ESCALATIONS_KEPT; `escalations_dropped` counts the earlier ones, so a reading that
    flips every step of a long run costs bounded memory), and `cleared_at` the step it cleared (None while active)."""

    mode: str
    detector: str
    step: int
    fired_at: int
    severity: str
    message: str
    evidence: dict[str, Any]
    fix: str
    actions: list[str] = field(default_factory=list)  # config changes autopilot may apply (key=value)
    current: dict[str, Any] | None = None
    escalations: list[dict[str, Any]] = field(default_factory=list)
    cleared_at: int | None = None
    escalations_dropped: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def note(self, change: dict[str, Any]) -> None:
        """Record a severity or reading change, keeping the last ESCALATIONS_KEPT."""
        self.escalations.append(change)
        if len(self.escalations) > ESCALATIONS_KEPT:
            del self.escalations[0]
            self.escalations_dropped += 1


class Detector:
    """Base: `observe(step, metrics)` -> Alert | None. Subclasses implement `check`."""

    name = "detector"
    mode = "unknown"
    requires: tuple[tuple[str, ...], ...] = ()  # each inner tuple: alternatives, one of which must be logged

    def __init__(self, context: dict[str, Any] | None = None, **params: Any) -> None:
        self.context = context or {}
        for k, v in params.items():
            attr = getattr(type(self), k, None)
            if not hasattr(self, k) or k.startswith("_") or callable(attr) or isinstance(attr, property):
                raise ValueError(f"detector {self.name} has no threshold {k!r}")
            setattr(self, k, v)
        self.active = False
        self.onset: int | None = None
        self.alert: Alert | None = None  # the alert of the current (or last) episode

    @property
    def min_steps(self) -> int:
        """Training steps a log must cover before this detector can judge (used for "too few steps")."""
        return int(getattr(self, "window", 1))

    def applies(self, available: set[str]) -> bool:
        """Whether this detector's failure mode can occur in a log with these signals at all (a multi-turn detector
        does not apply to a single-turn log); one that does not apply is neither missing signals nor short of steps."""
        return True

    def missing(self, available: set[str]) -> list[str]:
        """Required signals absent from a log (each entry lists its alternatives)."""
        return [" or ".join(alts) for alts in self.requires if not any(a in available for a in alts)]

    def check(self, step: int, m: dict[str, Any]) -> tuple[bool, Alert | None]:
        """Return (condition holds now, alert describing it now)."""
        raise NotImplementedError

    def new_alert(
        self,
        step: int,
        severity: str,
        message: str,
        evidence: dict[str, Any],
        fix: str,
        actions: list[str] | None = None,
        *,
        onset: int | None = None,
        mode: str | None = None,
    ) -> Alert:
        """An alert of this detector confirmed at `step`, of its own mode unless `mode` is given, that started at
        `onset` (`step` when None) and offers `actions` (none when None). Evidence the log does not hold (None) is
        left out, never shown as `=None`."""
        return Alert(
            self.mode if mode is None else mode,
            self.name,
            step if onset is None else onset,
            step,
            severity,
            message,
            {k: v for k, v in evidence.items() if v is not None},
            fix,
            [] if actions is None else actions,
        )

    cooldown = 10  # steps after a mode clears before the same detector may alert again (no alert spam)

    def observe(self, step: int, m: dict[str, Any]) -> Alert | None:
        holds, alert = self.check(step, m)
        if holds and not self.active:
            self.active = True
            last = getattr(self, "_cleared_at", None)
            if last is not None and step - last <= self.cooldown and self.alert is not None:
                self.alert.cleared_at = None  # the same episode came back: keep updating its alert, silently
                if alert is not None:
                    self._update(step, alert)
                return None
            self.onset = step
            if alert is not None:
                alert.current = {"step": step, "message": alert.message, "evidence": dict(alert.evidence)}
                self.alert = alert
            return alert
        if holds and self.active and alert is not None and self.alert is not None:
            self._update(step, alert)
        if not holds and self.active:
            self.active = False
            self._cleared_at = step
            if self.alert is not None:
                self.alert.cleared_at = step
        return None

    def _update(self, step: int, new: Alert) -> None:
        """The mode persists: record its current value; escalate (never de-escalate) its severity. When the reading
        changes (a collapse that turns out to be the task learned, an entropy drop that is still learning), the
        severity is the new reading's, either way, and the change is recorded and shown like an escalation."""
        a = self.alert
        assert a is not None
        a.current = {"step": step, "message": new.message, "evidence": dict(new.evidence)}
        if new.mode != a.mode:
            a.note({"step": step, "mode": new.mode, "from_mode": a.mode})
            a.mode = new.mode
            if new.severity != a.severity:
                a.note({"step": step, "from": a.severity, "to": new.severity})
                a.severity = new.severity
            a.message, a.evidence = new.message, dict(new.evidence)
            self.escalated_at = step
        if SEVERITY_RANK.get(new.severity, 9) < SEVERITY_RANK.get(a.severity, 9):
            a.note({"step": step, "from": a.severity, "to": new.severity})
            a.severity = new.severity
            self.escalated_at = step
        a.fix, a.actions = new.fix, list(new.actions)


class Windowed(Detector):
    """Keeps the last `window` training steps of one signal (the first available of `keys`)."""

    window = 5
    keys: tuple[str, ...] = ()

    def __init__(self, context: dict[str, Any] | None = None, **params: Any) -> None:
        super().__init__(context, **params)
        self.values = StepWindow(self.window)

    def push(self, step: int, m: dict[str, Any]) -> str | None:
        key, v = first_logged(m, self.keys)
        if key is not None:
            self.values.add(step, v)
        return key

    def full(self) -> bool:
        return self.values.full()

    def mean(self) -> float:
        vals = self.values.values()
        return statistics.fmean(vals) if vals else math.nan

    def vals(self) -> list[float]:
        return self.values.values()


DETECTORS = Registry("detector")


def register(cls: type[Detector]) -> type[Detector]:
    DETECTORS.add(cls.name, cls)
    return cls
