"""Number-answer rewards: `exact_numeric` (the last number equals the answer) and `format` (a bare number)."""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

from ..data.example import Example, preview

# A number not glued to a preceding word/number: optional sign, digits with optional thousands commas
# (1,234,567), optional decimals; or a bare decimal like .5. In "5-3" the minus is an operator, not a sign.
_NUMBER = re.compile(r"(?<![\w.)\]])-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|(?<![\w.)\]])-?\.\d+")
# `format`: the whole completion is one number, optionally followed by a period, with surrounding whitespace.
_BARE_NUMBER = re.compile(r"\s*-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?\.?\s*")
_UNICODE_MINUS = str.maketrans({"\u2212": "-", "\u2013": "-"})


def parse_number(text: str) -> Decimal | None:
    """`text` as an exact decimal (commas dropped), or None when it is not a single number."""
    try:
        return Decimal(text.strip().translate(_UNICODE_MINUS).replace(",", ""))
    except InvalidOperation:
        return None


def last_number(text: str) -> Decimal | None:
    """The last number written in `text` (handles -3, 1,234 and 2.50), or None when there is none."""
    matches = _NUMBER.findall(text.translate(_UNICODE_MINUS))
    return parse_number(matches[-1]) if matches else None


def _reference(example: Example) -> Decimal:
    ref = parse_number(example.answer.rpartition("####")[2])  # GSM8K-style "reasoning #### 42" too
    if ref is None or not ref.is_finite():
        raise ValueError(
            f"exact_numeric: the reference answer {preview(example.answer)} of {example.where} is not a number; use "
            "the math_verify reward for symbolic answers"
        )
    return ref


def exact_numeric(completions: list[str], examples: list[Example]) -> list[float]:
    """1.0 when the last number in the completion equals the reference answer numerically, else 0.0."""
    if len(completions) != len(examples):
        raise ValueError(f"{len(completions)} completions for {len(examples)} examples")
    out: list[float] = []
    for text, ex in zip(completions, examples):
        got = last_number(text)
        out.append(float(got is not None and got == _reference(ex)))
    return out


def format_reward(completions: list[str], examples: list[Example]) -> list[float]:
    """1.0 when the completion is just a number (optional sign, commas, decimals, one trailing period)."""
    return [float(_BARE_NUMBER.fullmatch(text) is not None) for text in completions]
