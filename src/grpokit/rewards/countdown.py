"""The `countdown` reward: the expression hits the target, each allowed number used at most once."""

from __future__ import annotations

import json
import re
from collections import Counter

from ..data.example import Example
from .arith import ArithError, evaluate

_ANSWER_TAG = re.compile(r"answer\s*:", re.IGNORECASE)
_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_ARITH_RUN = re.compile(r"[\d\s+\-*/()]+")
_OPERATORS = str.maketrans({"\u00d7": "*", "\u00b7": "*", "\u00f7": "/", "\u2212": "-", "\u2013": "-"})


def extract_expression(text: str) -> str:
    """The candidate expression: the first line after the last "Answer:", else the last non-empty line.

    `\\boxed{...}`, `$` and backticks are unwrapped, a trailing period dropped, and only the part before an
    "=" kept ("3*5+1 = 16" -> "3*5+1"). A line with prose around the arithmetic keeps its longest run of
    arithmetic characters.
    """
    tags = list(_ANSWER_TAG.finditer(text))
    tail = text[tags[-1].end() :] if tags else text
    lines = [ln.strip() for ln in tail.splitlines() if ln.strip()]
    if not lines:
        return ""
    line = lines[0] if tags else lines[-1]
    boxed = _BOXED.findall(line)
    if boxed:
        line = boxed[-1]
    line = line.translate(_OPERATORS).replace("$", "").replace("`", "").split("=")[0].strip().rstrip(".")
    if _ARITH_RUN.fullmatch(line) is None:
        runs = [r.strip() for r in _ARITH_RUN.findall(line) if any(ch.isdigit() for ch in r)]
        line = max(runs, key=len) if runs else ""
    return line


def countdown_correct(text: str, numbers: list[int], target: int) -> bool:
    """Whether the completion's expression uses `numbers` at most once each and equals `target` exactly."""
    expr = extract_expression(text)
    if not expr:
        return False
    try:
        value, used = evaluate(expr)
    except ArithError:
        return False
    return value == target and not Counter(used) - Counter(numbers)


def countdown(completions: list[str], examples: list[Example]) -> list[float]:
    """1.0 when the expression after "Answer:" (else on the last line) is valid and hits the target."""
    if len(completions) != len(examples):
        raise ValueError(f"{len(completions)} completions for {len(examples)} examples")
    out: list[float] = []
    for text, ex in zip(completions, examples):
        try:
            spec = json.loads(ex.answer)
            numbers, target = [int(x) for x in spec["numbers"]], int(spec["target"])
        except (ValueError, KeyError, TypeError) as e:
            raise ValueError(
                f"countdown: the answer of example {ex.id!r} must be JSON like "
                f'{{"numbers": [3, 5, 2], "target": 16}}, got {ex.answer!r}'
            ) from e
        out.append(float(countdown_correct(text, numbers, target)))
    return out
