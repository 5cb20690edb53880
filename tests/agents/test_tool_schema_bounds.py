"""A tool schema the reward worker reports is read with bounds: nested 100,000 deep, a non-object `parameters`, or
30 MB of docstring is one line naming the tool spec and the limit (it was a RecursionError traceback, or accepted)."""

from __future__ import annotations

import json

import pytest

from grpokit.agents.execution import SCHEMA_MAX_CHARS, SCHEMA_MAX_DEPTH, schema_from_worker


def schema(parameters: object, description: str = "Add two numbers.") -> str:
    return json.dumps(
        {"type": "function", "function": {"name": "add", "description": description, "parameters": parameters}}
    )


def test_a_well_formed_schema_is_read() -> None:
    params = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    tool = schema_from_worker("tools.py:add", schema(params))
    assert tool.name == "add" and tool.schema["function"]["parameters"] == params


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ('{"function": {"name": "add", "parameters": ' + "[" * 100_000 + "]" * 100_000 + "}}", "nested"),
        (schema({"deep": json.loads("[" * 40 + "]" * 40)}), f"over {SCHEMA_MAX_DEPTH} levels"),
        (schema(["not", "an", "object"]), "parameters of type list, not an object"),
        (schema({"type": "object"}, description="x" * (30 << 20)), f"over {SCHEMA_MAX_CHARS:,}"),
    ],
    ids=["100000-deep", "40-deep", "list-parameters", "30-MB-docstring"],
)
def test_a_hostile_schema_is_one_line(text: str, needle: str) -> None:
    with pytest.raises(ValueError) as err:
        schema_from_worker("tools.py:add", text)
    message = str(err.value)
    assert needle in message and "agent.tools: 'tools.py:add'" in message and "\n" not in message
    assert len(message) < 300
