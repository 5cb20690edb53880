"""Finding runs: the registry of readers in detection order, the recursive search of a path, and reading every
run found into canonical rows."""

from __future__ import annotations

from pathlib import Path

from ...common.registry import Registry
from .canonical import RunLog, Segment, canonicalise
from .console import ConsoleReader, console_kind, read_text_file
from .console_areal import ArealReader
from .console_nemo import NemoRLReader
from .console_prime import PrimeRLReader
from .console_roll import RollReader
from .console_skyrl import SkyRLReader
from .console_slime import SlimeReader
from .grpokit_run import GrpokitReader
from .jsonl import VerlJsonlReader
from .mlflow_store import MlflowReader
from .tensorboard_events import TensorBoardReader
from .trackio_db import TrackioReader
from .trl_state import TrlReader
from .wandb_export import WandbReader
from .wandb_run import WandbRunReader

#: The readers, in detection order (a grpokit run directory also holds TensorBoard events; a TRL output
#: directory too: the richer, native log wins). The consoles of SkyRL, NeMo-RL, prime-rl, slime, ROLL and AReaL are each
#: recognised by their own lines before the generic console reader is asked.
READERS = Registry.of(
    "log format",
    {
        r.name: r
        for r in (
            GrpokitReader(),
            TrlReader(),
            VerlJsonlReader(),
            WandbReader(),
            WandbRunReader(),
            MlflowReader(),
            TrackioReader(),
            SkyRLReader(),
            NemoRLReader(),
            PrimeRLReader(),
            SlimeReader(),
            RollReader(),
            ArealReader(),
            ConsoleReader(),
            TensorBoardReader(),
        )
    },
)

# the short list an error line names (docs/doctor.md's format table says which files and lines each is read from)
SUPPORTED = (
    "grpokit run directories, TRL output directories and trainer_state.json, console logs of TRL, verl, OpenRLHF, "
    "SkyRL, NeMo-RL, prime-rl, slime, ROLL and AReaL, verl JSONL, W&B run directories and history exports, "
    "MLflow stores (mlruns/, mlflow.db), trackio databases, TensorBoard events (docs/doctor.md lists each format)"
)

_MAX_DEPTH = 8
_MAX_ENTRIES = 20000

COMPARE_PAGE = "compare.html"  # marks a folder `grpokit compare` wrote (grpokit.monitor.compare)


def _native_run_dir(p: Path) -> tuple[str, list[Path]] | None:
    """A directory that is one run in a native format (grpokit run, TRL output dir, prime-rl output dir): its
    sub-folders (tb/, checkpoints, logs/) belong to it and are not searched."""
    for name in ("grpokit", "trl", "prime-rl", "wandb-run", "mlflow"):
        found = READERS[name].runs(p)
        if found:
            return name, found[0][1]
    return None


def _file_run(p: Path) -> tuple[str, list[Path]] | None:
    for name, reader in READERS.items():
        if name == "tensorboard":
            continue
        found = reader.runs(p)
        if found:
            return name, found[0][1]
    return None


def _alias(e: Path, d: Path) -> bool:
    """A symbolic link to something inside the folder being searched (W&B's `wandb/latest-run` and `debug.log`):
    what it points to is found there, so it is not read twice."""
    if not e.is_symlink():
        return False
    try:
        return e.resolve().is_relative_to(d.resolve())
    except OSError:
        return False


def discover(path: str | Path) -> list[tuple[str, str, list[Path]]]:
    """Every run under a path as (name, reader, files); names are paths relative to `path` ('' for `path` itself).
    A native run directory (grpokit, TRL) is one run; otherwise each log file is a run and each directory of
    TensorBoard event files is a run, searched recursively; a folder reached twice (a symbolic link back up the tree)
    is searched once."""
    root = Path(path).expanduser()
    if not root.exists():
        raise ValueError(f"{root}: no such file or directory")
    if root.is_file():
        if root.name.startswith("events.out.tfevents."):
            return [("", "tensorboard", [root])]
        found = _file_run(root)
        return [("", found[0], found[1])] if found else []
    out: list[tuple[str, str, list[Path]]] = []
    seen = 0
    visited: set[tuple[int, int]] = set()  # (device, inode) of each folder searched: a link loop is searched once

    def rel(p: Path) -> str:
        r = str(p.relative_to(root))
        return "" if r == "." else r

    def walk(d: Path, depth: int) -> None:
        nonlocal seen
        try:
            st = d.stat()
        except OSError:
            return
        if (st.st_dev, st.st_ino) in visited:
            return  # reached again through a symbolic link (a loop, or a second way in): its runs are found once
        visited.add((st.st_dev, st.st_ino))
        if depth > 0 and (d / COMPARE_PAGE).is_file():
            return  # a `grpokit compare` output: its tb/ holds copies of runs, not runs
        native = _native_run_dir(d)
        if native:
            out.append((rel(d), native[0], native[1]))
            return
        try:
            entries = sorted(d.iterdir(), key=lambda p: p.name)
        except OSError:
            return
        seen += len(entries)
        events = [e for e in entries if e.is_file() and e.name.startswith("events.out.tfevents.")]
        if events:
            out.append((rel(d), "tensorboard", events))
        for e in entries:
            if e.name.startswith(".") or _alias(e, d):
                continue
            if e.is_file() and not e.name.startswith("events.out.tfevents."):
                found = _file_run(e)
                if found:
                    out.append((rel(e), found[0], found[1]))
            elif e.is_dir() and depth < _MAX_DEPTH and seen < _MAX_ENTRIES:
                walk(e, depth + 1)

    walk(root, 0)
    return out


def detect(path: str | Path) -> tuple[str, list[Path]]:
    """(source name, files to read) of the first run under a path; ValueError if none is recognised."""
    runs = discover(path)
    if not runs:
        raise ValueError(f"{Path(path).expanduser()}: not a supported training log. Supported logs: {SUPPORTED}")
    _, source, files = runs[0]
    return ("verl" if source == "console" and console_kind(read_text_file(files[0])) == "verl" else source), files


def _source_name(reader: str, seg: Segment) -> str:
    if reader == "console":
        return {"verl": "verl", "openrlhf": "openrlhf-console"}.get(seg.flavor or "", "trl-console")
    return reader


def read_runs(path: str | Path, run: str | None = None) -> list[RunLog]:
    """Every run under a path, each read into canonical rows (see the module docstring); `run` keeps the runs whose
    name equals it (or, if none does, contains it). ValueError when nothing is found."""
    p = Path(path).expanduser()
    found = discover(p)
    if not found:
        raise ValueError(f"{p}: not a supported training log. Supported logs: {SUPPORTED}")
    logs: list[RunLog] = []
    for name, reader, files in found:
        for seg in READERS[reader].read(files):
            rows, available, raw_names = canonicalise(seg.raw, seg.mapper)
            full = (name + seg.name) if name or seg.name else ""
            logs.append(
                RunLog(
                    source=_source_name(reader, seg),
                    rows=rows,
                    available=available,
                    raw_names=raw_names,
                    path=p / name if name else p,
                    flavor=seg.flavor,
                    name=full,
                    context=seg.context,
                    config=seg.config,
                    notes=seg.notes,
                )
            )
    if run is not None:
        exact = [lg for lg in logs if lg.name == run]
        logs = exact or [lg for lg in logs if run in lg.name]
        if not logs:
            names = ", ".join(repr(n) for n in (lg.name for lg in read_runs(p)) if n) or "(one unnamed run)"
            raise ValueError(f"{p}: no run named {run!r}; runs here: {names}")
    return logs


def read_run(path: str | Path, run: str | None = None) -> RunLog:
    """The one run at a path (ValueError naming the runs when the path holds several: pick one with `run`)."""
    logs = read_runs(path, run)
    if len(logs) > 1:
        names = ", ".join(repr(lg.name) for lg in logs)
        raise ValueError(f"{Path(path).expanduser()} holds {len(logs)} runs ({names}): pick one with --run NAME")
    return logs[0]
