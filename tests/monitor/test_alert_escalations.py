"""An alert's record of severity and reading changes is bounded: a reading that flips on every row of a long run
keeps the last ESCALATIONS_KEPT changes and counts the rest, instead of growing with the run."""

from __future__ import annotations

from grpokit.monitor.detectors.base import ESCALATIONS_KEPT, Alert, Detector


class Flipping(Detector):
    """A mode whose reading alternates between two names on every row, its severity rising once."""

    name, mode = "flipping", "flip a"

    def check(self, step: int, metrics: dict) -> tuple[bool, Alert | None]:
        mode = "flip a" if step % 2 else "flip b"
        severity = "warning" if step < 10 else "critical"
        return True, Alert(mode, self.name, step, step, severity, f"row {step}", {"v": step}, "fix it")


def test_a_reading_that_flips_every_row_keeps_a_bounded_record() -> None:
    det = Flipping()
    for step in range(1, 10_001):
        det.observe(step, {"x": 1.0})
    alert = det.alert
    assert alert is not None and len(alert.escalations) == ESCALATIONS_KEPT
    assert alert.escalations_dropped == 9_999 + 1 - ESCALATIONS_KEPT  # 9,999 reading changes and 1 severity rise
    assert alert.escalations[-1]["step"] == 10_000 and alert.severity == "critical"
    assert alert.to_dict()["escalations_dropped"] == alert.escalations_dropped
