"""The `math_verify` reward: symbolic equivalence of the completion's final answer and the reference.

Importing this module imports `math_verify` (and sympy, about a second); the registry loads it on demand.
"""

from __future__ import annotations

import threading

from math_verify import parse, verify

from ..data.example import Example, preview

PARSE_TIMEOUT_S = 5


def math_verify_reward(completions: list[str], examples: list[Example]) -> list[float]:
    """1.0 when math_verify finds the completion's answer (\\boxed{}, fractions, LaTeX) equals the answer."""
    if len(completions) != len(examples):
        raise ValueError(f"{len(completions)} completions for {len(examples)} examples")
    # math_verify's own timeouts use SIGALRM, which only works on the main thread.
    t = PARSE_TIMEOUT_S if threading.current_thread() is threading.main_thread() else None
    golds: dict[str, list] = {}
    out: list[float] = []
    for text, ex in zip(completions, examples):
        if ex.answer not in golds:
            golds[ex.answer] = parse(ex.answer, parsing_timeout=t)
            if not golds[ex.answer]:
                raise ValueError(f"math_verify: cannot parse the reference answer {preview(ex.answer)} of {ex.where}")
        pred = parse(text, parsing_timeout=t)
        out.append(float(bool(pred) and verify(golds[ex.answer], pred, timeout_seconds=t)))
    return out


# One tiny call at import (~40 ms) fills sympy's lazy caches, so every forked worker starts warm.
if threading.current_thread() is threading.main_thread():
    math_verify_reward(["\\boxed{0.5}"], [Example(prompt="", answer="1/2")])
