"""Environments of other projects, checked before they run: a class is inspected before it is built.

- **SkyRL** (`skyrl_gym`'s `BaseTextEnv` subclasses, or a constructor taking `env_config, extras`): built per
  episode as SkyRL's generator builds it, `cls(env_config=None, extras=...)` with extras the row's columns other
  than prompt and env_class (its `reward_spec`; made from the answer as `{"method": "rule", "ground_truth": ...}`
  where the row has none), then `init(prompt)` and `step(text) -> {"observations", "reward", "done", ...}`. Its
  step's reward scores the episode.
- **async** `reset`/`step` (and async tool methods) are awaited, each call on its own event loop.
- **OpenRLHF**'s `AgentInstance` (`reset(states)` / `step(states)` returning dicts of rewards and feedback text) is
  refused in one line: grpokit does not drive it.
- Any other class whose constructor needs arguments is refused in one line naming them: grpokit builds one
  instance per episode with none, as TRL's environment_factory does.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from ..common.safe_text import safe_text
from ..data.example import Example
from ..rewards.signature import example_columns
from .environment import Observation, awaited, stepped


def _names(fn: Any) -> list[str]:
    try:
        return list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return []


def environment_kind(cls: Any) -> str:
    """"skyrl", "openrlhf" or "" (grpokit's protocol or TRL's environment_factory, told apart once built)."""
    bases = {b.__name__ for b in inspect.getmro(cls)} if inspect.isclass(cls) else set()
    if "BaseTextEnv" in bases or {"env_config", "extras"} <= set(_names(cls)):
        return "skyrl"
    if "AgentInstanceBase" in bases or "states" in _names(getattr(cls, "step", None)):
        return "openrlhf"
    return ""


def check_environment_class(cls: Any, spec: str) -> str:
    """The class's kind (`environment_kind`), or ValueError in one line naming what grpokit cannot give it."""
    kind = environment_kind(cls)
    name = getattr(cls, "__qualname__", type(cls).__name__)
    if kind == "openrlhf":
        raise ValueError(
            f"agent.environment={spec!r}: {name} is an OpenRLHF AgentInstance (reset(states)/step(states) returning "
            "rewards and environment_feedback), which grpokit does not drive: write reset(example) and step(text) -> "
            "(observation, done, reward) (docs/agents.md), awaited when async"
        )
    if kind == "skyrl" or not inspect.isclass(cls):
        return kind
    needs = [
        p.name
        for p in inspect.signature(cls).parameters.values()
        if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    ]
    if needs:
        raise ValueError(
            f"agent.environment={spec!r}: {name}({', '.join(needs)}) needs arguments, but grpokit builds one instance "
            "per episode with none (as TRL's environment_factory): give them defaults, or read the row in reset()"
        )
    return kind


class SkyRLEnvironment:
    """A SkyRL `BaseTextEnv` class run as grpokit's Environment (module docstring); its step scores the episode."""

    scores = True

    def __init__(self, cls: Callable[..., Any], env_config: Any = None) -> None:
        self.cls, self.env_config, self.instance = cls, env_config, None

    def reset(self, example: Example) -> str | None:
        row = example_columns(example)
        extras = {k: v for k, v in row.items() if k not in ("prompt", "env_class")}
        if "reward_spec" not in extras and example.answer:
            extras["reward_spec"] = {"method": "rule", "ground_truth": example.answer}
        try:
            self.instance = self.cls(env_config=self.env_config, extras=extras)
        except Exception as e:
            raise ValueError(
                f"agent.environment: {getattr(self.cls, '__qualname__', self.cls)}(env_config, extras) raised "
                f"{type(e).__name__}: {safe_text(str(e), limit=200)}, given extras with {sorted(extras)} (the row's "
                "columns, as SkyRL passes them): add the column it reads (SkyRL's reward_spec holds ground_truth)"
            ) from None
        prompt = example.messages or [{"role": "user", "content": example.prompt}]
        out = awaited(self.instance.init([dict(m) for m in prompt]))
        first = out[0] if isinstance(out, tuple) else out
        if first is not None and list(first) != list(prompt):
            raise ValueError(
                f"agent.environment: {type(self.instance).__name__}.init() rewrote the prompt; grpokit keeps the "
                "row's prompt (an init that returns it unchanged, as BaseTextEnv's does, runs)"
            )
        return None

    def step(self, text: str) -> Observation:
        assert self.instance is not None, "reset() first"
        out = stepped(self.instance, text)
        if not isinstance(out, dict) or "done" not in out:
            raise ValueError(
                f"agent.environment: {type(self.instance).__name__}.step returned {type(out).__name__}, not SkyRL's "
                "BaseTextEnvStepOutput (a dict of observations, reward, done, metadata)"
            )
        messages = [dict(m) for m in out.get("observations") or []]
        reward = out.get("reward")
        return Observation(messages, bool(out["done"]), None if reward is None else float(reward))
