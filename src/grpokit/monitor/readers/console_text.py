"""What the console readers of SkyRL, NeMo-RL, prime-rl and slime share: a cheap sniff of a text file's head, numbers
and `'key': value` pairs out of printed text, exact-table name mapping, and the `TextLogReader` base class."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from ...common.bounded_read import LOG_LIMIT, open_regular
from ...common.bounded_read import read_text as bounded_text
from .canonical import Mapper, RawRows, Reader

SNIFF_BYTES = 4 << 20  # a format is recognised from the first 4 MB of a file
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?:nan|inf)"
# a quoted key and its number inside a printed dict; numpy / torch scalar reprs (`np.float64(0.5)`) unwrapped
_PAIR = re.compile(r"""['"]([^'"\n]{1,200})['"]\s*:\s*(?:(?:np|numpy|torch)\.\w+\(|tensor\()?(""" + NUMBER + r")\b")
_NOT_TEXT = {".json", ".jsonl", ".csv", ".yaml", ".yml", ".parquet", ".safetensors", ".bin", ".pt", ".png", ".gz"}


def text_head(path: Path, size: int = SNIFF_BYTES) -> str | None:
    """The first `size` bytes of a text file, colour codes stripped; None for a directory, a structured or binary
    file (a NUL byte in its first 8 kB), or one that cannot be read."""
    if not path.is_file() or path.suffix.lower() in _NOT_TEXT or path.name.startswith("events.out.tfevents."):
        return None
    try:
        with open_regular(path) as f:  # a FIFO swapped in is not a hang
            data = f.read(size)
    except (OSError, ValueError):
        return None
    if b"\x00" in data[:8192]:
        return None
    return ANSI.sub("", data.decode("utf-8", errors="replace"))


def read_text(path: Path) -> str:
    """A whole text log, colour codes stripped."""
    return ANSI.sub("", bounded_text(path, LOG_LIMIT, errors="replace"))  # a regular file, at most LOG_LIMIT bytes


def number(token: str) -> float | None:
    """A printed number (`0.5`, `1e-3`, `nan`, `inf`, `12.5%` as 0.125); None if the token is not one."""
    s = token.strip().rstrip(",")
    try:
        return float(s[:-1]) / 100 if s.endswith("%") else float(s)
    except ValueError:
        return None


def dict_pairs(text: str) -> dict[str, float]:
    """The numeric `'key': value` pairs of a dict printed in a line (non-numeric values are skipped)."""
    out = {}
    for key, val in _PAIR.findall(text):
        v = number(val)
        if v is not None:
            out[key] = v
    return out


def table_mapper(table: dict[str, tuple[str, ...]]) -> Mapper:
    """Source names -> canonical names through an exact table."""

    def mapper(names: Iterable[str]) -> dict[str, tuple[str, ...]]:
        return {n: table[n] for n in set(names) if n in table}

    return mapper


def in_table_order(rows: RawRows, table: dict[str, tuple[str, ...]]) -> RawRows:
    """Each row's names in the table's order (the canonicaliser keeps the first source name of a canonical name)."""
    rank = {n: i for i, n in enumerate(table)}
    return {s: dict(sorted(r.items(), key=lambda kv: rank.get(kv[0], len(rank)))) for s, r in rows.items()}


def merge(rows: RawRows, step: int, values: dict[str, float]) -> None:
    """Add values to a step's row (later values win)."""
    rows.setdefault(step, {}).update(values)


class TextLogReader(Reader):
    """One trainer's printed output: a file is claimed when `claims` recognises the format in its first
    `SNIFF_BYTES` bytes."""

    def claims(self, head: str) -> bool:
        raise NotImplementedError

    def claims_file(self, path: Path) -> bool:
        head = text_head(path)
        return head is not None and self.claims(head)

    def runs(self, path: Path) -> list[tuple[str, list[Path]]]:
        return [("", [path])] if self.claims_file(path) else []
