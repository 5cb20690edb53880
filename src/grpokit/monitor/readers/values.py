"""Values out of logs: numbers from JSON values or printed tokens, steps, and dicts printed inside a line."""

from __future__ import annotations

import ast
import json
import math
import re
from typing import Any

NAN = float("nan")
# terminal colour codes, stripped from printed logs before parsing
ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")

_WRAPPED = re.compile(r"^(?:np|numpy|torch)?\.?(?:float|int|uint|bool_?|tensor)\w*\((.*)\)$")


def number(v: int | float) -> float:
    """`float(v)`, an int too large for a float (10**400) read as the infinity of its sign, not an OverflowError."""
    try:
        return float(v)
    except OverflowError:
        return math.inf if v > 0 else -math.inf


def step_number(v: Any) -> int | None:
    """A logged step as an int: a non-negative integer below 10**12 (an int, or a float with no fraction); None
    for anything else (None, NaN, a string, a negative or absurd number), which a caller skips and counts."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    if isinstance(v, float) and not (math.isfinite(v) and v.is_integer()):
        return None
    return int(v) if 0 <= v < 10**12 else None


def to_float(v: Any) -> float | None:
    """A number from a JSON value or a logged token (`0.5`, `nan`, `np.float64(0.5)`, `tensor(0.5)`); None if
    the value is not numeric. JSON null (grpokit writes NaN as null) reads as NaN."""
    if v is None:
        return NAN
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, (int, float)):
        return number(v)
    if isinstance(v, str):
        s = v.strip().rstrip(",")
        m = _WRAPPED.match(s)
        if m:
            s = m.group(1).split(",")[0].strip()  # tensor(0.5, device='cuda:0') -> 0.5
        try:
            return float(s)
        except ValueError:
            return None
    return None


def numeric_items(d: dict[str, Any]) -> dict[str, float]:
    out = {}
    for k, v in d.items():
        f = to_float(v)
        if f is not None:
            out[str(k)] = f
    return out


def step_of(v: Any) -> int | None:
    f = to_float(v)
    if f is None or not math.isfinite(f):
        return None
    return int(f)


MAX_DICT_CHARS = 1 << 20  # a printed metrics dict is a few kB; longer text at a `{` is not one


def dict_end(line: str, start: int) -> int | None:
    """The index of the `}` closing the `{` at `start`, brackets inside quoted strings skipped; None when it is not
    closed within MAX_DICT_CHARS. One pass over the text (trying each `}` in turn was quadratic: a console line
    with many braces held `doctor` for minutes)."""
    depth, quote, i = 0, "", start
    stop = min(len(line), start + MAX_DICT_CHARS)
    while i < stop:
        c = line[i]
        if quote:
            if c == "\\":
                i += 1
            elif c == quote:
                quote = ""
        elif c in "'\"":
            quote = c
        elif c in "{[(":
            depth += 1
        elif c in "}])":
            depth -= 1
            if depth == 0:
                return i if c == "}" else None
        i += 1
    return None


# the bare names Python (`nan`, `inf`), JavaScript/JSON (`NaN`, `Infinity`) and others print for non-finite floats
_NONFINITE_NAMES = {"nan": math.nan, "inf": math.inf, "infinity": math.inf}
_PARSE_ERRORS = (ValueError, SyntaxError, TypeError, MemoryError, RecursionError)


class _NonFiniteNames(ast.NodeTransformer):
    """Turns the bare names of non-finite floats into float constants; any other name is left for `literal_eval`
    to refuse."""

    def visit_Name(self, node: ast.Name) -> ast.AST:
        value = _NONFINITE_NAMES.get(node.id.lower())
        return node if value is None else ast.copy_location(ast.Constant(value), node)


def literal_with_nonfinite(text: str) -> Any:
    """A Python literal that may hold bare `nan`, `inf`, `-inf`, `NaN`, `Infinity` (how Python's and JavaScript's
    printers write non-finite floats: transformers prints `{'loss': 0.0, 'grad_norm': nan}` on a NaN gradient).
    `ast.literal_eval` alone refuses those names and `json.loads` refuses `nan`; here they become floats and the
    tree is still evaluated by `literal_eval`, so nothing but literals is ever evaluated. Raises what
    `literal_eval` raises on anything else."""
    tree = ast.parse(text.strip(), mode="eval")
    return ast.literal_eval(_NonFiniteNames().visit(tree))


def dict_at(line: str, start: int) -> dict[str, Any] | None:
    """The Python/JSON dict starting at `start` in a line (None if it does not parse); bare non-finite floats
    (`nan`, `inf`, `-inf`, `NaN`, `Infinity`) read as floats."""
    end = dict_end(line, start)
    if end is None:
        return None
    chunk = line[start : end + 1]
    try:
        obj = ast.literal_eval(chunk)
    except _PARSE_ERRORS:
        try:
            obj = literal_with_nonfinite(chunk)
        except _PARSE_ERRORS:
            try:
                obj = json.loads(chunk)
            except (json.JSONDecodeError, RecursionError):
                obj = None
    return obj if isinstance(obj, dict) else None
