"""The result of reading another trainer's config: grpokit keys, and every foreign key accounted for.

A `Translation` holds the grpokit values (dotted keys), which foreign key produced each, the foreign keys that have
no grpokit equivalent (`unsupported`: the run differs from the foreign one there; `ignored`: bookkeeping with no
effect on what is learned, such as logging or hub settings), and the foreign defaults applied for keys the file
leaves unset (a TRL file without `beta` means TRL's beta 0.0, not grpokit's recipe value). `message()` names all
of them in one message; `to_yaml()` writes the equivalent grpokit config file.

`refused` holds what stops a run (a reward name that resolves to no function): the file is still translated
(`grpokit config from-trl` writes it, with the reason), but training from it is refused. The message is a summary:
a list longer than `SHOWN` keys (a fully resolved verl config has hundreds) shows its count and first keys, and
says where the full list is (`to_yaml()`'s header, written by `grpokit config from-...`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml

SHOWN = 8  # keys of each list the message shows before summarising
VALUE_CHARS = 60  # a value longer than this is cut in the message (to_yaml() keeps it whole)


@dataclass
class Translation:
    """grpokit keys read from a foreign config file, with every foreign key accounted for."""

    source: str  # "TRL GRPOConfig" | "verl"
    path: str
    keys: dict[str, Any] = field(default_factory=dict)  # grpokit dotted key -> value
    mapped: dict[str, list[str]] = field(default_factory=dict)  # foreign key -> the grpokit keys it set
    unsupported: dict[str, Any] = field(default_factory=dict)
    ignored: dict[str, Any] = field(default_factory=dict)
    defaults: dict[str, Any] = field(default_factory=dict)  # foreign defaults used for keys the file leaves unset
    notes: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)  # reasons a run must not start from this translation
    # a refusal -> (the grpokit key that replaces what was refused when a later layer sets it, the foreign key)
    lifted_by: dict[str, tuple[str, str]] = field(default_factory=dict)
    recipe: str | None = None  # the grpokit recipe the foreign algorithm corresponds to, when one does

    def set(self, foreign: str | tuple[str, ...], **grpokit_keys: Any) -> None:
        """Record `grpokit_keys` (written with `__` for the dot: `train__lr=1e-6`) as produced by `foreign`."""
        names = (foreign,) if isinstance(foreign, str) else foreign
        for name in names:  # a foreign key with no grpokit key to set is consumed: it means grpokit's behaviour
            self.mapped.setdefault(name, [])
        for k, v in grpokit_keys.items():
            dotted = k.replace("__", ".")
            self.keys[dotted] = v
            for name in names:
                if dotted not in self.mapped[name]:
                    self.mapped[name].append(dotted)

    def refuse(self, reason: str, foreign: str = "", lifted_by: str = "") -> None:
        """Record why a run must not start from this translation; `lifted_by`: the grpokit key that, set by a later
        layer (`--set reward.functions=[...]` for reward names that resolve to nothing), replaces `foreign`."""
        self.refused.append(reason)
        if lifted_by:
            self.lifted_by[reason] = (lifted_by, foreign)

    def lift(self, later: set[str]) -> None:
        """Drop the refusals that the grpokit keys `later`, set after this translation, replace (a note says so)."""
        for reason in list(self.refused):
            key, foreign = self.lifted_by.get(reason, ("", ""))
            if key in later:
                self.refused.remove(reason)
                self.unsupported.pop(foreign, None)
                self.notes.append(f"{foreign} is replaced by the {key} given after the file")

    def message(self) -> str:
        """One message naming what was mapped, what was not (with values) and which foreign defaults apply."""
        label = self.path if len(self.path) <= 100 else self.path[:97] + "..."  # verl's overrides can be many
        lines = [f"{label} is a {self.source} file: {len(self.mapped)} keys mapped to grpokit keys"]
        if self.recipe:
            lines[0] += f" (closest recipe: {self.recipe})"
        where = f"grpokit config from-{self.source.split()[0].lower()} {label}"
        if self.unsupported:
            differs = "  not supported, the run differs from the original here: "
            lines.append(differs + _summary(self.unsupported, where))
        if self.ignored:
            lines.append("  ignored (no effect on what is learned): " + _summary(self.ignored, where))
        if self.defaults:
            lines.append(f"  {self.source} defaults used for keys the file does not set: " + _items(self.defaults))
        lines += [f"  note: {n}" for n in self.notes]
        lines += [f"  refused: {r}" for r in self.refused]
        lines.append(f"  see the mapping: {where}")
        return "\n".join(lines)

    def to_mapping(self) -> dict[str, Any]:
        """The grpokit keys as config-file sections."""
        out: dict[str, Any] = {}
        for dotted, v in self.keys.items():
            section, key = dotted.split(".", 1)
            out.setdefault(section, {})[key] = v
        return out

    def to_yaml(self) -> str:
        """The equivalent grpokit config file, commented with the foreign key behind each value."""
        origin: dict[str, list[str]] = {}
        for foreign, targets in self.mapped.items():
            for t in targets:
                origin.setdefault(t, []).append(foreign)
        head = [f"# grpokit config written from the {self.source} file {self.path}"]
        if self.recipe:
            head.append(f"# closest recipe: {self.recipe} (grpokit train --recipe {self.recipe} --config THIS_FILE)")
        for title, items in (("not supported", self.unsupported), ("ignored", self.ignored)):
            if items:
                head.append(f"# {title}: {_items(items)}")
        if self.defaults:
            head.append(f"# {self.source} defaults used for keys the file does not set: {_items(self.defaults)}")
        head += [f"# note: {n}" for n in self.notes]
        head += [f"# refused: {r}" for r in self.refused]
        body = []
        for section, values in self.to_mapping().items():
            body.append(f"{section}:")
            for k, v in values.items():
                dumped = yaml.safe_dump(v, default_flow_style=True, width=10_000).strip()
                dumped = dumped.removesuffix("\n...").removesuffix("...").strip()
                src = ", ".join(origin.get(f"{section}.{k}", []))
                body.append(f"  {k}: {dumped}" + (f"  # {src}" if src else ""))
        return "\n".join(head + body) + "\n"


def _items(d: dict[str, Any], cut: int | None = None) -> str:
    shown = (f"{k}={v!r}" if isinstance(v, str) else f"{k}={v}" for k, v in d.items())
    return ", ".join(s if cut is None or len(s) <= cut else s[: cut - 3] + "..." for s in shown)


def _summary(d: dict[str, Any], where: str) -> str:
    """All of `d` when short, else its count, its first `SHOWN` keys and where the full list is written."""
    if len(d) <= SHOWN:
        return _items(d, VALUE_CHARS)
    first = dict(list(d.items())[:SHOWN])
    return f"{len(d)} keys: {_items(first, VALUE_CHARS)}, ... (all {len(d)} in the header `{where}` writes)"
