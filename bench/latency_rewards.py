"""Rewards that turn bad at a known training step, for `bench/latency_runs.py` (issue 40 item 2).

Each is `starts_with_vowel` (1 when a completion's first visible character is a vowel: learnable, independent of
length; the reward of the healthy tiny run in tests/training/test_failure_injection.py) until step
`LATENCY_K`, then the failure. The step is counted from the completions scored so far: `LATENCY_BATCH`
completions (prompts per step x group size) make one step, and only training scores them (evaluation is off).
"""

from __future__ import annotations

import os

VOWELS = set("aeiouAEIOU")
_scored: dict[str, int] = {}  # completions each reward has scored so far


def _step(name: str, n: int) -> int:
    """The training step (1-based) of reward `name`'s call scoring the next `n` completions; advances its count."""
    done = _scored.get(name, 0)
    _scored[name] = done + n
    return done // int(os.environ["LATENCY_BATCH"]) + 1


def _vowel(completions: list[str]) -> list[float]:
    return [1.0 if t.strip()[:1] in VOWELS else 0.0 for t in completions]


def vowel_then_zero(completions: list[str], examples: list) -> list[float]:
    """From step k a verifier nothing passes: every group has zero reward variance (advantage collapse)."""
    if _step("vowel_then_zero", len(completions)) < int(os.environ["LATENCY_K"]):
        return _vowel(completions)
    return [0.0 for _ in completions]


def zero_then_length(completions: list[str], examples: list) -> list[float]:
    """0 until step k, then the response length in characters: beside `vowel_then_zero` (the correctness check, which
    nothing passes from k) a hackable reward that takes over at k."""
    if _step("zero_then_length", len(completions)) < int(os.environ["LATENCY_K"]):
        return [0.0 for _ in completions]
    return [float(len(t)) for t in completions]
