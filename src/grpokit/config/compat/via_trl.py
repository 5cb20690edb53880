"""Configs of trainers built on TRL's `GRPOConfig` (axolotl's `trl:` block, ms-swift's `swift rlhf` flags), read
by TRL's translation (`trl.py`) after their own names are renamed to TRL's, and reported under their own names.

`translate` renames (`renames`: their key -> TRL's), sets aside their keys with no effect on what is learned
(`ignored` patterns), translates the rest as a TRL GRPOConfig, then relabels every key in the report with the name
the user wrote, so the message says `trl.num_generations` (axolotl) or `--model` (ms-swift), not TRL's name.
"""

from __future__ import annotations

import fnmatch
from typing import Any

from . import trl
from .translation import Translation


def translate(
    source: str,
    data: dict[str, Any],
    renames: dict[str, str],
    ignored: tuple[str, ...],
    path: str,
    valid_keys: set[str],
) -> Translation:
    """`data`: the trainer's keys (dotted where nested: `trl.beta`); `renames`: its key -> TRL's key."""
    as_trl: dict[str, Any] = {}
    back: dict[str, str] = {}
    set_aside: dict[str, Any] = {}
    for key, value in data.items():
        name = renames.get(key) or (key.removeprefix("trl.") if key.startswith("trl.") else key)
        if key not in renames and any(fnmatch.fnmatch(key, p) for p in ignored) or value is None:
            set_aside[key] = value
            continue
        as_trl[name] = value
        back[name] = key
    t = trl.translate(as_trl, path, valid_keys)
    t.source = source
    for table in (t.mapped, t.unsupported, t.ignored, t.defaults):
        renamed = {back.get(k, k): v for k, v in table.items()}
        table.clear()
        table.update(renamed)
    t.ignored.update(set_aside)
    return t
