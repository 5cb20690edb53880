"""TensorBoard event files: scalars grouped by step, the tag flavour (grpokit, TRL, verl, OpenRLHF) and grpokit's
config from its text summary."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ... import metric_names as mn
from .canonical import FLAVORS, RawRows, Reader, Segment, best_flavor, merge_segments, ordered
from .grpokit_run import grpokit_context, yaml_load
from .names import TRL_NAMES, TRL_TB_PREFIXES, VERL_NAMES

_EVENTS_GLOB = "events.out.tfevents.*"


def _tb_scalars(files: list[Path]) -> tuple[RawRows, dict[str, str]]:
    """Every scalar (classic `simple_value` summaries, and rank-0 tensor summaries) grouped by step, and the text
    summaries (tag -> latest text)."""
    from tensorboard.backend.event_processing import event_accumulator as ea
    from tensorboard.util import tensor_util

    rows: RawRows = {}
    texts: dict[str, str] = {}
    for f in files:  # file names carry the creation time: later files (restarts) win
        acc = ea.EventAccumulator(str(f), size_guidance={ea.SCALARS: 0, ea.TENSORS: 0})
        acc.Reload()
        tags = acc.Tags()
        for tag in tags.get(ea.SCALARS, []):
            for ev in sorted(acc.Scalars(tag), key=lambda e: e.wall_time):
                merge_segments(rows, int(ev.step), {tag: float(ev.value)})
        for tag in tags.get(ea.TENSORS, []):
            for ev in sorted(acc.Tensors(tag), key=lambda e: e.wall_time):
                try:
                    arr = tensor_util.make_ndarray(ev.tensor_proto)
                except (ValueError, TypeError):
                    continue
                if arr.dtype.kind in "SO" and arr.size >= 1:
                    v = arr.reshape(-1)[0]
                    texts[tag] = v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)
                elif arr.ndim == 0 and arr.dtype.kind in "fiub":
                    merge_segments(rows, int(ev.step), {tag: float(arr)})
    return rows, texts


#: the TensorBoard text tag grpokit writes the run's config under (YAML inside a code fence)
CONFIG_TEXT_TAG = mn.CONFIG_TEXT_TAG  # written by grpokit.run.trackers.TensorBoardTracker


def _config_from_texts(texts: dict[str, str]) -> dict[str, Any]:
    for tag, text in texts.items():
        if tag.split("/text_summary")[0] == CONFIG_TEXT_TAG:
            body = text.strip()
            if body.startswith("```"):
                body = body.split("\n", 1)[1] if "\n" in body else ""
                body = body.rsplit("```", 1)[0]
            return yaml_load(body)
    return {}


class TensorBoardReader(Reader):
    """Event files: each directory holding `events.out.tfevents.*` files is one run (restarts in the same directory
    are merged by step, later files winning)."""

    name = "tensorboard"

    def runs(self, path: Path) -> list[tuple[str, list[Path]]]:
        if path.is_file():
            return [("", [path])] if path.name.startswith("events.out.tfevents.") else []
        files = sorted(path.glob(_EVENTS_GLOB), key=lambda p: p.name)
        return [("", files)] if files else []

    def read(self, files: list[Path]) -> list[Segment]:
        rows, texts = _tb_scalars(files)
        flavor, _ = best_flavor({k for r in rows.values() for k in r}, FLAVORS)
        if flavor == "trl":
            rows = ordered(rows, [pre + n for pre, _ in TRL_TB_PREFIXES for n in TRL_NAMES])
        elif flavor == "verl":
            rows = ordered(rows, list(VERL_NAMES))
        cfg = _config_from_texts(texts)
        notes = []
        if not cfg and flavor == "grpokit":
            # a grpokit run's tb/ folder: the config sits next to it
            parent_cfg = files[0].parent.parent / "config.yaml"
            if parent_cfg.is_file():
                cfg = yaml_load(parent_cfg.read_text(encoding="utf-8", errors="replace"))
                notes.append(f"config read from {parent_cfg}")
        elif cfg:
            notes.append("config read from the events' text summary")
        return [Segment(rows, FLAVORS[flavor][0], flavor, "", grpokit_context(cfg), cfg, notes)]
