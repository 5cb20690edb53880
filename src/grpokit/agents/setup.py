"""A run's agent: its tools, environment, tool-call parser and chat-template chunker, built once from `agent.*`, and
what it changes in the run: the prompts (the tools shown to the model) and the engine (episodes instead of single
responses). Multi-turn is on when `agent.tools` or `agent.environment` is set, or the built-in task brings tools
(`add2-tool`)."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..config.checks import multi_turn
from ..data.chat import conversation, render_prompt
from ..data.example import Example
from ..data.registry import task_tools
from ..rewards.limits import SandboxLimits
from ..rewards.registry import load_callable
from .calls import ParsedTurn, call_parser
from .engine import EpisodeEngine
from .environment import Environment, ToolEnvironment, environment_tools, wrap_environment
from .execution import ToolExecutor
from .foreign_envs import SkyRLEnvironment, check_environment_class
from .template import MessageChunker, renders_tools, tool_instructions
from .tools import Tool


@dataclass
class Agent:
    """What a multi-turn run samples with (module docstring)."""

    cfg: Any  # the agent section
    tools: list[Tool]
    schemas: list[dict[str, Any]]  # every tool the model is shown (plain tools and the environment's)
    parse: Callable[[str], ParsedTurn]
    executor: ToolExecutor | None
    factory: Callable[[], Any] | None
    tokenizer: Any
    context: int

    @property
    def episode_tokens(self) -> int:
        """The most tokens an episode may hold, prompt included (agent.max_episode_tokens, else the context)."""
        return int(self.cfg.max_episode_tokens or self.context)

    def make_env(self) -> Environment:
        if self.factory is not None:
            made = self.factory()
            if isinstance(made, SkyRLEnvironment):  # built per episode from its row, in reset
                return made
            return wrap_environment(made, self.parse, self.cfg.tool_result_max_chars, self.executor)
        assert self.executor is not None
        return ToolEnvironment(self.parse, self.executor)

    def data_config(self, data_cfg: Any) -> Any:
        """`data.*` with the tools shown to the model: through the chat template when it renders tools (TRL's
        way), else in the system prompt with the `<tool_call>` format."""
        if not self.schemas:
            return data_cfg
        if renders_tools(self.tokenizer):
            kwargs = {**dict(data_cfg.chat_template_kwargs or {}), "tools": self.schemas}
            return dataclasses.replace(data_cfg, chat_template_kwargs=kwargs)
        system = "\n\n".join(s for s in (tool_instructions(self.schemas), data_cfg.system_prompt) if s)
        return dataclasses.replace(data_cfg, system_prompt=system)

    def wrap(self, engine: Any, data: Any, data_cfg: Any) -> EpisodeEngine:
        """`engine` running episodes over the run's examples (train and held-out)."""
        examples = {tuple(ids): ex for ids, ex in zip(data.train_tokens, data.train)}
        examples.update({tuple(ids): ex for ids, ex in zip(data.held_out_tokens, data.held_out)})
        shown = self.data_config(data_cfg)
        kwargs = dict(shown.chat_template_kwargs or {})

        def reprompt(ex: Example, extra: str) -> list[int]:  # TRL: reset()'s text joins the last user message
            messages = conversation(ex, shown.system_prompt)
            last = max(i for i, m in enumerate(messages) if m.get("role") == "user")
            messages[last] = {**messages[last], "content": f"{messages[last]['content']}{extra}"}
            text = render_prompt(self.tokenizer, dataclasses.replace(ex, messages=messages), None, kwargs)
            return self.tokenizer(text, add_special_tokens=False)["input_ids"]

        return EpisodeEngine(
            engine,
            self.make_env,
            MessageChunker(self.tokenizer, kwargs),
            examples,
            max_turns=self.cfg.max_turns,
            max_episode_tokens=self.episode_tokens,
            reprompt=reprompt,
        )

    def close(self) -> None:
        if self.executor is not None:
            self.executor.close()
        if hasattr(self.factory, "close"):
            self.factory.close()


def build_agent(cfg: Any, tokenizer: Any, sandbox: SandboxLimits | None, context: int | None) -> Agent | None:
    """The run's agent, or None for single-turn runs."""
    if not multi_turn(cfg):
        return None
    a = cfg.agent
    parse = call_parser(a.tool_format, tokenizer)
    specs = list(a.tools) or task_tools(cfg.data.task)
    factory, env_tools, env_schemas = None, [], []
    if a.environment and a.environment.startswith("verifiers:"):
        from .verifiers_env import verifiers_factory  # needs verifiers<0.4 (its classic MultiTurnEnv API)

        if specs:
            raise ValueError(
                f"agent.tools={list(a.tools)!r} with agent.environment={a.environment!r}: a verifiers environment "
                "runs its own tools; drop agent.tools"
            )
        factory = verifiers_factory(a.environment, parse)
        env_schemas = factory.tool_schemas()
    elif a.environment:
        factory = load_callable(a.environment, what="agent.environment")
        if check_environment_class(factory, a.environment) == "skyrl":  # inspected before it is built
            factory, probe = functools.partial(SkyRLEnvironment, factory), None
        else:
            probe = factory()  # TRL also probes one instance for its tool methods
        if hasattr(probe, "step") and specs:
            raise ValueError(
                f"agent.tools={list(a.tools)!r} with agent.environment={a.environment!r}, whose step() reads each "
                "turn itself: the tools would never run; drop agent.tools, or expose them as the environment's "
                "public methods (TRL's environment_factory convention)"
            )
        env_tools = environment_tools(probe) if probe is not None else []
    # the tools' modules are imported in the sandboxed worker only, which reports their schemas
    executor = ToolExecutor(specs, timeout_s=a.tool_timeout_s, sandbox=sandbox, max_chars=a.tool_result_max_chars)
    tools = list(executor.tools.values())
    schemas = [*(t.schema for t in [*tools, *env_tools]), *env_schemas]
    if not tools:
        executor.close()
    return Agent(a, tools, schemas, parse, executor if tools else None, factory, tokenizer, context or 2048)
