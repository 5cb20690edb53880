"""Logged multi-turn episodes (the `episode` entry of a completions.jsonl row in agent mode): the failure kinds an
episode shows, a short text excerpt of it, and the examples the detectors put in their evidence
(`context["episode_examples"]`, built by the doctor from a run's completions and by the trainer live).

An episode is `{"ended_by": "answer" | "turn_limit" | "context_limit" | "length_limit", "policy_tokens": int,
"env_tokens": int, "turns": [...]}`; an assistant turn is `{"role": "assistant", "content": str, "calls": [{"name":
str, "arguments": dict}], "parse_error": str | None}`, a tool turn `{"role": "tool", "name": str, "content": str,
"status": "ok" | "error" | "timeout"}`. Anything else in a row is tolerated and left out.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .jsonl import read_jsonl_objects

#: the failure kinds, in the order the detectors' context lists them
KINDS = ("parse_failure", "tool_error", "tool_timeout", "turn_limit", "context_limit", "length_limit")
LIMIT_KINDS = ("turn_limit", "context_limit", "length_limit")
EXAMPLES_PER_KIND = 3  # excerpts kept per kind (the detectors show up to 2)
TURN_CHARS = 240  # a turn's text longer than this is cut in an excerpt


def episode_of(row: Any) -> dict[str, Any] | None:
    """The row's episode when it is one (a dict with a list of turns), else None."""
    ep = row.get("episode") if isinstance(row, dict) else None
    return ep if isinstance(ep, dict) and isinstance(ep.get("turns"), list) else None


def turns_of(episode: dict[str, Any]) -> list[dict[str, Any]]:
    return [t for t in episode.get("turns") or [] if isinstance(t, dict)]


def failure_kinds(episode: dict[str, Any]) -> list[str]:
    """The failure kinds an episode shows (in `KINDS` order): a tried call that did not parse, a tool that errored
    or timed out, an end on a limit."""
    turns = turns_of(episode)
    found = set()
    if any(t.get("role") == "assistant" and t.get("parse_error") for t in turns):
        found.add("parse_failure")
    statuses = {t.get("status") for t in turns if t.get("role") == "tool"}
    if "error" in statuses:
        found.add("tool_error")
    if "timeout" in statuses:
        found.add("tool_timeout")
    if episode.get("ended_by") in LIMIT_KINDS:
        found.add(str(episode["ended_by"]))
    return [k for k in KINDS if k in found]


def cut(text: Any, limit: int = TURN_CHARS) -> str:
    s = text if isinstance(text, str) else ("" if text is None else str(text))
    s = s.strip()
    return s if len(s) <= limit else s[: limit - 3] + "..."


def call_text(call: Any) -> str:
    """`name({"arg": 1})` for a parsed call (arguments as compact JSON)."""
    if not isinstance(call, dict):
        return cut(call)
    args = call.get("arguments")
    try:
        shown = json.dumps(args, ensure_ascii=False, separators=(",", ":"), default=str)
    except (TypeError, ValueError, RecursionError):
        shown = str(args)
    return f"{call.get('name', '?')}({cut(shown, 160)})"


def turn_lines(turn: dict[str, Any]) -> list[str]:
    """One turn as text lines: the assistant's text, its calls and parse error; a tool's reply with its status."""
    if turn.get("role") == "tool":
        return [f"tool {turn.get('name', '?')} [{turn.get('status', '?')}]: {cut(turn.get('content'))}"]
    lines = [f"{turn.get('role', '?')}: {cut(turn.get('content'))}"]
    calls = turn.get("calls") if isinstance(turn.get("calls"), list) else []
    lines += [f"  call {call_text(c)}" for c in calls]
    if turn.get("parse_error"):
        lines.append(f"  parse error: {cut(turn['parse_error'], 160)}")
    return lines


def _focus(turns: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    """The turns that show `kind`: the failing call and the tool reply after it, or the last two turns."""
    for i, t in enumerate(turns):
        if kind == "parse_failure" and t.get("role") == "assistant" and t.get("parse_error"):
            return [t]
        status = {"tool_error": "error", "tool_timeout": "timeout"}.get(kind)
        if status and t.get("role") == "tool" and t.get("status") == status:
            return turns[max(i - 1, 0) : i + 1]
    return turns[-2:]


def excerpt(episode: dict[str, Any], kind: str) -> str:
    """A short text of the part of `episode` that shows failure `kind`, with how it ended."""
    turns = turns_of(episode)
    lines = [line for t in _focus(turns, kind) for line in turn_lines(t)]
    lines.append(f"(ended by {episode.get('ended_by', '?')} after {len(turns)} turn{'' if len(turns) == 1 else 's'})")
    return "\n".join(lines)


def episode_examples(rows: list[dict[str, Any]], per_kind: int = EXAMPLES_PER_KIND) -> dict[str, list[str]]:
    """Up to `per_kind` excerpts per failure kind from completion rows, the latest logged first; kinds no episode
    shows are left out (an empty dict when no row has an episode)."""
    out: dict[str, list[str]] = {}
    for row in reversed(rows):
        ep = episode_of(row)
        if ep is None:
            continue
        for kind in failure_kinds(ep):
            found = out.setdefault(kind, [])
            if len(found) < per_kind:
                found.append(excerpt(ep, kind))
    return out


def run_episode_examples(run_dir: Path) -> dict[str, list[str]]:
    """`episode_examples` of a grpokit run directory's completions.jsonl ({} when it has none)."""
    path = run_dir / "completions.jsonl"
    return episode_examples(read_jsonl_objects(path)) if path.is_file() else {}
