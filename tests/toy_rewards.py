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


def always_half(completions: list[str], examples: list) -> list[float]:
    """A graded reward that ignores the completion: every group has zero variance without being right or wrong."""
    return [0.5 for _ in completions]


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


# --- rewards written for other trainers, used unchanged (tests/rewards/test_reward_signatures.py) ---------------------


def reward_len(completions, **kwargs):
    """The TRL documentation's example: prefer completions close to 20 characters."""
    return [-abs(20 - len(completion)) for completion in completions]


def trl_reads_columns(prompts, completions, completion_ids, trainer_state, solution, difficulty, **kwargs):
    """A TRL-style reward that checks what it receives: the raw prompts, every column, the trainer state."""
    out = []
    for p, c, s, d in zip(prompts, completions, solution, difficulty, strict=True):
        assert isinstance(p, str) and p.startswith("Q"), p
        out.append(float(c.strip() == s) * d)
    return out


def compute_score(data_source, solution_str, ground_truth, extra_info=None):
    """A verl custom reward (`custom_reward_function.path`): the text after the last '####' must match."""
    if data_source != "openai/gsm8k":
        raise NotImplementedError(f"no scorer for {data_source}")
    if "####" not in solution_str:
        return {"score": 0.0, "formatted": False}
    answer = solution_str.rsplit("####", 1)[1].strip().replace(",", "")
    bonus = 0.5 if extra_info and extra_info.get("split") == "test" else 0.0
    return {"score": float(answer == ground_truth) + bonus, "formatted": True}


def gsm8k_strict(solution_str, ground_truth, method="strict", format_score=0.0, score=1.0):
    """The shape of verl's built-in per-dataset scorers: no data_source, defaults for the rest."""
    marker = "#### "
    if marker not in solution_str:
        return 0
    return score if solution_str.rsplit(marker, 1)[1].strip() == ground_truth else format_score


def ids_length_unless_bad(completions, completion_ids, **kwargs):
    """TRL-style: the token count, but raises on a completion containing 'bad' (forces the per-sample retry)."""
    if any("bad" in c for c in completions):
        raise ValueError("bad completion")
    return [float(len(ids)) for ids in completion_ids]


def always_one(completions: list[str], examples: list) -> list[float]:
    """A verifier every completion passes: every group is all-correct (the task learned, by construction)."""
    return [1.0 for _ in completions]


_CALLS = [0]


def fails_after_two_calls(completions: list[str], examples: list) -> list[float]:
    """vowel_frac for two calls, then an exception on every sample: a reward service that goes down mid-run."""
    _CALLS[0] += 1
    if _CALLS[0] > 2:
        raise RuntimeError("reward service unreachable")
    return vowel_frac(completions, examples)


def raises_with_escapes(completions, examples):
    """A reward whose error text carries an OSC 52 clipboard write and a clear-screen: every sample fails."""
    raise ValueError("bad \x1b]52;c;ZXZpbA==\x07 answer \x1b[2J" + "x" * 5000)


def reads_other_cmdline(completions, examples):
    """Reads the command line of the process whose pid is the example's answer (the trainer's, in the test)."""
    with open(f"/proc/{examples[0].answer}/cmdline", "rb") as f:
        f.read()
    return [1.0] * len(completions)
