"""`grpokit.common.safe_text`: control characters escaped visibly, long text cut to its head and tail with the
count of what was cut (issue 38, item 6)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grpokit.common.safe_text import MIN_LIMIT, safe_text

HOSTILE = "a\x1b]52;c;ZXZpbA==\x07b\x1b]0;pwned\x07c\x1b[2Jd\x9be\x07"
# what may never reach an output: C0 but \n and \t, DEL, C1, surrogates, separators, bidi controls
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\u2028\u2029\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def test_terminal_sequences_become_visible_escapes():
    assert safe_text(HOSTILE) == "a\\x1b]52;c;ZXZpbA==\\x07b\\x1b]0;pwned\\x07c\\x1b[2Jd\\x9be\\x07"


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("\x00", "\\x00"),
        ("\r", "\\r"),
        ("\x7f", "\\x7f"),
        ("\x80", "\\x80"),
        ("\x85", "\\x85"),
        ("\x9f", "\\x9f"),
        ("\ud800", "\\ud800"),
        ("\udcff", "\\udcff"),
        ("\u2028", "\\u2028"),
        ("\u202e", "\\u202e"),
        ("\u2066", "\\u2066"),
    ],
)
def test_each_kind_of_control_character(raw, shown):
    assert safe_text(f"x{raw}y") == f"x{shown}y"


def test_plain_and_non_ascii_text_is_unchanged():
    text = "entropy collapse: H 0.12 → 0.01, naïve 数学 ✓ C:\\runs\\a"
    assert safe_text(text) == text
    assert safe_text(text, multiline=True) == text


def test_one_line_escapes_newline_and_tab_multiline_keeps_them():
    assert safe_text("a\nb\tc") == "a\\nb\\tc"
    assert safe_text("a\nb\tc\x1b", multiline=True) == "a\nb\tc\\x1b"
    assert safe_text("a\r\nb", multiline=True) == "a\\r\nb"


def test_bytes_and_other_objects():
    assert safe_text(b"ok \xff\x1b") == "ok \\xff\\x1b"
    assert safe_text(ValueError("bad \x1b[2J")) == "bad \\x1b[2J"


def test_a_20_mb_message_keeps_head_and_tail_and_says_how_much_was_cut():
    text = "HEAD" + "x" * 20_000_000 + "TAIL"
    out = safe_text(text, limit=1000)
    assert len(out) <= 1000
    assert out.startswith("HEAD") and out.endswith("TAIL")
    cut = int(re.search(r"…\[cut ([\d,]+) characters\]…", out).group(1).replace(",", ""))
    kept = len(out) - len(re.search(r"…\[cut [\d,]+ characters\]…", out).group(0))
    assert cut + kept == len(text)  # every character is either kept or counted as cut


def test_the_cut_never_splits_an_escape_and_counts_input_characters():
    text = "\x1b" * 500
    out = safe_text(text, limit=200)
    assert len(out) <= 200
    head, note, tail = re.match(r"((?:\\x1b)*)(…\[cut [\d,]+ characters\]…)((?:\\x1b)*)$", out).groups()
    cut = int(note[6:].split()[0].replace(",", ""))
    assert (len(head) + len(tail)) // 4 + cut == 500


def test_no_limit_keeps_everything():
    assert safe_text("y" * 100_000, limit=None) == "y" * 100_000


def test_a_limit_too_small_for_the_note_is_refused():
    with pytest.raises(ValueError, match="at least"):
        safe_text("x", limit=MIN_LIMIT - 1)


@settings(max_examples=300, deadline=None)
@given(
    st.text(alphabet=st.characters(exclude_categories=()) | st.sampled_from("\x1b\x07\x9b\n\t\ud800"), max_size=400),
    st.integers(MIN_LIMIT, 300),
    st.booleans(),
)
def test_output_never_holds_a_control_character_and_stays_within_the_limit(text, limit, multiline):
    out = safe_text(text, limit=limit, multiline=multiline)
    assert not RAW.search(out)
    assert multiline or ("\n" not in out and "\t" not in out)
    assert len(out) <= limit
    assert safe_text(out, limit=limit, multiline=multiline) == out  # idempotent
    if not RAW.search(text) and len(text) <= limit and (multiline or not re.search("[\n\t]", text)):
        assert out == text  # text that is already safe is left as it is
