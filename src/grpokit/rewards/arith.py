"""Safe evaluation of + - * / arithmetic with `ast` (no `eval`): exact values and the numbers used."""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable
from fractions import Fraction

MAX_EXPR_CHARS = 200
_BINOPS: dict[type[ast.operator], Callable[[Fraction, Fraction], Fraction]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
}


class ArithError(ValueError):
    """The text is not an allowed arithmetic expression (or divides by zero)."""


def _walk(node: ast.AST, used: list[int]) -> Fraction:
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        left, right = _walk(node.left, used), _walk(node.right, used)
        if isinstance(node.op, ast.Div) and right == 0:
            raise ArithError("division by zero")
        return _BINOPS[type(node.op)](left, right)
    if isinstance(node, ast.Constant) and type(node.value) is int:
        used.append(node.value)
        return Fraction(node.value)
    raise ArithError(f"not allowed in an expression: {ast.dump(node)[:60]}")


def evaluate(expr: str) -> tuple[Fraction, list[int]]:
    """Exact value of an expression of integers, + - * / and parentheses, and the integers it uses.

    Unary signs, powers, names, calls and non-integer literals are rejected with `ArithError`; so are
    expressions longer than 200 characters. Nothing is executed: only the parsed tree is walked.
    """
    if len(expr) > MAX_EXPR_CHARS:
        raise ArithError(f"expression longer than {MAX_EXPR_CHARS} characters")
    try:
        tree = ast.parse(expr.strip(), mode="eval")
    except (SyntaxError, ValueError) as e:
        raise ArithError(f"not an expression: {expr!r}") from e
    used: list[int] = []
    return _walk(tree.body, used), used
