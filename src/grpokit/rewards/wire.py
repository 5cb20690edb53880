"""What the reward worker sends back to the trainer: JSON only, read with a size cap.

The worker runs untrusted code, and that code can write to the worker's end of the pipe. The trainer therefore
never unpickles a reply (unpickling runs code): a reply is one JSON array `[status, seq, payload]` of at most
`MAX_REPLY_BYTES`, and anything else is rejected as unreadable. Reward values travel as numbers (NaN and
infinities included), null, or `{"invalid": "<type> <repr>"}` for a value that is not a number, and a return
value that is not a list as `{"not_a_list": "<type>"}`; the trainer's checks then report them as before.
The trainer's messages to the worker stay pickled (that direction is trusted).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

MAX_REPLY_BYTES = 64 << 20
STATUSES = ("ok", "err", "limit", "recycle", "ready", "loaded", "broken", "refused")


@dataclass(frozen=True)
class InvalidValue:
    """A returned value that is not a number: `description` is its type and a short repr."""

    description: str


@dataclass(frozen=True)
class NotAList:
    """A reward returned something other than a list (or iterable) of values; `type_name` says what."""

    type_name: str


@dataclass(frozen=True)
class ToolReply:
    """What one tool call returned, for the tool runner (grpokit/agents/execution.py): status "ok" or "error" and
    the text the model will read (at most `MAX_TOOL_TEXT` characters)."""

    status: str
    text: str


MAX_TOOL_TEXT = 1 << 16


class BadReply(Exception):
    """The worker's reply is not a well-formed message (garbage written to the pipe, or too large)."""


def _value(v: Any) -> Any:
    if v is None:
        return None
    if isinstance(v, ToolReply):
        return {"tool": [str(v.status), str(v.text)[:MAX_TOOL_TEXT]]}
    if isinstance(v, (str, bytes)) or not hasattr(v, "__float__"):
        return {"invalid": f"{type(v).__name__} {repr(v)[:60]}"}
    try:
        return float(v)
    except (TypeError, ValueError, OverflowError) as e:
        return {"invalid": f"{type(v).__name__} that is not a float ({e})"}


def values_to_wire(out: Any) -> Any:
    """A reward's (list-converted) output as JSON-ready data."""
    if not isinstance(out, list):
        return {"not_a_list": type(out).__name__}
    return [_value(v) for v in out]


def values_from_wire(payload: Any, *, tool_replies: bool = False) -> Any:
    """The trainer's view of `values_to_wire` output: floats, None, InvalidValue, or a NotAList; with
    `tool_replies` (the tool runner) also ToolReply, which a reward's values never are (InvalidValue there)."""
    if isinstance(payload, dict):
        return NotAList(str(payload.get("not_a_list", "?")))
    if not isinstance(payload, list):
        raise BadReply(f"values of type {type(payload).__name__}")
    out: list[Any] = []
    for v in payload:
        if v is None or isinstance(v, float | int) and not isinstance(v, bool):
            out.append(None if v is None else float(v))
        elif isinstance(v, dict) and isinstance(v.get("invalid"), str):
            out.append(InvalidValue(v["invalid"]))
        elif isinstance(v, dict) and _is_tool_reply(v.get("tool")):
            status, text = v["tool"]
            out.append(ToolReply(status, text[:MAX_TOOL_TEXT]) if tool_replies else InvalidValue("ToolReply"))
        else:
            raise BadReply(f"a value of type {type(v).__name__}")
    return out


def _is_tool_reply(v: Any) -> bool:
    return isinstance(v, list) and len(v) == 2 and v[0] in ("ok", "error") and isinstance(v[1], str)


def encode(status: str, seq: int, payload: Any) -> bytes:
    """One reply as bytes."""
    return json.dumps([status, seq, payload]).encode()


def decode(conn: Any) -> tuple[str, int, Any]:
    """Read one reply from `conn`; BadReply when it is not a well-formed one (EOFError/OSError pass through)."""
    try:
        data = conn.recv_bytes(MAX_REPLY_BYTES)
    except OSError as e:
        if "bad message length" in str(e):
            raise BadReply(f"a reply over {MAX_REPLY_BYTES >> 20} MiB") from e
        raise
    try:
        status, seq, payload = json.loads(data)
    except (ValueError, TypeError, UnicodeDecodeError) as e:
        raise BadReply(f"not a JSON reply ({e})") from e
    if status not in STATUSES or not isinstance(seq, int):
        raise BadReply(f"status {str(status)[:20]!r}, seq {str(seq)[:20]!r}")
    return status, seq, payload
