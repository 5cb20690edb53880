"""The multi-turn signals of a step (`episode/*` in `grpokit.metric_names`), from the records of every episode
sampled in it. The failing episodes shown as the detectors' evidence come from `monitor/readers/episodes.py`."""

from __future__ import annotations

from typing import Any

from .. import metric_names as mn


def ratio(num: float, den: float) -> float:
    return num / den if den else 0.0


def episode_metrics(records: list[dict[str, Any]]) -> dict[str, float]:
    """Rates over episodes (per episode), over tried calls (parse failures) and over executed calls (errors,
    timeouts); token shares over every token after the prompt."""
    n = len(records)
    if not n:
        return {}
    total = {
        k: float(sum(r[k] for r in records))
        for k in ("attempts", "parse_failures", "calls", "tool_errors", "tool_timeouts", "policy_tokens", "env_tokens")
    }
    ended = [r["ended_by"] for r in records]
    turns = sum(sum(t["role"] == "assistant" for t in r["turns"]) for r in records)
    return {
        mn.EPISODE_N: float(n),
        mn.EPISODE_TURNS_MEAN: turns / n,
        mn.EPISODE_TOOL_CALLS_MEAN: total["calls"] / n,
        mn.EPISODE_CALL_FRAC: sum(r["calls"] > 0 for r in records) / n,
        mn.EPISODE_CALL_ATTEMPTS: total["attempts"],
        mn.EPISODE_PARSE_FAIL_RATE: ratio(total["parse_failures"], total["attempts"]),
        mn.EPISODE_TOOL_CALLS: total["calls"],
        mn.EPISODE_TOOL_ERROR_RATE: ratio(total["tool_errors"], total["calls"]),
        mn.EPISODE_TOOL_TIMEOUT_RATE: ratio(total["tool_timeouts"], total["calls"]),
        mn.EPISODE_TURN_LIMIT_FRAC: ended.count("turn_limit") / n,
        mn.EPISODE_CONTEXT_LIMIT_FRAC: ended.count("context_limit") / n,
        mn.EPISODE_LENGTH_LIMIT_FRAC: ended.count("length_limit") / n,
        mn.EPISODE_POLICY_TOKENS_MEAN: total["policy_tokens"] / n,
        mn.EPISODE_ENV_TOKENS_MEAN: total["env_tokens"] / n,
        mn.EPISODE_ENV_TOKEN_FRAC: ratio(total["env_tokens"], total["policy_tokens"] + total["env_tokens"]),
    }
