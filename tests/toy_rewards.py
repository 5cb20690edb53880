"""Reward functions used by the trainer tests (imported as `toy_rewards:NAME` through reward.functions)."""

from __future__ import annotations

VOWELS = set("aeiouAEIOU")


def vowel_frac(completions: list[str], examples: list) -> list[float]:
    """Fraction of a completion's characters that are vowels: a dense signal a tiny random model can learn."""
    return [sum(c in VOWELS for c in t) / max(len(t), 1) for t in completions]


def raises_on_e(completions: list[str], examples: list) -> list[float]:
    """Raises whenever a completion contains the letter 'e' (a content-dependent bug in a user's reward)."""
    out = []
    for t in completions:
        if "e" in t:
            raise ValueError("cannot score completions with an 'e'")
        out.append(sum(c in VOWELS for c in t) / max(len(t), 1))
    return out


def always_none(completions: list[str], examples: list) -> list[float | None]:
    return [None for _ in completions]


def always_zero(completions: list[str], examples: list) -> list[float]:
    """A verifier no completion ever passes: every group has zero reward variance (advantage collapse)."""
    return [0.0 for _ in completions]


def random_score(completions: list[str], examples: list) -> list[float]:
    """A non-deterministic verifier: a fresh random score for every completion, identical texts included."""
    import random

    return [random.random() for _ in completions]


def char_length(completions: list[str], examples: list) -> list[float]:
    """Rewards length in characters and nothing else (a hackable reward)."""
    return [float(len(t)) for t in completions]


def starts_with_vowel(completions: list[str], examples: list) -> list[float]:
    """1 when the completion's first visible character is a vowel: learnable, and independent of the length."""
    return [1.0 if t.strip()[:1] in VOWELS else 0.0 for t in completions]


def any_number(completions: list[str], examples: list) -> list[float]:
    """A lax verifier for audit tests: 1.0 for any completion that contains a digit (accepts wrong numbers)."""
    return [1.0 if any(c.isdigit() for c in t) else 0.0 for t in completions]


def sleeps_forever(completions: list[str], examples: list) -> list[float]:
    """A reward that hangs (sleeps far past any reasonable timeout)."""
    import time

    time.sleep(60)
    return [0.0 for _ in completions]


def always_raises(completions: list[str], examples: list) -> list[float]:
    """A reward with a bug: raises on every call."""
    raise KeyError("answer_text")
