"""Tools: plain Python functions the policy may call, in TRL's convention.

A tool is a function with type hints and a Google-style docstring (`Args:` section); its JSON schema, what the chat
template shows the model, comes from `transformers.utils.get_json_schema`, as TRL's `GRPOTrainer(tools=...)` builds
it. `agent.tools` names built-in tools (`TOOLS`) or user functions as `module:function` / `path/file.py:function`.
Tool calls are written by the model, so they run in the reward sandbox (`grpokit.agents.execution`), never here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..common.registry import Registry
from ..rewards.arith import ArithError, evaluate

TOOLS = Registry("tool")


@dataclass(frozen=True)
class Tool:
    """A callable the policy may invoke by `name`, with the JSON schema its chat template renders."""

    name: str
    fn: Callable[..., Any]
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


def load_tools(specs: list[str]) -> list[Tool]:
    """The tools named by `agent.tools`: built-in names, or `module:function` / `file.py:function` specs.

    A user's tool module is imported here, in the trainer, like TRL imports its tools (its schema is needed to render
    the prompt); its calls run in the sandbox."""
    from ..rewards.registry import load_callable

    tools, seen = [], set()
    for spec in specs:
        fn = TOOLS[spec] if spec in TOOLS else load_callable(spec, what="agent.tools")
        tool = tool_from_function(fn)
        if tool.name in seen:
            raise ValueError(f"agent.tools: two tools are named {tool.name!r}; tool names must be unique")
        seen.add(tool.name)
        tools.append(tool)
    return tools
