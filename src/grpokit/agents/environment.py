"""Environments: what answers the policy between its turns.

The protocol is two methods a user writes in a few lines:

    class Guess:                                   # agent.environment=my_env.py:Guess
        def reset(self, example):                  # a fresh episode; may return text for the first user message
            self.secret, self.tries = int(example.answer), 0
        def step(self, text):                      # the policy's turn -> (observation, done, reward)
            self.tries += 1
            done = text.strip() == str(self.secret)
            return ("correct" if done else "higher" if ...), done, float(done)

`step` returns an `Observation` or a tuple (observation, done, reward): the observation is a string (a user
message), a list of chat messages, or None; the reward (None: no reward from the environment) is added to the reward
functions' sum for the episode (rewards of several steps add up). One instance serves one episode.

Environments written for TRL drop in too: TRL's `environment_factory` convention (a class whose `reset(**row)` may
return text appended to the first user message, whose public methods are the tools, and whose optional
`get_reward()` scores the finished episode). `ToolEnvironment` is the environment of plain tools (`agent.tools`).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..data.example import Example
from ..rewards.signature import example_columns
from .calls import ParsedTurn, ToolCall, read_calls
from .execution import ToolExecutor, ToolResult, clip, result_text
from .tools import Tool, tool_from_function


@dataclass
class Observation:
    """The environment's answer to one policy turn: messages to append, whether the episode is over, its reward;
    and what the turn asked of the tools (for the episode signals)."""

    messages: list[dict[str, Any]] = field(default_factory=list)
    done: bool = False
    reward: float | None = None
    parsed: ParsedTurn | None = None
    results: list[ToolResult] = field(default_factory=list)


class EpisodeFailure(Exception):
    """A user environment's step raised during an episode: that episode fails (the engine records it), the run
    goes on."""


def awaited(value: Any) -> Any:
    """`value`, or what it resolves to when it is awaitable (an async reset, step or tool), run to completion here,
    each on its own event loop."""
    if not inspect.isawaitable(value):
        return value

    async def wait() -> Any:
        return await value

    return asyncio.run(wait())


def stepped(instance: Any, text: str) -> Any:
    """`instance.step(text)`, awaited when async; EpisodeFailure when it raises."""
    try:
        return awaited(instance.step(text))
    except Exception as e:
        raise EpisodeFailure(f"{type(instance).__name__}.step raised {type(e).__name__}: {e}") from e


class Environment(Protocol):
    """One episode's environment (see the module docstring)."""

    def reset(self, example: Example) -> str | None: ...

    def step(self, text: str) -> Observation: ...


def tool_messages(parsed: ParsedTurn, run: Callable[[ToolCall], ToolResult]) -> tuple[list[dict], list[ToolResult]]:
    """Run a turn's well-formed calls and answer each, and each malformed one, with a tool message."""
    results = [run(c) for c in parsed.calls]
    messages = [{"role": "tool", "name": r.name, "content": r.text} for r in results]
    messages += [{"role": "tool", "name": "error", "content": f"Error: {e}"} for e in parsed.errors]
    return messages, results


class ToolEnvironment:
    """Plain tools: a turn with tool calls gets their results back; a turn without one is the final answer."""

    def __init__(self, parse: Callable[[str], ParsedTurn], executor: ToolExecutor) -> None:
        self.parse, self.executor = parse, executor

    def reset(self, example: Example) -> str | None:
        return None

    def step(self, text: str) -> Observation:
        parsed = read_calls(self.parse, text)  # never raises: a failure is counted
        if parsed.attempts == 0:
            return Observation(done=True, parsed=parsed)
        messages, results = tool_messages(parsed, self.executor.run)
        return Observation(messages, False, None, parsed, results)


def public_methods(instance: Any) -> list[Callable[..., Any]]:
    """The tools of a TRL-convention environment: its public methods other than reset and get_reward."""
    names = [n for n, _ in inspect.getmembers(type(instance), predicate=inspect.isfunction)]
    return [getattr(instance, n) for n in names if not n.startswith("_") and n not in ("reset", "get_reward")]


class FactoryEnvironment:
    """An environment in TRL's `environment_factory` convention (module docstring). Its methods run in the trainer's
    process, where the instance's state lives (as in TRL); plain `agent.tools` run in the sandbox."""

    def __init__(
        self,
        instance: Any,
        parse: Callable[[str], ParsedTurn],
        max_chars: int,
        tools: ToolExecutor | None = None,
    ) -> None:
        self.instance, self.parse, self.max_chars, self.tools = instance, parse, max_chars, tools
        self.scores = hasattr(instance, "get_reward")  # then an episode it does not score is a failure
        self.methods = {m.__name__: m for m in public_methods(instance)}

    def reset(self, example: Example) -> str | None:
        out = awaited(self.instance.reset(**example_columns(example)))
        return None if out is None else str(out)

    def run(self, call: ToolCall) -> ToolResult:
        fn = self.methods.get(call.name)
        if fn is None and self.tools is not None and call.name in self.tools.tools:
            return self.tools.run(call)  # a plain agent.tools function: sandboxed
        if fn is None:
            known = ", ".join(sorted(self.methods)) or "none"
            return ToolResult(call.name, "error", f"Error: there is no tool named {call.name!r} (tools: {known})")
        try:
            return ToolResult(call.name, "ok", clip(result_text(awaited(fn(**call.arguments))), self.max_chars))
        except Exception as e:
            return ToolResult(call.name, "error", clip(f"Error: {type(e).__name__}: {e}", self.max_chars))

    def step(self, text: str) -> Observation:
        parsed = read_calls(self.parse, text)  # never raises: a failure is counted
        if parsed.attempts == 0:
            reward = awaited(self.instance.get_reward()) if hasattr(self.instance, "get_reward") else None
            return Observation(done=True, reward=None if reward is None else float(reward), parsed=parsed)
        messages, results = tool_messages(parsed, self.run)
        return Observation(messages, False, None, parsed, results)


class ProtocolEnvironment:
    """A grpokit-protocol environment (`reset(example)`, `step(text)`): its step's tuple read as an Observation."""

    def __init__(self, instance: Any) -> None:
        self.instance = instance

    def reset(self, example: Example) -> str | None:
        out = awaited(self.instance.reset(example))
        return None if out is None else str(out)

    def step(self, text: str) -> Observation:
        out = stepped(self.instance, text)
        if isinstance(out, Observation):
            return out
        if not (isinstance(out, tuple) and len(out) == 3):
            raise ValueError(
                f"agent.environment: {type(self.instance).__name__}.step returned {type(out).__name__}; return "
                "(observation, done, reward) or an Observation"
            )
        obs, done, reward = out
        if obs is None:
            messages = []
        elif isinstance(obs, str):
            messages = [{"role": "user", "content": obs}]
        else:
            messages = [dict(m) for m in obs]
        return Observation(messages, bool(done), None if reward is None else float(reward))


def environment_tools(instance: Any) -> list[Tool]:
    """The tools a TRL-convention environment exposes (their schemas go into the prompt); none for grpokit ones."""
    if hasattr(instance, "step"):
        return []
    return [tool_from_function(m) for m in public_methods(instance)]


def wrap_environment(
    instance: Any, parse: Callable[[str], ParsedTurn], max_chars: int, tools: ToolExecutor | None = None
) -> Environment:
    """The Environment of a user's instance: grpokit's protocol when it has `step`, else TRL's convention (with the
    plain `tools` beside its methods, as TRL's `tools + environment methods`)."""
    if not callable(getattr(instance, "reset", None)):
        raise ValueError(
            f"agent.environment: {type(instance).__name__} has no reset method; an environment needs reset() "
            "and either step(text) (grpokit) or public tool methods (TRL's environment_factory)"
        )
    if hasattr(instance, "step"):
        return ProtocolEnvironment(instance)
    return FactoryEnvironment(instance, parse, max_chars, tools)
