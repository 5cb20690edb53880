"""A logged multi-turn episode (a completions.jsonl row's `episode`, `readers/episodes.py`) as HTML: a box per turn
(the assistant's text with its tool calls, name and arguments, and any parse error; each tool reply with its
status; an environment's user message), then how the episode ended and its token counts. Rows without an episode
are not drawn here."""

from __future__ import annotations

import json
from typing import Any

from ..readers.episodes import turns_of
from .html import esc

#: styles of the episode boxes, added to the page once, only where an episode is drawn
EPISODE_STYLE = """<style>
.episode{max-width:520px;font-size:12px}
.turn{border:1px solid #ddd;border-left:4px solid #999;border-radius:3px;padding:3px 6px;margin:3px 0;
 white-space:pre-wrap;font-family:ui-monospace,monospace}
.turn.assistant{border-left-color:#1f77b4}.turn.user{border-left-color:#b35c00}.turn.tool{border-left-color:#2a7d2a;background:#f7fbf7}
.turn.tool.error,.turn.tool.timeout{border-left-color:#b02a2a;background:#fdf5f5}
.turn .role{font-weight:bold;font-family:system-ui,sans-serif}.turn .call{color:#5a3d8a}
.ended{color:#666;font-family:system-ui,sans-serif}.ended.bad{color:#b02a2a}
</style>"""

TURN_CHARS = 2000  # a turn's text longer than this is cut (the report shows, it does not archive)
STATUS_CLASS = {"ok": "good", "error": "bad", "timeout": "bad"}


def _text(value: Any, limit: int = TURN_CHARS) -> str:
    s = value if isinstance(value, str) else ("" if value is None else str(value))
    return esc(s if len(s) <= limit else s[: limit - 3] + "...")


def _arguments(args: Any) -> str:
    try:
        return json.dumps(args, ensure_ascii=False, default=str)
    except (TypeError, ValueError, RecursionError):
        return str(args)


def _message(turn: dict[str, Any]) -> str:
    """An assistant turn (or an environment's user message): its text, its calls, its parse error."""
    role = "assistant" if turn.get("role") == "assistant" else "user"
    parts = [f"<span class='role'>{_text(turn.get('role', '?'), 40)}</span>\n{_text(turn.get('content'))}"]
    calls = turn.get("calls") if isinstance(turn.get("calls"), list) else []
    for c in calls:
        name, args = (c.get("name", "?"), c.get("arguments")) if isinstance(c, dict) else (c, None)
        parts.append(f"<div class='call'>&#8594; call {_text(name, 200)}({_text(_arguments(args), 600)})</div>")
    if turn.get("parse_error"):
        parts.append(f"<div class='bad'>tool call did not parse: {_text(turn['parse_error'], 400)}</div>")
    return f"<div class='turn {role}'>" + "".join(parts) + "</div>"


def _tool(turn: dict[str, Any]) -> str:
    status = str(turn.get("status", "?"))
    cls = "error" if status == "error" else "timeout" if status == "timeout" else ""
    label = f"<span class='{STATUS_CLASS.get(status, '')}'>{esc(status)}</span>"
    return (
        f"<div class='turn tool {cls}'><span class='role'>tool {_text(turn.get('name', '?'), 200)}</span> "
        f"[{label}]\n{_text(turn.get('content'))}</div>"
    )


def episode_html(episode: dict[str, Any]) -> str:
    """The episode's turns, one box each, and a last line: what ended it, its turn and token counts."""
    turns = turns_of(episode)
    boxes = [_tool(t) if t.get("role") == "tool" else _message(t) for t in turns]
    ended = episode.get("ended_by", "?")
    tokens = [
        f"{label} {episode[key]}"
        for key, label in (("policy_tokens", "policy"), ("env_tokens", "tool"))
        if key in episode
    ]
    counts = f"{len(turns)} turn{'' if len(turns) == 1 else 's'}"
    counts += f", tokens: {esc(', '.join(str(t) for t in tokens))}" if tokens else ""
    cls = "" if ended == "answer" else " bad"
    return (
        "<div class='episode'>"
        + "".join(boxes)
        + f"<div class='ended{cls}'>ended by <b>{esc(ended)}</b> ({counts})</div></div>"
    )
