"""The canonical form of a run (`RunLog`), the parsed-but-unmapped `Segment`, name mappers and flavour scoring,
and the `Reader` interface every log format implements."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ... import metric_names as mn
from .names import CANONICAL, OPENRLHF_NAMES, TRL_NAMES, TRL_TB_PREFIXES, VERL_NAMES, VERL_PATTERNS
from .names_more import AREAL_NAMES, ROLL_NAMES, ROLL_PATTERNS
from .values import NAN, number


@dataclass
class RunLog:
    """A training log in canonical form."""

    source: str  # "grpokit" | "trl" | "trl-console" | "verl" | "openrlhf-console" | "tensorboard" | "wandb" | ...
    rows: list[dict[str, float]]  # one per step, sorted by step; each has "step" and every name in `available`
    available: set[str]  # canonical names recorded at least once
    raw_names: set[str]  # the source's own metric names seen
    path: Path
    flavor: str | None = None  # whose metric names the log uses ("grpokit" | "trl" | "verl"), when not implied
    name: str = ""  # which run of `path` this is (a sub-folder, a file, `file#2` for a file's second run)
    context: dict[str, Any] = field(default_factory=dict)  # the run's switches, when the log says (detector context)
    config: dict[str, Any] = field(default_factory=dict)  # grpokit's full config, when the log carries it
    notes: list[str] = field(default_factory=list)  # how the log was read (inferred steps, skipped parts)

    @property
    def steps(self) -> list[int]:
        return [int(r["step"]) for r in self.rows]

    def series(self, name: str) -> tuple[list[int], list[float]]:
        """(steps, values) of one canonical signal, skipping steps where it is NaN."""
        pts = [(int(r["step"]), r[name]) for r in self.rows if name in r and math.isfinite(r[name])]
        return [s for s, _ in pts], [v for _, v in pts]


# ------------------------------------------------------------------------------------------ canonicalising

RawRows = dict[int, dict[str, float]]  # step -> {source name: value}; later writes to a step win


def merge_segments(rows: RawRows, step: int, values: dict[str, float]) -> None:
    rows.setdefault(step, {}).update(values)


Mapper = Callable[[Iterable[str]], dict[str, tuple[str, ...]]]


def table_mapper(table: dict[str, tuple[str, ...]], patterns: list[tuple[re.Pattern[str], str]] = ()) -> Mapper:
    """Source names -> canonical names through an exact table, then patterns (a pattern that matches several
    distinct names in one run is ambiguous and maps none of them)."""

    def mapper(names: Iterable[str]) -> dict[str, tuple[str, ...]]:
        names = set(names)
        out = {n: table[n] for n in names if n in table}
        for pat, canon in patterns:
            hits = [n for n in names if n not in out and pat.match(n)]
            if len(hits) == 1:
                out[hits[0]] = (canon,)
        return out

    return mapper


def identity_mapper(names: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """grpokit's own names are canonical: everything passes through."""
    return {n: (n,) for n in names}


def _prefixed_mapper(inner: Mapper, prefixes: tuple[tuple[str, str], ...]) -> Mapper:
    """TensorBoard tags `train/x` / `eval/x` written by transformers for log keys `x` / `eval_x`."""

    def mapper(names: Iterable[str]) -> dict[str, tuple[str, ...]]:
        key_of = {}
        for n in names:
            for pre, repl in prefixes:
                if n.startswith(pre):
                    key_of[n] = repl + n[len(pre) :]
                    break
        inner_map = inner(key_of.values())
        return {n: inner_map[k] for n, k in key_of.items() if k in inner_map}

    return mapper


TRL_MAPPER = table_mapper(TRL_NAMES)
TRL_TB_MAPPER = _prefixed_mapper(TRL_MAPPER, TRL_TB_PREFIXES)
VERL_MAPPER = table_mapper(VERL_NAMES, VERL_PATTERNS)
OPENRLHF_CONSOLE_MAPPER = table_mapper(OPENRLHF_NAMES)
OPENRLHF_MAPPER = _prefixed_mapper(OPENRLHF_CONSOLE_MAPPER, (("train/", ""), ("eval/", "eval_")))
_ROLL_MAPPER = table_mapper(ROLL_NAMES, ROLL_PATTERNS)
_AREAL_MAPPER = table_mapper(AREAL_NAMES)


def _grpokit_score(names: Iterable[str]) -> int:
    return sum(1 for n in names if n in CANONICAL)


#: How each flavour maps names, and how strongly a set of names looks like that flavour (for sniffing JSONL and
#: TensorBoard tags, where several flavours share a container format).
FLAVORS: dict[str, tuple[Mapper, Callable[[Iterable[str]], int]]] = {
    "grpokit": (identity_mapper, _grpokit_score),
    "trl": (TRL_TB_MAPPER, lambda ns: len(TRL_TB_MAPPER(ns))),
    "verl": (VERL_MAPPER, lambda ns: len(VERL_MAPPER(ns))),
    "openrlhf": (OPENRLHF_MAPPER, lambda ns: len(OPENRLHF_MAPPER(ns))),
    # ROLL's and AReaL's W&B / TensorBoard keys are the names of their consoles (`names_more`)
    "roll": (_ROLL_MAPPER, lambda ns: len(_ROLL_MAPPER(ns))),
    "areal": (_AREAL_MAPPER, lambda ns: len(_AREAL_MAPPER(ns))),
}


def best_flavor(names: Iterable[str], candidates: Iterable[str]) -> tuple[str, int]:
    names = list(names)
    scored = [(FLAVORS[f][1](names), i, f) for i, f in enumerate(candidates)]
    score, _, flavor = max(scored, key=lambda t: (t[0], -t[1]))  # ties go to the earlier candidate
    return flavor, score


def canonicalise(raw: RawRows, mapper: Mapper) -> tuple[list[dict[str, float]], set[str], set[str]]:
    raw_names = {k for r in raw.values() for k in r}
    name_map = mapper(raw_names)
    available = {c for cs in name_map.values() for c in cs}
    rows = []
    for step in sorted(raw):
        row: dict[str, float] = {"step": step}
        for name, value in raw[step].items():
            for canon in name_map.get(name, ()):
                # the first source name seen for a canonical name wins, unless it is NaN and a later one is not
                if canon not in row or (math.isnan(row[canon]) and not math.isnan(value)):
                    row[canon] = value
        for canon in available:
            row.setdefault(canon, NAN)
        if mapper is not identity_mapper:
            _flag_nonfinite(row, raw[step], name_map, available)
        rows.append(row)
    # where a log sets a flag, its other rows hold 0 where their signal was finite (NaN where it was not logged)
    for signal, flag in NONFINITE_FLAGS.items():
        if flag in available:
            for row in rows:
                if math.isnan(row.get(flag, NAN)):
                    row[flag] = 0.0 if math.isfinite(row.get(signal, NAN)) else NAN
    return rows, available, raw_names


#: canonical signal -> the flag set when a foreign log records it as NaN / inf
NONFINITE_FLAGS = {mn.ACTOR_LOSS: mn.TRAIN_NONFINITE_LOSS, mn.TRAIN_GRAD_NORM: mn.TRAIN_NONFINITE_GRAD}


def _flag_nonfinite(
    row: dict[str, float], raw: dict[str, float], name_map: dict[str, tuple[str, ...]], available: set[str]
) -> None:
    """A loss or gradient norm the log itself records as NaN/inf (a value present in the raw row) sets grpokit's
    non-finite flag for that row, so the numerical detector sees what the trainer printed."""
    for name, value in raw.items():
        for canon in name_map.get(name, ()):
            flag = NONFINITE_FLAGS.get(canon)
            if flag is not None and not math.isfinite(value):
                row[flag] = 1.0
                available.add(flag)


def ordered(raw: RawRows, order: list[str]) -> RawRows:
    """Reorder each row's keys by mapping-table priority so that `canonicalise`'s first-wins is table order."""
    rank = {n: i for i, n in enumerate(order)}
    return {s: dict(sorted(r.items(), key=lambda kv: rank.get(kv[0], len(rank)))) for s, r in raw.items()}


def table_or_prefixed(plain: Mapper, prefixed: Mapper) -> Mapper:
    """TRL names logged bare (`reward`) or with transformers' `train/` / `eval/` prefixes."""

    def mapper(names: Iterable[str]) -> dict[str, tuple[str, ...]]:
        names = list(names)
        return {**plain(names), **prefixed(names)}

    return mapper


#: A parsed run before canonicalisation: raw rows, the name mapper, the flavour, a sub-name, context and notes.
@dataclass
class Segment:
    raw: RawRows
    mapper: Mapper
    flavor: str | None = None
    name: str = ""
    context: dict[str, Any] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


class Reader:
    """One log format. `runs(path)` returns the runs it finds *at* a path (a file, or a directory that is one run
    in this format), as (name, files) pairs, or [] if the path is not in this format; `read(files)` returns the
    run's segments (a console log may hold several runs one after another)."""

    name = ""

    def runs(self, path: Path) -> list[tuple[str, list[Path]]]:
        raise NotImplementedError

    def read(self, files: list[Path]) -> list[Segment]:
        raise NotImplementedError


#: The plain name mapper of each trainer's own logged keys (no TensorBoard prefixes), for live rows.
LIVE_MAPPERS: dict[str, Mapper] = {"trl": TRL_MAPPER, "verl": VERL_MAPPER, "openrlhf": OPENRLHF_CONSOLE_MAPPER}


def canonical_row(flavor: str, step: int, values: dict[str, Any]) -> dict[str, float]:
    """One logged row of a trainer (`flavor`: trl | verl | openrlhf | grpokit), numbers only, in canonical names
    (`{"step": step, ...}`); what the mapping does not know is left out."""
    numbers = {str(k): number(v) for k, v in values.items() if isinstance(v, (int, float))}
    rows, _, _ = canonicalise({step: numbers}, LIVE_MAPPERS.get(flavor, identity_mapper))
    return rows[0]
