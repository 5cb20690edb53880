"""W&B run directories: the `run-<id>.wandb` transaction log every run writes (online or offline), read with
wandb's own protobuf classes.

Format: the file starts with a 7-byte header (`:W&B`, the magic 0xBEE1 little-endian, version 0), then holds
wandb's `Record` messages (`wandb.proto.wandb_internal_pb2.Record`) in LevelDB-log framing: 32 KiB blocks, each
chunk a 7-byte header (CRC-32 of the type byte and the data, IEEE polynomial as `zlib.crc32`, unmasked; length,
2 bytes little-endian; type FULL=1, FIRST=2, MIDDLE=3, LAST=4) and its data; a block tail shorter than a header is
zero padding. wandb's Python writer (`wandb/sdk/internal/datastore.py`, wandb < 0.20) and wandb-core's Go writer
(`core/pkg/leveldb`, with `CRCAlgoIEEE`) write the same framing; the framing is the one part read by hand here.

Read: `history` records (every `wandb.log` call: items `key` or `nested_key` with `value_json`; `_step` is W&B's
step, TRL's `train/global_step` wins), the `run` record (display name, id, project, the config given to
`wandb.init`) and `config` records (later `wandb.config.update` calls). wandb >= 0.19 (the `trackers` extra's
bound): its `wandb_internal_pb2` has every field read here (`HistoryItem.nested_key` since 0.12).
"""

from __future__ import annotations

import json
import struct
import zlib
from pathlib import Path
from typing import Any

from .canonical import RawRows, Reader, Segment
from .tracker_common import add_row, missing_client, numbers, store_segment

_MAGIC = b":W&B" + struct.pack("<HB", 0xBEE1, 0)
_BLOCK = 32768
_CHUNK_HEADER = 7
_FULL, _FIRST, _MIDDLE, _LAST = 1, 2, 3, 4
_MAX_RECORD = 1 << 28  # a record split over chunks longer than this is corruption, not a log call


def wandb_file_records(path: Path) -> tuple[list[bytes], str | None]:
    """The records of a `.wandb` file, and a note when it ends early (a truncated or corrupt chunk: the records
    before it are kept). Every chunk advances at least 7 bytes, so the loop ends on any input."""
    out: list[bytes] = []
    pending: bytearray | None = None
    with path.open("rb") as f:
        block, base = f.read(_BLOCK), 0
        if block[:4] != _MAGIC[:4]:
            return out, f"{path.name}: not a W&B transaction log (no ':W&B' header)"
        off = len(_MAGIC)
        while block:
            if len(block) - off < _CHUNK_HEADER:  # a block's zero padding, or the end of the file
                if len(block) < _BLOCK and block[off:].strip(b"\0"):
                    return out, f"{path.name}: ends inside a chunk header (truncated): {len(out)} records read"
                block, base, off = f.read(_BLOCK), base + len(block), 0
                continue
            crc, length, kind = struct.unpack_from("<IHB", block, off)
            if kind == 0 and length == 0 and not crc:  # zeros: padding, or space not yet written
                off = len(block)
                continue
            data = block[off + _CHUNK_HEADER : off + _CHUNK_HEADER + length]
            if len(data) < length:
                why = "truncated" if len(block) < _BLOCK else "a chunk longer than its block: corrupt"
                return out, f"{path.name}: ends inside a record ({why}): {len(out)} records read"
            if zlib.crc32(data, zlib.crc32(bytes([kind]))) != crc:
                return out, f"{path.name}: checksum mismatch at byte {base + off} (corrupt): {len(out)} records read"
            at, off = base + off, off + _CHUNK_HEADER + length
            if kind == _FULL:
                out.append(data)
            elif kind == _FIRST:
                pending = bytearray(data)
            elif kind in (_MIDDLE, _LAST) and pending is not None and len(pending) + length <= _MAX_RECORD:
                pending += data
                if kind == _LAST:
                    out.append(bytes(pending))
                    pending = None
            else:
                return out, f"{path.name}: unexpected chunk (type {kind}) at byte {at}: {len(out)} records read"
    if pending is not None:
        return out, f"{path.name}: ends inside a record split over blocks (truncated): {len(out)} records read"
    return out, None


def _key(item: Any) -> str:
    return item.key or ".".join(item.nested_key)  # a nested dict logged as {"a": {"b": x}} is W&B's `a.b`


def _set(cfg: dict[str, Any], item: Any, value: Any) -> None:
    path = list(item.nested_key) or [item.key]
    node = cfg
    for part in path[:-1]:
        node = node.setdefault(part, {}) if isinstance(node.get(part, {}), dict) else {}
    node[path[-1]] = value


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


def read_wandb_file(path: Path) -> tuple[RawRows, dict[str, Any], dict[str, str], list[str]]:
    """(raw rows by step, the run's config, the run's display name / id / project, notes) of a `.wandb` file."""
    try:
        from wandb.proto import wandb_internal_pb2 as pb
    except ImportError:
        raise missing_client(f"{path} (a W&B run)", "wandb", "wandb>=0.19") from None
    from google.protobuf.message import DecodeError

    records, note = wandb_file_records(path)
    notes = [note] if note else []
    rows: RawRows = {}
    cfg: dict[str, Any] = {}
    info: dict[str, str] = {}
    exited = False
    for i, data in enumerate(records):
        rec = pb.Record()
        try:
            rec.ParseFromString(data)
        except DecodeError:
            notes.append(f"{path.name}: record {i + 1} is not a W&B Record (corrupt): {i} records read")
            break
        kind = rec.WhichOneof("record_type")
        if kind == "history":
            values = {_key(it): _json(it.value_json) for it in rec.history.item}
            step = values.get("_step")
            if not isinstance(step, int) and rec.history.HasField("step"):
                step = rec.history.step.num
            add_row(
                rows,
                step if isinstance(step, int) else None,
                numbers((k, v) for k, v in values.items() if not k.startswith("_")),
            )
        elif kind == "run":
            run = rec.run
            info.update(
                {k: v for k, v in (("name", run.display_name), ("id", run.run_id), ("project", run.project)) if v}
            )
            for it in run.config.update:
                _set(cfg, it, _json(it.value_json))
        elif kind == "exit":
            exited = True
        elif kind == "config":
            for it in rec.config.update:
                _set(cfg, it, _json(it.value_json))
            for it in rec.config.remove:
                cfg.pop(_key(it), None)
    if not exited and not notes:
        notes.append(f"{path.name}: no exit record yet: the run is still running, or its process was killed")
    cfg = {k: v for k, v in cfg.items() if not k.startswith("_wandb")}
    return rows, cfg, info, notes


class WandbRunReader(Reader):
    """A W&B run directory (`wandb/run-*` or `wandb/offline-run-*`, or `latest-run`) or its `run-<id>.wandb`: one
    run, its history, config and name read from the transaction log."""

    name = "wandb-run"

    def runs(self, path: Path) -> list[tuple[str, list[Path]]]:
        if path.is_file():
            return [("", [path])] if path.suffix == ".wandb" and _has_magic(path) else []
        if not path.is_dir():
            return []
        files = sorted(p for p in path.glob("run-*.wandb") if _has_magic(p))
        return [("", files[-1:])] if files else []

    def read(self, files: list[Path]) -> list[Segment]:
        rows, cfg, info, notes = read_wandb_file(files[0])
        if info:
            notes.insert(0, "W&B run " + ", ".join(f"{k} {v}" for k, v in info.items()))
        return [store_segment(rows, cfg, "", notes, "the W&B run's config")]


def _has_magic(path: Path) -> bool:
    try:
        with path.open("rb") as f:
            return f.read(4) == _MAGIC[:4]
    except OSError:
        return False
