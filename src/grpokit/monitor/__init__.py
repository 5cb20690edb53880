"""Training health: §17 signals now; detectors, doctor and autopilot build on them."""

# the divergence detector registers itself in the detectors' registry (after the detectors package's own)
from . import divergence as divergence  # noqa: E402,F401
