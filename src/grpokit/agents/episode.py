"""One episode: the policy's turns interleaved with the environment's messages, as token ids with a loss mask.

`ids` are the tokens after the prompt: each policy turn exactly as sampled (mask 1, with the sampler's log-probs)
and each environment chunk as the template encodes it (mask 0, never trained on). The episode ends with the
policy's answer (`answer`), or is cut: by `agent.max_turns` (`turn_limit`), by the context (`context_limit`: the next
chunk plus a full turn would not fit in `agent.max_episode_tokens`), or by a turn that reached
`rollout.max_new_tokens` without its EOS (`length_limit`). A cut episode is `truncated`, like a cut response. An
episode whose environment's step raised (`env_error`) has reward NaN: a failed sample, left out as reward failures
are, its error kept in the record.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..common.safe_text import safe_text
from ..rewards.callers import environment_snapshot
from .environment import Environment, Observation

ENDINGS = ("answer", "turn_limit", "context_limit", "length_limit", "env_error")


@dataclass
class Episode:
    """The state and record of one episode (see the module docstring)."""

    prompt: list[int]
    env: Environment
    group: int
    ids: list[int] = field(default_factory=list)
    mask: list[int] = field(default_factory=list)
    logp: list[float] = field(default_factory=list)
    turns: list[dict[str, Any]] = field(default_factory=list)
    ended_by: str = ""
    reward: float | None = None
    final_text: str = ""
    attempts: int = 0
    parse_failures: int = 0
    calls: int = 0
    tool_errors: int = 0
    tool_timeouts: int = 0
    error: str | None = None  # what the environment's step raised (ended_by "env_error")

    @property
    def done(self) -> bool:
        return bool(self.ended_by)

    @property
    def policy_turns(self) -> int:
        return sum(1 for t in self.turns if t["role"] == "assistant")

    def add_policy_turn(self, ids: list[int], logp: list[float], text: str) -> None:
        self.ids += ids
        self.mask += [1] * len(ids)
        self.logp += logp
        self.final_text = text
        self.turns.append({"role": "assistant", "content": text, "tokens": len(ids), "calls": [], "parse_error": None})

    def add_observation(self, obs: Observation) -> None:
        """Count what the last turn asked of the tools and what they answered; add the environment's reward."""
        if obs.parsed is not None:
            self.attempts += obs.parsed.attempts
            self.parse_failures += obs.parsed.failures
            turn = self.turns[-1]
            turn["calls"] = [{"name": c.name, "arguments": c.arguments} for c in obs.parsed.calls]
            turn["parse_error"] = "; ".join(obs.parsed.errors) or None
        self.calls += len(obs.results)
        self.tool_errors += sum(r.status == "error" for r in obs.results)
        self.tool_timeouts += sum(r.status == "timeout" for r in obs.results)
        if obs.reward is not None:
            self.reward = (self.reward or 0.0) + obs.reward

    def add_chunk(self, ids: list[int], messages: list[dict[str, Any]], statuses: list[str]) -> None:
        self.ids += ids
        self.mask += [0] * len(ids)
        self.logp += [0.0] * len(ids)
        for i, m in enumerate(messages):
            status = statuses[i] if i < len(statuses) else ("error" if m.get("name") == "error" else "ok")
            entry = {"role": m.get("role", "tool"), "content": str(m.get("content", ""))}
            if entry["role"] == "tool":
                entry.update(name=m.get("name", ""), status=status)
            self.turns.append(entry)

    def fail(self, message: str) -> None:
        """The environment's step raised: the episode ends as a failure (reward NaN), the run goes on."""
        self.error, self.reward = safe_text(message, limit=500), float("nan")
        self.end("env_error")

    def end(self, how: str) -> None:
        assert how in ENDINGS, how
        self.ended_by = how

    def record(self) -> dict[str, Any]:
        """The episode as logged in samples.jsonl and shown in the report."""
        policy = sum(self.mask)
        instance = getattr(self.env, "instance", None)  # a user's environment (agent.environment); plain tools: none
        return {
            "ended_by": self.ended_by,
            "policy_tokens": policy,
            "env_tokens": len(self.ids) - policy,
            "span": len(self.ids),
            "attempts": self.attempts,
            "parse_failures": self.parse_failures,
            "calls": self.calls,
            "tool_errors": self.tool_errors,
            "tool_timeouts": self.tool_timeouts,
            "env_reward": self.reward,
            **({"env_error": self.error} if self.error is not None else {}),
            "turns": self.turns,
            # the environment's JSON-valued attributes at the end, which TRL-style rewards read as `environments`
            **({"environment": environment_snapshot(instance)} if instance is not None else {}),
        }
