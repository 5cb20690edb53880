"""Tools: plain Python functions the policy may call, in TRL's convention.

A tool is a function with type hints and a Google-style docstring (`Args:` section); its JSON schema, what the chat
template shows the model, comes from `transformers.utils.get_json_schema`, as TRL's `GRPOTrainer(tools=...)` builds
it. `agent.tools` names built-in tools (`TOOLS`) or user functions as `module:function` / `path/file.py:function`.
A user's tool module is imported only in the reward sandbox's worker, which reports each tool's schema back
(`grpokit.agents.execution`); tool calls are written by the model, so they run there too, never here.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..common.registry import Registry
from ..rewards.arith import ArithError, evaluate

TOOLS = Registry("tool")


@dataclass(frozen=True)
class Tool:
    """A callable the policy may invoke by `name`, with the JSON schema its chat template renders. `fn` is None
    for a tool the worker imported from its spec (the trainer holds only its schema)."""

    name: str
    fn: Callable[..., Any] | None
    schema: dict[str, Any]


def tool_from_function(fn: Callable[..., Any]) -> Tool:
    """The `Tool` of a function: its schema from its signature and docstring (ValueError naming what is missing)."""
    from transformers.utils import get_json_schema

    name = getattr(fn, "__name__", repr(fn))
    try:
        schema = get_json_schema(fn)
    except Exception as e:  # transformers' DocstringParsingException / TypeHintParsingException
        raise ValueError(
            f"agent.tools: {name!r} cannot be a tool ({e}); give every argument a type hint and describe it in "
            "the docstring's Args: section, as TRL requires"
        ) from None
    return Tool(name, fn, schema)


@TOOLS.register("calculator")
def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression exactly.

    Args:
        expression: integers with + - * / and parentheses, for example "21 + 47".
    """
    try:
        value, _ = evaluate(expression)
    except ArithError as e:
        raise ValueError(str(e)) from None
    return str(value.numerator) if value.denominator == 1 else f"{float(value):.6g}"


def check_tool_spec(spec: str) -> None:
    """The error a tool spec gives before anything is imported: neither a built-in name nor `module:function`."""
    if spec not in TOOLS and ":" not in spec:
        close = difflib.get_close_matches(spec, list(TOOLS), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ValueError(
            f"agent.tools: {spec!r} is neither a built-in tool ({', '.join(sorted(TOOLS))}) nor 'module:function' "
            f"(e.g. my_tools:search){hint}"
        )


def tool_function(spec: str, cwd: str | None = None) -> Callable[..., Any]:
    """The function of a tool spec: a built-in by name, else the user's module imported here (the worker)."""
    from ..rewards.registry import load_callable

    check_tool_spec(spec)
    return TOOLS[spec] if spec in TOOLS else load_callable(spec, what="agent.tools", cwd=cwd)


def unique_names(tools: list[Tool]) -> list[Tool]:
    """`tools`, checked: two tools of one name are one ValueError."""
    seen: set[str] = set()
    for tool in tools:
        if tool.name in seen:
            raise ValueError(f"agent.tools: two tools are named {tool.name!r}; tool names must be unique")
        seen.add(tool.name)
    return tools
