"""`Monitor`: every registered detector on each step, the alerts collected; `rank` orders alerts."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .base import DETECTORS, SEVERITY_RANK, Alert, Detector


class Monitor:
    """Runs every registered detector on each step; collects alerts."""

    def __init__(
        self,
        context: dict[str, Any] | None = None,
        thresholds: dict[str, dict[str, Any]] | None = None,
        factories: dict[str, Callable[..., Detector]] | None = None,
    ) -> None:
        thresholds = thresholds or {}
        self.detectors = [cls(context, **thresholds.get(name, {})) for name, cls in (factories or DETECTORS).items()]
        self.alerts: list[Alert] = []
        self.escalated: list[Alert] = []  # alerts whose severity rose at the last observed step (for live display)

    def observe(self, step: int, metrics: dict[str, Any]) -> list[Alert]:
        """New alerts of this step (modes that just started). Alerts already raised are updated in place with the
        mode's current value; those that escalated at this step are in `self.escalated`."""
        new = [a for d in self.detectors if (a := d.observe(step, metrics)) is not None]
        self.alerts.extend(new)
        self.escalated = [
            d.alert for d in self.detectors if d.alert is not None and getattr(d, "escalated_at", None) == step
        ]
        return new

    def active(self) -> list[str]:
        """The modes active now, as their alerts read them now (a collapse read as the task learned is
        "convergence")."""
        return [d.alert.mode if d.alert is not None else d.mode for d in self.detectors if d.active]

    def active_alerts(self) -> list[Alert]:
        """The alerts of the modes active now."""
        return [d.alert for d in self.detectors if d.active and d.alert is not None]

    def not_measurable(self, available: set[str]) -> dict[str, list[str]]:
        return {d.name: miss for d in self.detectors if (miss := d.missing(available))}


def rank(alerts: list[Alert]) -> list[Alert]:
    """Most severe first, then earliest onset."""
    return sorted(alerts, key=lambda a: (SEVERITY_RANK.get(a.severity, 9), a.step))
