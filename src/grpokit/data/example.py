"""The unit of training data: one prompt with its reference answer."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Example:
    """One problem: the user message, the reference answer, free-form metadata and a stable id.

    `messages` is the prompt as a conversation when the data gave one (TRL's conversational format, verl's
    `prompt` column): a list of `{"role", "content"}` messages; `prompt` is then its last user message.

    `id` defaults to a short hash of prompt and answer, so the same problem always gets the same id.
    `columns` is the data file's row as read (original keys and values), when the example came from one:
    TRL- and verl-style rewards receive those columns by name. `origin` is where it was read ("data.jsonl, line 7",
    "DIR, row 3"), for messages about it; empty for built-in tasks.
    """

    prompt: str
    answer: str
    meta: dict[str, Any] = field(default_factory=dict)
    id: str = ""
    columns: dict[str, Any] | None = field(default=None, repr=False, compare=False)
    messages: list[dict[str, Any]] | None = field(default=None, repr=False)
    origin: str = field(default="", repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.id:
            text = self.prompt if self.messages is None else repr(self.messages)
            digest = hashlib.sha1(f"{text}\x00{self.answer}".encode()).hexdigest()
            self.id = digest[:12]

    @property
    def where(self) -> str:
        """The example in a message: its file and line when it came from a file, else its id."""
        return f"{self.origin} (example {self.id})" if self.origin else f"example {self.id}"


def preview(text: str, limit: int = 80) -> str:
    """`text` quoted for a message, cut to its first `limit` characters with the length said (a 2 MB reference
    answer is not printed whole)."""
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit]!r}... ({len(text)} characters)"
