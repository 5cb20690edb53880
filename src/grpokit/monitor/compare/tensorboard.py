"""TensorBoard layout of `grpokit compare`: `OUT/tb/<tag>_<run>/` per run, every numeric metric under its own
name (the same tags in every run, so TensorBoard overlays them), the step being the run's position on the chosen
x axis (generated tokens, samples, steps, or seconds) and the event wall time the run's cumulative seconds, so
TensorBoard's RELATIVE horizontal axis shows time. `tensorboard --logdir OUT/tb` opens it."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

from ...common.safe_text import safe_text
from ..rundata import X_AXES, RunData, finite, x_positions

START = 1_000_000_000.0  # a fixed event epoch: runs start at the same wall time, RELATIVE = cumulative seconds


def _dir_name(tag: str, name: str) -> str:
    return f"{tag}_" + re.sub(r"[^A-Za-z0-9._-]+", "_", name)[:80]


class EventWriter:
    """One TensorBoard event file written with the `tensorboard` package's own writer and protos (torch's
    SummaryWriter wraps the same ones; going direct keeps `grpokit compare` from importing torch)."""

    def __init__(self, logdir: Path) -> None:
        from tensorboard.summary.writer.event_file_writer import EventFileWriter

        self._writer = EventFileWriter(str(logdir))

    def _add(self, value: Any, step: int, wall: float) -> None:
        from tensorboard.compat.proto.event_pb2 import Event
        from tensorboard.compat.proto.summary_pb2 import Summary

        self._writer.add_event(Event(wall_time=wall, step=step, summary=Summary(value=[value])))

    def scalar(self, tag: str, value: float, step: int, wall: float) -> None:
        from tensorboard.compat.proto.summary_pb2 import Summary

        self._add(Summary.Value(tag=tag, simple_value=float(value)), step, wall)

    def text(self, tag: str, text: str, step: int) -> None:
        """A text summary as TensorBoard's text plugin reads it: a string tensor tagged with the plugin's name."""
        from tensorboard.compat.proto.summary_pb2 import Summary, SummaryMetadata
        from tensorboard.compat.proto.tensor_pb2 import TensorProto
        from tensorboard.compat.proto.tensor_shape_pb2 import TensorShapeProto
        from tensorboard.compat.proto.types_pb2 import DT_STRING

        meta = SummaryMetadata(plugin_data=SummaryMetadata.PluginData(plugin_name="text"))
        shape = TensorShapeProto(dim=[TensorShapeProto.Dim(size=1)])
        tensor = TensorProto(dtype=DT_STRING, string_val=[text.encode()], tensor_shape=shape)
        self._add(Summary.Value(tag=f"{tag}/text_summary", metadata=meta, tensor=tensor), step, time.time())

    def close(self) -> None:
        self._writer.close()


def write_tensorboard(runs: list[RunData], tags: list[str], axis: str, out: Path) -> Path:
    """Write one event directory per run under `out/tb`; returns that folder."""
    root = out / "tb"
    root.mkdir(parents=True, exist_ok=True)
    for tag, run in zip(tags, runs):
        x = x_positions(run, axis)
        try:
            secs = x_positions(run, "seconds")
        except ValueError:
            secs = {}
        writer = EventWriter(root / _dir_name(tag, run.name))
        about = safe_text(f"run {tag}: {run.name} ({run.path}); step = {X_AXES[axis].label}", limit=None)
        writer.text("grpokit/compare", about, 0)  # the run's name and path: not grpokit's text
        for r in run.rows:
            step = int(r["step"])
            wall = START + secs.get(step, float(step))
            for key, value in r.items():
                v = finite(value)
                if key != "step" and v is not None:
                    writer.scalar(safe_text(key, limit=None), v, int(round(x[step])), wall)  # a name from the log
        writer.close()
    return root
