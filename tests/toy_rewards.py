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
