"""One dataset row -> one `Example`: the prompt as text or as chat messages, the reference answer, dotted keys.

Understood as they are:

* TRL's *standard* format (`prompt` is a string) and *conversational* format (`prompt` is a list of
  `{"role", "content"}` messages; the Example keeps them in `messages`, its `prompt` is the last user message);
* verl's parquet schema: `prompt` = chat messages, the answer in `reward_model.ground_truth`, plus `data_source`
  and `extra_info`. With the default `answer_key="answer"` and no `answer` column, `reward_model.ground_truth`
  is used when the rows have it;
* dotted keys (`answer_key="reward_model.ground_truth"`): a key present as written wins, else the dots walk
  nested mappings;
* `answer_key=None`: no reference answer (prompt-only TRL datasets whose rewards read other columns).

Every problem raises one `ValueError` naming the source, the row, the field and the fix.
"""

from __future__ import annotations

import difflib
import json
from typing import Any

from .example import Example

PROMPT_ALIASES = ("prompt", "question", "problem", "input", "query", "instruction", "messages")
ANSWER_ALIASES = ("answer", "solution", "output", "target", "label", "final_answer", "reward_model.ground_truth")
DEFAULT_ANSWER_KEY = "answer"
VERL_ANSWER_KEY = "reward_model.ground_truth"
_MISSING = object()


def lookup(record: dict[str, Any], key: str) -> Any:
    """`record[key]`, else the value the dotted path `key` leads to through nested mappings, else `_MISSING`."""
    if key in record:
        return record[key]
    node: Any = record
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return _MISSING
        node = node[part]
    return node


def field_names(record: dict[str, Any], prefix: str = "", depth: int = 2) -> list[str]:
    """The record's keys, with nested mappings' keys as dotted names (two levels deep)."""
    out = []
    for k, v in record.items():
        out.append(f"{prefix}{k}")
        if isinstance(v, dict) and depth > 1:
            out += field_names(v, f"{prefix}{k}.", depth - 1)
    return out


def resolve_answer_key(record: Any, answer_key: str | None) -> str | None:
    """The answer key to use for a source whose first row is `record`: verl's `reward_model.ground_truth` stands in
    for the default `answer` when the rows have no `answer` but have that."""
    if (
        answer_key == DEFAULT_ANSWER_KEY
        and isinstance(record, dict)
        and lookup(record, DEFAULT_ANSWER_KEY) is _MISSING
        and lookup(record, VERL_ANSWER_KEY) is not _MISSING
    ):
        return VERL_ANSWER_KEY
    return answer_key


def _suggest_key(wanted: str, present: list[str], aliases: tuple[str, ...]) -> str | None:
    """The present field most likely meant instead of `wanted`."""
    close = difflib.get_close_matches(wanted, present, n=1)
    if close:
        return close[0]
    return next((a for a in aliases if a in present), None)


def missing_key_error(source: str, where: str, field: str, present: list[str], arg: str) -> ValueError:
    """The error for a row (or a whole dataset) without the prompt or answer field."""
    aliases = PROMPT_ALIASES if arg == "prompt_key" else ANSWER_ALIASES
    guess = _suggest_key(field, present, aliases)
    fix = f"pass {arg}={guess!r}" if guess else f"add a {field!r} field or pass {arg}=<field name>"
    if arg == "answer_key":
        fix += " (data.answer_key; null when the rewards need no reference answer)"
    return ValueError(f"{source}, {where}: missing field {field!r} (fields present: {present}); {fix}")


def answer_text(value: Any) -> str:
    """Reference answers as text: strings stripped, numbers via str, lists/dicts as JSON."""
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, (list, dict)):
        return json.dumps(value)
    return str(value)


def is_conversation(value: Any) -> bool:
    """Whether `value` is a list of chat messages (mappings with a role)."""
    return isinstance(value, list) and bool(value) and all(isinstance(m, dict) and "role" in m for m in value)


def _messages(value: list[dict[str, Any]], source: str, where: str, key: str) -> list[dict[str, Any]]:
    """Chat messages with the keys a columnar format fills with None for other messages dropped. A user message
    must have text, as a string prompt must: an empty one is refused like an empty prompt."""
    out = []
    for i, m in enumerate(value):
        content = m.get("content")
        if not isinstance(content, str) or (m.get("role") == "user" and not content.strip()):
            got = "an empty user 'content'" if isinstance(content, str) else f"no text 'content' (got {content!r:.80})"
            raise ValueError(
                f"{source}, {where}: field {key!r} message {i} has {got}; each message must "
                'look like {"role": "user", "content": "..."} with a non-empty user content; fix or drop this record'
            )
        out.append({k: v for k, v in m.items() if v is not None})
    return out


def parse_prompt(value: Any, source: str, where: str, key: str) -> tuple[str, list[dict[str, Any]] | None]:
    """(prompt text, chat messages or None) of a prompt field: a non-empty string or a list of messages."""
    if isinstance(value, str) and value.strip():
        return value, None
    if is_conversation(value):
        messages = _messages(value, source, where, key)
        users = [m["content"] for m in messages if m["role"] == "user"]
        prompt = users[-1] if users else messages[-1]["content"]
        if prompt.strip():
            return prompt, messages
        raise ValueError(
            f"{source}, {where}: field {key!r}: the last message has empty text and no user message has any; a prompt "
            "must be a non-empty string or chat messages with a non-empty user message; fix or drop this record"
        )
    raise ValueError(
        f"{source}, {where}: field {key!r} must be a non-empty string or a list of chat messages "
        f'[{{"role": "user", "content": "..."}}], got {value!r:.200}; fix or drop this record'
    )


def record_to_example(
    record: Any, *, source: str, where: str, prompt_key: str, answer_key: str | None, default_id: str
) -> Example:
    """Validate one record (a dict) and turn it into an `Example`; other top-level fields go to `meta`."""
    if not isinstance(record, dict):
        raise ValueError(
            f"{source}, {where}: expected a JSON object like {{{prompt_key!r}: ..., {answer_key!r}: ...}}, "
            f"got {type(record).__name__}"
        )
    keys = ((prompt_key, "prompt_key"), (answer_key, "answer_key")) if answer_key else ((prompt_key, "prompt_key"),)
    values = {}
    for key, arg in keys:
        values[arg] = lookup(record, key)
        if values[arg] is None:
            also = ", or set data.answer_key=null if no reward needs a reference answer" if arg == "answer_key" else ""
            raise ValueError(f"{source}, {where}: field {key!r} is null; give it a value or drop this record{also}")
        if values[arg] is _MISSING:
            raise missing_key_error(source, where, key, field_names(record), arg)
    prompt, messages = parse_prompt(values["prompt_key"], source, where, prompt_key)
    answer = answer_text(values["answer_key"]) if answer_key else ""
    if answer_key and not answer:
        raise ValueError(
            f"{source}, {where}: field {answer_key!r} is empty; the rewards check completions against the reference "
            "answer: give one or drop this record (or set data.answer_key=null if no reward needs a reference answer)"
        )
    meta = {k: v for k, v in record.items() if k not in (prompt_key, answer_key, "id")}
    rid = record.get("id")
    return Example(
        prompt=prompt,
        answer=answer,
        meta=meta,
        id=str(rid) if rid is not None else default_id,
        columns=dict(record),
        messages=messages,
        origin=f"{source}, {where}",
    )
