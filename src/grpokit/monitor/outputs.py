"""The folder `grpokit report` / `grpokit compare` write into: they replace or remove only files they wrote.

`--out DIR` may be a folder that holds other things (a user's `holiday.png`). Each command lists what it writes in
a manifest in DIR (`.grpokit-report.json`, `.grpokit-compare.json`). The next run of that command into DIR removes
the files on that list (charts an earlier report drew and this one may not), and only names of the kind the
command writes (`NN_name.png`, `report.html`, `compare.html`, `tb/`), so an edited list reaches nothing else. A
file the command would write that is in DIR but not on the list is never overwritten: the command is refused,
naming it. A report's default folder (`RUN/report`) written by a grpokit from before manifests holds nothing but
such names; it is taken as grpokit's.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

OWNED_NAMES = {
    "report": re.compile(r"\d\d_[\w.-]+\.png|report\.html"),
    "compare": re.compile(r"\d\d_[\w.-]+\.png|compare\.html|tb"),
}


class OutputFolderError(ValueError):
    """The output folder holds a file the command would overwrite and did not write."""


def manifest_path(out_dir: Path, kind: str) -> Path:
    return out_dir / f".grpokit-{kind}.json"


def read_manifest(out_dir: Path, kind: str) -> list[str]:
    """The names the last `kind` run listed in `out_dir` that it could have written; [] without a readable list."""
    try:
        names = json.loads(manifest_path(out_dir, kind).read_text())
    except (OSError, ValueError):
        return []
    if not isinstance(names, list):
        return []
    return [n for n in names if isinstance(n, str) and OWNED_NAMES[kind].fullmatch(n)]


def _legacy_owned(out_dir: Path, kind: str) -> list[str]:
    """A default report folder from before manifests: every entry a name the command writes."""
    entries = [p.name for p in out_dir.iterdir()]
    pattern = OWNED_NAMES[kind]
    return entries if all(pattern.fullmatch(n) and not (out_dir / n).is_dir() for n in entries) else []


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


def prepare_output(out_dir: Path, kind: str, planned: list[str], *, default: bool = False) -> None:
    """Make `out_dir` ready for `kind` to write `planned` (names in it): created if missing; the files the last
    `kind` run listed removed; OutputFolderError when a planned name is taken by something grpokit did not write.
    `default`: `out_dir` is the command's own default folder (see the module docstring). The manifest then lists
    `planned`, so a run killed mid-write leaves only files the next run may replace."""
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise OutputFolderError(f"--out {out_dir}: cannot create it ({e.strerror or e}); pick another folder") from None
    owned = read_manifest(out_dir, kind)
    if not owned and default and not manifest_path(out_dir, kind).exists():
        owned = _legacy_owned(out_dir, kind)
    taken = [n for n in planned if n not in owned and ((out_dir / n).exists() or (out_dir / n).is_symlink())]
    if taken:
        raise OutputFolderError(
            f"--out {out_dir}: {taken[0]} is already there and grpokit {kind} did not write it; it is never "
            "overwritten: pick another --out folder, or move the file"
        )
    for name in owned:
        _remove(out_dir / name)
    write_manifest(out_dir, kind, planned)


def write_manifest(out_dir: Path, kind: str, names: list[str]) -> None:
    """List `names` as what `kind` wrote into `out_dir` (a link in the manifest's place is replaced, not followed)."""
    path = manifest_path(out_dir, kind)
    if path.is_symlink():
        path.unlink()
    path.write_text(json.dumps(sorted(set(names)), indent=1) + "\n")
