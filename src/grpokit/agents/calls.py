"""Reading tool calls out of a policy turn: the chat template's own format, or a tag format for models without one.

- `template`: the tokenizer's response parser (`tokenizer.parse_response` with the tokenizer's `response_template`,
  transformers >= 5; `response_schema` in its first releases), as TRL reads tool calls; for models whose tokenizer
  ships one.
- `hermes`: `<tool_call>{"name": ..., "arguments": {...}}</tool_call>` blocks, the tag format of Hermes/Qwen
  templates; the fallback for templates without tool calls (SmolLM2's ChatML).

`agent.tool_format=auto` picks `template` when the tokenizer has a response parser, else `hermes`. A turn *tried* a
call when it opened a call block; each opened block that is not a well-formed call (unclosed, not JSON, no string
`name`, `arguments` not an object) is one parse failure, reported back to the model as an error message.

Whatever the policy writes is data: no text makes a parser raise (`read_calls` turns anything a parser still raises
into one counted failure). A call nested deeper than `MAX_DEPTH` levels, a name longer than `MAX_NAME_CHARS`, or a
string that is not Unicode text (a lone surrogate from a `\\ud800` escape) is a parse failure too: such a call could
be neither run nor logged (`json.dumps` of 1,000 levels raises RecursionError; a surrogate cannot be written as
UTF-8).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..common.registry import Registry

CALL_FORMATS = Registry("tool-call format")
OPEN_TAG, CLOSE_TAG = "<tool_call>", "</tool_call>"
MAX_DEPTH = 64  # nesting levels of a call's JSON (the limit grpokit's YAML reading has too)
MAX_NAME_CHARS = 256  # no tool is named longer; a longer name is not echoed back whole
_SURROGATE = re.compile(r"[\ud800-\udfff]")
_BLOCK = re.compile(re.escape(OPEN_TAG) + r"(.*?)(?:" + re.escape(CLOSE_TAG) + r"|$)", re.DOTALL)


@dataclass
class ToolCall:
    """One call the policy wrote: a tool name and its keyword arguments."""

    name: str
    arguments: dict[str, Any]


@dataclass
class ParsedTurn:
    """What a policy turn asked for: its calls, how many blocks it opened, and why the malformed ones failed."""

    calls: list[ToolCall] = field(default_factory=list)
    attempts: int = 0
    errors: list[str] = field(default_factory=list)

    @property
    def failures(self) -> int:
        return len(self.errors)


def check_value(obj: Any, what: str = "the tool call") -> None:
    """ValueError when a decoded call nests deeper than `MAX_DEPTH` or holds a string that is not Unicode text (a
    lone surrogate); walked without recursion, so any depth is measured without a RecursionError."""
    stack = [(obj, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, str):
            if _SURROGATE.search(node):
                raise ValueError(f"{what}: a lone surrogate (a \\ud800-\\udfff escape) is not text")
        elif isinstance(node, (dict, list)):
            if depth > MAX_DEPTH:
                raise ValueError(f"{what}: nested deeper than {MAX_DEPTH} levels")
            items = [*node.keys(), *node.values()] if isinstance(node, dict) else node
            stack.extend((item, depth + 1) for item in items)


def loads(text: str, what: str = "the tool call") -> Any:
    """`json.loads` of policy text. Bad JSON raises JSONDecodeError; nesting that exhausts the parser's recursion
    and numbers of more than 4300 digits raise ValueError too, never RecursionError."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError(f"{what}: nested deeper than {MAX_DEPTH} levels") from None


def call_from_object(obj: Any) -> ToolCall:
    """A ToolCall from a decoded `{"name", "arguments"}` object (OpenAI's `{"function": {...}}` nesting accepted);
    ValueError saying what is wrong."""
    if isinstance(obj, dict) and isinstance(obj.get("function"), dict):
        obj = obj["function"]
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        raise ValueError('a tool call must be a JSON object with a string "name"')
    name = obj["name"]
    if len(name) > MAX_NAME_CHARS:
        raise ValueError(f"the tool name is {len(name)} characters long (a tool name has at most {MAX_NAME_CHARS})")
    check_value(name, "the tool name")
    args = obj.get("arguments", obj.get("parameters", {}))
    if isinstance(args, str):
        try:
            args = loads(args, f'the "arguments" of {name!r}') if args.strip() else {}
        except json.JSONDecodeError:
            raise ValueError(f'the "arguments" of {name!r} are not JSON') from None
    if not isinstance(args, dict):
        raise ValueError(f'the "arguments" of {name!r} must be a JSON object')
    check_value(args, f'the "arguments" of {name!r}')
    return ToolCall(name, args)


@CALL_FORMATS.register("hermes")
def parse_hermes(text: str, tokenizer: Any = None) -> ParsedTurn:
    """`<tool_call>{json}</tool_call>` blocks; an unclosed last block counts as a failed try."""
    out = ParsedTurn()
    for m in _BLOCK.finditer(text):
        out.attempts += 1
        if not m.group(0).endswith(CLOSE_TAG):
            out.errors.append(f"{OPEN_TAG} was not closed with {CLOSE_TAG}")
            continue
        try:
            obj = loads(m.group(1).strip())
            check_value(obj)
            out.calls.append(call_from_object(obj))
        except json.JSONDecodeError as e:
            out.errors.append(f"the tool call is not valid JSON ({e.msg} at character {e.pos})")
        except ValueError as e:
            out.errors.append(str(e))
    return out


@CALL_FORMATS.register("template")
def parse_template(text: str, tokenizer: Any = None) -> ParsedTurn:
    """The chat template's own format, read by `tokenizer.parse_response` (its `response_schema`)."""
    out = ParsedTurn()
    try:
        try:  # the turn is the whole assistant output: no prompt text before it to parse (an empty prefix)
            parsed = tokenizer.parse_response(text, prefix="")
        except TypeError:  # releases whose parse_response takes no prefix
            parsed = tokenizer.parse_response(text)
    except Exception as e:  # the parser's regex/JSON failed: the turn tried something it could not read
        return ParsedTurn(attempts=1, errors=[f"the tool call could not be read ({type(e).__name__}: {e})"])
    for obj in (parsed or {}).get("tool_calls") or []:
        out.attempts += 1
        try:
            out.calls.append(call_from_object(obj))
        except ValueError as e:
            out.errors.append(str(e))
    return out


def read_calls(parse: Callable[[str], ParsedTurn], text: str) -> ParsedTurn:
    """`parse(text)`, where anything the parser raises (a user's or a tokenizer's parser included) is one counted
    parse failure that goes back to the model, never an exception out of the episode loop."""
    try:
        return parse(text)
    except Exception as e:
        detail = f"{type(e).__name__}: {e}"
        detail = detail if len(detail) <= 200 else detail[:200] + "..."
        return ParsedTurn(attempts=1, errors=[f"the tool call could not be read ({detail})"])


def has_response_parser(tokenizer: Any) -> bool:
    """Whether the tokenizer can read its template's tool calls (a `response_template`, or the earlier
    `response_schema`, and `parse_response`)."""
    spec = getattr(tokenizer, "response_template", None) or getattr(tokenizer, "response_schema", None)
    return bool(spec) and hasattr(tokenizer, "parse_response")


def call_parser(fmt: str, tokenizer: Any) -> Callable[[str], ParsedTurn]:
    """The parser of `agent.tool_format` (auto: the template's own when the tokenizer has one, else hermes)."""
    if fmt == "auto":
        fmt = "template" if has_response_parser(tokenizer) else "hermes"
    if fmt == "template" and not has_response_parser(tokenizer):
        raise ValueError(
            "agent.tool_format=template: this tokenizer has no response parser (response_template) for its chat "
            "template's tool calls; use agent.tool_format=hermes (or auto)"
        )
    parse = CALL_FORMATS[fmt]
    return lambda text: read_calls(lambda t: parse(t, tokenizer), text)
