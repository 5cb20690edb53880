"""`safe_text`: text grpokit did not write, made safe to print or store.

A reward's exception message, a completion, a tool result, a metric or alert name read from a foreign log, a run
folder's name: any of them can carry terminal control sequences. Printed raw, `ESC ] 52 ; c ; <base64> BEL` writes
the user's clipboard (OSC 52), `ESC ] 0 ; <title> BEL` sets the window title (OSC 0), `ESC [ 2 J` clears the screen,
and the one-byte C1 form `\\x9b` is a CSI to some terminals. And a 20 MB exception message, stored whole, fills a
log and a terminal. Every path that prints or stores such text passes it through `safe_text` once, at the point
where it leaves grpokit (the console, `doctor`, `watch`, notifications, failure records, reports).

What it does:
- every control character becomes a visible escape, as Python writes it in a string literal: `\\x1b`, `\\x07`,
  `\\x9b`, `\\r`, `\\x00`; escaped are C0 (0x00-0x1f; `\\n` and `\\t` are kept where the output is `multiline`),
  DEL (0x7f), C1 (0x80-0x9f), lone surrogates (`\\udc80`, left by undecodable bytes), the line and paragraph
  separators (U+2028, U+2029) and the bidirectional controls (U+061C, U+200E, U+200F, U+202A-U+202E,
  U+2066-U+2069) that make a terminal show text in another order than it is ("Trojan Source");
- a text longer than `limit` characters (after escaping) keeps its head and its tail and says how much was cut in
  between: `head…[cut 19,999,000 characters]…tail`; the result, note included, is at most `limit` characters.

A backslash is kept as it is (paths and regexes stay readable), so `\\x1b` in the output may have been an escape
character or those four characters; the point is that no control character reaches the output. The function is
idempotent: `safe_text(safe_text(s)) == safe_text(s)` for the same `limit` and `multiline`.
"""

from __future__ import annotations

import re

__all__ = ["DEFAULT_LIMIT", "safe_text"]

DEFAULT_LIMIT = 4000  # characters: a long error message whole, not a 20 MB one
MIN_LIMIT = 64  # below this the note about the cut would leave no room for the text

_OTHER = "\x7f-\x9f\ud800-\udfff\u2028\u2029\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
_CONTROL = re.compile(f"[\x00-\x1f{_OTHER}]")  # one line: `\n` and `\t` are escaped too
_CONTROL_MULTILINE = re.compile(f"[\x00-\x08\x0b-\x1f{_OTHER}]")  # `\n` and `\t` kept
_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _escape(ch: str) -> str:
    """The visible escape of one control character: `\\n`, `\\x1b`, `\\u202e`."""
    n = ord(ch)
    return _NAMED.get(ch) or (f"\\x{n:02x}" if n <= 0xFF else f"\\u{n:04x}")


def _note(cut: int) -> str:
    return f"…[cut {cut:,} characters]…"


def _take(chars: str, budget: int, pattern: re.Pattern[str]) -> tuple[list[str], int]:
    """Escaped pieces of `chars`, in order, while they fit in `budget` characters; and how many chars they are."""
    pieces, used = [], 0
    for ch in chars:
        piece = _escape(ch) if pattern.match(ch) else ch
        if used + len(piece) > budget:
            break
        pieces.append(piece)
        used += len(piece)
    return pieces, len(pieces)


def safe_text(text: object, limit: int | None = DEFAULT_LIMIT, multiline: bool = False) -> str:
    """`text` with every control character escaped and, past `limit` characters, its middle cut (module docstring).

    `text`: a str (anything else is turned into one; bytes are decoded as UTF-8 with undecodable bytes escaped).
    `limit`: the most characters of the result, the note of a cut included (at least 64); None: no cut.
    `multiline`: keep `\\n` and `\\t` (a completion, a multi-line report); otherwise they are escaped too, so the
    text stays on one line.
    """
    if isinstance(text, bytes | bytearray):
        s = bytes(text).decode("utf-8", "backslashreplace")
    else:
        s = text if isinstance(text, str) else str(text)
    if limit is not None and limit < MIN_LIMIT:
        raise ValueError(f"safe_text: limit={limit} leaves no room for the text; give at least {MIN_LIMIT}")
    pattern = _CONTROL_MULTILINE if multiline else _CONTROL
    if limit is None or len(s) <= limit:
        out = pattern.sub(lambda m: _escape(m.group()), s)
        if limit is None or len(out) <= limit:
            return out
    # too long: escape only the head and the tail that fit (a 20 MB text costs the same as a 4 kB one)
    budget = limit - len(_note(len(s)))  # the longest note this text can need
    head, n_head = _take(s[: budget // 2 + 1], budget // 2, pattern)
    rest = s[n_head:]
    tail_budget = budget - sum(map(len, head))
    tail, n_tail = _take(reversed(rest[-tail_budget - 1 :] if tail_budget else ""), tail_budget, pattern)
    return "".join(head) + _note(len(s) - n_head - n_tail) + "".join(reversed(tail))
