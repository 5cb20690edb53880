"""The race's reward for random weights (bench/vs_trl.py --reward parity): 1.0 when the completion's UTF-8 length is
even. A random model never answers add1, so exact_numeric would give every sample 0, no group any advantage, and a
trainer that skips zero-advantage updates nothing to do; this reward varies inside every group, so both trainers do
the whole update each step."""

from __future__ import annotations

from typing import Any


def parity(completions: list[Any], **kwargs: Any) -> list[float]:
    texts = [c[-1]["content"] if isinstance(c, list) else str(c) for c in completions]
    return [1.0 if len(t.encode()) % 2 == 0 else 0.0 for t in texts]
