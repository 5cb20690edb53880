"""Training health: §17 signals now; detectors, doctor and autopilot build on them."""
