"""The run directory's writer: config.yaml, run.json, metrics.jsonl, completions.jsonl, alerts.jsonl, and every row and
alert passed on to the trackers of `train.report_to` (`grpokit.run.trackers`, TensorBoard among them).

`run.json` records what the run actually used and how long it took: the device, the resolved precision, library
versions, and one `segments` entry per training session (`start`/`end` wall-clock times, `seconds` measured on a
monotonic clock, first and last step; a resumed run adds a segment); `wall_s` is the sum of the segments' seconds.

The config travels with every log: `config.yaml` next to `metrics.jsonl`, and inside the TensorBoard events as a
text summary (`grpokit/config`, YAML; `grpokit doctor` reads it back from a bare `tb/` folder) and as hparams
(flattened `section.key` values, in the same event file: TensorBoard's HPARAMS tab shows them)."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

import yaml

from ..common import faults
from .trackers import Trackers

# the JSONL logs of a run: a checkpoint records their sizes, a restore cuts them back (grpokit.training.checkpointing)
LOG_FILES = ("metrics.jsonl", "completions.jsonl", "alerts.jsonl", "interventions.jsonl")


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def _step(row: dict[str, Any]) -> int:
    step = row.get("step", 0)
    return step if isinstance(step, int) else 0


def _rows(data: bytes) -> list[tuple[bytes, dict[str, Any]]]:
    """Each line of `data` that is a JSON object, with it; a torn line (a kill mid-write) or any other is left out."""
    out = []
    for raw in data.split(b"\n"):
        try:
            row = json.loads(raw) if raw.strip() else None
        except (ValueError, RecursionError):  # not JSON, or bytes that are not UTF-8
            continue
        if isinstance(row, dict):
            out.append((raw.strip(), row))
    return out


def _clean(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


class RunWriter:
    """Appends one JSON line per step; mirrors numeric metrics to TensorBoard when available."""

    def __init__(self, run_dir: Path, tensorboard: bool = True, report_to: list[str] | None = None) -> None:
        """`report_to` (train.report_to) names the trackers of `grpokit.run.trackers`, TensorBoard among them;
        None: TensorBoard as `tensorboard` says and no other tracker."""
        names = list(report_to) if report_to is not None else (["tensorboard"] if tensorboard else [])
        self.trackers = Trackers(names, run_dir)  # a missing library stops here, before training
        self.dir = run_dir
        self.dir.mkdir(parents=True, exist_ok=True)
        self.metrics_path = run_dir / "metrics.jsonl"
        self.samples_path = run_dir / "completions.jsonl"
        self.alerts_path = run_dir / "alerts.jsonl"
        self.info_path = run_dir / "run.json"
        self._segment_t0: float | None = None

    def write_config(self, cfg: dict[str, Any], step: int = 0) -> None:
        (self.dir / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
        self.trackers.config(cfg)

    def read_info(self) -> dict[str, Any]:
        return json.loads(self.info_path.read_text()) if self.info_path.exists() else {}

    def _write_info(self, info: dict[str, Any]) -> None:
        tmp = self.info_path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(info, indent=1))
        tmp.replace(self.info_path)

    def start_segment(self, step: int, info: dict[str, Any]) -> None:
        """Record `info` (device, precision, ...) in run.json and open a training segment starting at `step`."""
        merged = {**self.read_info(), **info}
        merged.setdefault("segments", []).append({"start": time.time(), "end": None, "first_step": step})
        self._write_info(merged)
        self._segment_t0 = time.monotonic()

    def end_segment(self, step: int) -> None:
        """Close the open segment at `step` and update the run's total wall time `wall_s`."""
        if self._segment_t0 is None:
            return
        info = self.read_info()
        segments = info.get("segments") or []
        if segments:
            segments[-1].update(end=time.time(), seconds=time.monotonic() - self._segment_t0, last_step=step)
        info["wall_s"] = sum(s.get("seconds") or 0.0 for s in segments)
        self._write_info(info)
        self._segment_t0 = None

    def log(self, step: int, metrics: dict[str, Any]) -> None:
        faults.point("log")
        row = {"step": step, **{k: _clean(v) for k, v in metrics.items()}}
        with self.metrics_path.open("a") as f:
            f.write(json.dumps(row) + "\n")
        self.trackers.log(step, metrics)

    def samples(self, step: int, rows: list[dict[str, Any]]) -> None:
        faults.point("samples")
        with self.samples_path.open("a") as f:
            for r in rows:
                f.write(json.dumps({"step": step, **r}) + "\n")

    def alert(self, row: dict[str, Any]) -> None:
        """alerts.jsonl, and the alert in every tracker (as text under `alerts/<detector>` in TensorBoard)."""
        with self.alerts_path.open("a") as f:
            f.write(json.dumps(row) + "\n")
        self.trackers.alert(row)

    def sizes(self) -> dict[str, int]:
        """The size in bytes of each of the run's JSONL logs (0 for one not written yet), recorded in checkpoints."""
        return {name: _size(self.dir / name) for name in LOG_FILES}

    def cut_to_size(self, path: Path, sizes: Any) -> bool:
        """Cut `path` back to its size in `sizes` (a checkpoint's `log_sizes`); False, leaving it alone, when that
        is not known or does not fall at the end of a line of the file as it is now."""
        size = sizes.get(path.name) if isinstance(sizes, dict) else None
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            return False
        if size == 0:
            if path.exists():
                path.write_bytes(b"")
            return True
        if _size(path) < size:
            return False
        with path.open("r+b") as f:
            f.seek(size - 1)
            if f.read(1) != b"\n":
                return False
            f.truncate(size)
        return True

    def truncate_after(self, step: int, sizes: Any = None, *, keep_own_step: bool = False) -> None:
        """On resume: cut the logs back to their sizes at the checkpoint (`sizes`), else drop the metric/sample
        rows logged after the checkpoint's step (they will be redone). `keep_own_step` (the resumed run trains past
        `step`): metrics rows of `step` itself logged after the checkpoint (a finished run's final evaluation, which
        no later step writes again) are kept, each a whole line. A line that is not JSON (torn) is never kept."""
        for path in (self.metrics_path, self.samples_path, self.alerts_path):
            if not path.exists():
                continue
            own = self._rows_after(path, sizes, step) if keep_own_step and path == self.metrics_path else []
            if self.cut_to_size(path, sizes):
                if own:
                    with path.open("ab") as f:
                        f.write(b"".join(raw + b"\n" for raw in own))
                continue
            keep = [raw for raw, row in _rows(path.read_bytes()) if _step(row) <= step]
            path.write_bytes(b"".join(raw + b"\n" for raw in keep))

    @staticmethod
    def _rows_after(path: Path, sizes: Any, step: int) -> list[bytes]:
        """The lines of `path` past its size in `sizes` that are rows of `step`."""
        size = sizes.get(path.name) if isinstance(sizes, dict) else None
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            return []
        with path.open("rb") as f:
            f.seek(size)
            tail = f.read()
        return [raw for raw, row in _rows(tail) if type(row.get("step")) is int and row["step"] == step]

    def close(self) -> None:
        self.trackers.close()
