"""TensorBoard layout of `grpokit compare`: `OUT/tb/<tag>_<run>/` per run, every numeric metric under its own
name (the same tags in every run, so TensorBoard overlays them), the step being the run's position on the chosen
x axis (generated tokens, samples, steps, or seconds) and the event wall time the run's cumulative seconds, so
TensorBoard's RELATIVE horizontal axis shows time. `tensorboard --logdir OUT/tb` opens it."""

from __future__ import annotations

import re
from pathlib import Path

from ..rundata import X_AXES, RunData, finite, x_positions

START = 1_000_000_000.0  # a fixed event epoch: runs start at the same wall time, RELATIVE = cumulative seconds


def _dir_name(tag: str, name: str) -> str:
    return f"{tag}_" + re.sub(r"[^A-Za-z0-9._-]+", "_", name)[:80]


def write_tensorboard(runs: list[RunData], tags: list[str], axis: str, out: Path) -> Path:
    """Write one event directory per run under `out/tb`; returns that folder."""
    from torch.utils.tensorboard import SummaryWriter

    root = out / "tb"
    root.mkdir(parents=True, exist_ok=True)
    for tag, run in zip(tags, runs):
        x = x_positions(run, axis)
        try:
            secs = x_positions(run, "seconds")
        except ValueError:
            secs = {}
        writer = SummaryWriter(str(root / _dir_name(tag, run.name)))
        writer.add_text("grpokit/compare", f"run {tag}: {run.name} ({run.path}); step = {X_AXES[axis].label}", 0)
        for r in run.rows:
            step = int(r["step"])
            wall = START + secs.get(step, float(step))
            for key, value in r.items():
                v = finite(value)
                if key != "step" and v is not None:
                    writer.add_scalar(key, v, global_step=int(round(x[step])), walltime=wall)
        writer.close()
    return root
