"""Environments from PrimeIntellect's `verifiers` library as grpokit environments (`agent.environment=verifiers:ID`).

What is adapted is verifiers' classic environment API (verifiers 0.1.x and 0.2.x at `verifiers.*`, 0.3.x at
`verifiers.legacy`): a `MultiTurnEnv` (and its subclasses `SingleTurnEnv`, `ToolEnv`, `StatefulToolEnv`, ...) whose
`rollout()` alternates a model call with `env_response(messages, state)` until one of its `@stop` conditions fires,
then scores the episode with `rubric.score_rollout(state)`. grpokit samples the policy itself, so this adapter drives
the same pieces without `rollout()` and without any model client:

- `reset(example)`: `init_state` from the example (prompt messages, answer, info), then the env's `setup_state`;
- `step(text)`: the turn becomes an assistant message (with OpenAI-style `tool_calls` read by grpokit's tool-call
  parser when the env declares tools), is recorded as a trajectory step, the stop conditions are checked
  (`is_completed`), and if the episode goes on, `env_response` answers it (through `get_prompt_messages`);
- at the end: the env's cleanup handlers (which render `state["completion"]`), then the rubric's `score_rollout`;
  its `state["reward"]` is the episode's reward.

verifiers' methods are coroutines; they run on one event loop per environment, in a background thread, so the
synchronous episode engine can call them and the env's loop-bound resources stay on one loop. verifiers 0.4's `v1`
stack (tasksets, harnesses, judges in runtimes) has no such step-level API and is not supported; see docs/agents.md.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from ..data.example import Example
from .calls import ParsedTurn
from .environment import Observation

T = TypeVar("T")

UNSUPPORTED_V1 = (
    "this verifiers version has no classic MultiTurnEnv API (verifiers 0.4 keeps only the v1 stack of tasksets and "
    "harnesses, which runs its own agents against an OpenAI-compatible server); install verifiers>=0.1.9,<0.4"
)
SUPPORTED = ">=0.1.9,<0.4"  # the verifiers versions with the classic MultiTurnEnv API


def classic_api() -> Any:
    """verifiers' classic namespace (`verifiers.legacy` in 0.3.x, `verifiers` before), or ImportError."""
    try:
        import verifiers.legacy as vf  # 0.3.x keeps the classic stack here
    except ImportError:
        try:
            import verifiers as vf
        except ImportError as e:
            raise ValueError(
                f"agent.environment=verifiers:NAME needs the verifiers package, which is not installed ({e.name}): "
                f"pip install 'verifiers{SUPPORTED}' (grpokit drives its classic MultiTurnEnv API)"
            ) from None
    if not hasattr(vf, "MultiTurnEnv"):
        raise ImportError(f"verifiers {getattr(vf, '__version__', '?')}: {UNSUPPORTED_V1}")
    return vf


class LoopThread:
    """An event loop running in a daemon thread: `run(coro)` blocks until the coroutine finishes there."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="verifiers-env-loop", daemon=True)
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def close(self) -> None:
        if self.loop.is_running():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(timeout=5)
        if not self.loop.is_running():
            self.loop.close()


def no_client(vf: Any) -> Any:
    """A verifiers `Client` that refuses every call: grpokit samples the policy, so a model call from inside the
    environment (its own `rollout()`, `get_model_response`) is a mistake to name, not to make."""

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(
            "a verifiers environment under grpokit asked its client for a model response; grpokit samples the policy "
            "itself and only drives env_response/is_completed/rubric, so environments whose env_response calls a "
            "model (user simulators, self-play) cannot run here"
        )

    names = getattr(vf.Client, "__abstractmethods__", frozenset())
    cls = type("GrpokitNoClient", (vf.Client,), {n: refuse for n in names})
    return cls(None)


def as_dict(message: Any) -> dict[str, Any]:
    """A verifiers message (pydantic in 0.1.9+, a dict before) as a plain chat-message dict without empty fields."""
    if hasattr(message, "model_dump"):
        message = message.model_dump(exclude_none=True)
    return {k: v for k, v in dict(message).items() if v is not None}


def tool_schema(tool: Any) -> dict[str, Any]:
    """A verifiers tool definition (`{name, description, parameters}`) as the OpenAI function schema grpokit shows."""
    d = as_dict(tool)
    if d.get("type") == "function" and "function" in d:
        return d
    function = {"name": d["name"], "description": d.get("description", ""), "parameters": d.get("parameters", {})}
    return {"type": "function", "function": function}


def example_input(example: Example, index: int) -> dict[str, Any]:
    """The verifiers rollout input of a grpokit example: its prompt messages, answer, info and task."""
    columns = example.columns or {}
    prompt = example.messages or columns.get("prompt")
    if not isinstance(prompt, list):
        prompt = [{"role": "user", "content": example.prompt}]
    info = columns.get("info", example.meta.get("info", {}))
    if isinstance(info, str):
        try:
            info = json.loads(info)
        except json.JSONDecodeError:
            info = {"text": info}
    row: dict[str, Any] = {
        "prompt": [dict(m) for m in prompt],
        "answer": example.answer,
        "info": dict(info or {}),
        "example_id": columns.get("example_id", example.meta.get("example_id", index)),
    }
    task = columns.get("task", example.meta.get("task"))
    if task is not None:
        row["task"] = task
    return row


class VerifiersEnvironment:
    """One episode of a classic verifiers environment in grpokit's Environment protocol (module docstring)."""

    def __init__(self, env: Any, runner: LoopThread, parse: Callable[[str], ParsedTurn] | None = None) -> None:
        self.env, self.runner, self.parse = env, runner, parse
        self.vf = classic_api()
        self.state: Any = None
        self.messages: list[Any] = []
        self.calls = 0
        self.names: dict[str, str] = {}  # tool_call_id -> tool name, to name the tool messages for the template
        self.uses_tools = bool(getattr(env, "tool_defs", None))

    # -- protocol -------------------------------------------------------------------------------------------------

    def reset(self, example: Example) -> str | None:
        self.runner.run(self.start(example_input(example, 0)))
        return None

    def step(self, text: str) -> Observation:
        if self.state is None:
            raise RuntimeError("VerifiersEnvironment.step before reset")
        return self.runner.run(self.turn(text))

    # -- the episode, on the env's loop ---------------------------------------------------------------------------

    async def start(self, row: dict[str, Any]) -> None:
        state = await self.env.init_state(row, no_client(self.vf), "grpokit-policy", None)
        try:
            state = (await self.env.setup_state(state)) or state
        except self.vf.Error as e:
            state["error"] = e
        self.state = state
        self.messages = list(state["prompt"])

    def assistant(self, text: str) -> tuple[Any, ParsedTurn | None]:
        """The turn as a verifiers assistant message, with `tool_calls` when the env has tools and a parser."""
        parsed = self.parse(text) if (self.uses_tools and self.parse is not None) else None
        calls = []
        for call in parsed.calls if parsed is not None else []:
            self.calls += 1
            call_id = f"call_{self.calls}"
            self.names[call_id] = call.name
            calls.append(self.vf.ToolCall(id=call_id, name=call.name, arguments=json.dumps(call.arguments)))
        return self.vf.AssistantMessage(content=text, tool_calls=calls or None), parsed

    def observed(self, messages: list[Any]) -> list[dict[str, Any]]:
        out = []
        for m in messages:
            d = as_dict(m)
            if d.get("role") == "tool" and "name" not in d:
                d["name"] = self.names.get(str(d.get("tool_call_id")), "tool")
            out.append(d)
        return out

    async def turn(self, text: str) -> Observation:
        state = self.state
        message, parsed = self.assistant(text)
        step = {
            "prompt": list(self.messages),
            "completion": [message],
            "response": None,
            "tokens": None,
            "reward": None,
            "advantage": None,
            "is_truncated": False,
            "trajectory_id": state["trajectory_id"],
            "extras": {},
        }
        await self.env.add_trajectory_step(state, step)
        if await self.env.is_completed(state):
            return Observation(done=True, reward=await self.finish(), parsed=parsed)
        before = len(self.messages) + 1
        try:
            history = await self.env.get_prompt_messages(state)
        except self.vf.Error as e:  # as in rollout(): an env error ends the episode through has_error
            state["error"] = e
            history = [*self.messages, message]
        self.messages = list(history)
        shown = self.observed(self.messages[before:])
        if await self.env.is_completed(state):
            return Observation(shown, True, await self.finish(), parsed)
        return Observation(shown, False, None, parsed)

    async def finish(self) -> float | None:
        """The env's cleanup (renders `state["completion"]`), then the rubric's score of the episode."""
        state = self.state
        await self.env.cleanup(state)
        rubric = self.env.rubric
        try:
            await rubric.score_rollout(state)
        except AssertionError as e:
            raise ValueError(
                f"verifiers rubric {type(rubric).__name__} cannot score one episode alone ({e}); group-level reward "
                "functions (those taking plural states/completions) need the whole group, which grpokit's "
                "environments do not see: move them into grpokit reward functions"
            ) from e
        if hasattr(rubric, "cleanup"):
            await rubric.cleanup(state)
        reward = state.get("reward")
        return None if reward is None else float(reward)


class VerifiersFactory:
    """`agent.environment`'s factory for one verifiers environment: each call is a fresh episode over the same env,
    run on one event loop. `tool_schemas()` are the env's tools, for the prompt; `parse` reads tool calls."""

    def __init__(self, env: Any, parse: Callable[[str], ParsedTurn] | None = None) -> None:
        vf = classic_api()
        if not isinstance(env, vf.MultiTurnEnv):
            raise ValueError(
                f"agent.environment: {type(env).__name__} is not a verifiers MultiTurnEnv (SingleTurnEnv, ToolEnv, "
                "StatefulToolEnv, ... are); EnvGroup and environments with their own rollout() cannot be stepped"
            )
        self.env, self.parse, self.runner = env, parse, LoopThread()

    def __call__(self) -> VerifiersEnvironment:
        return VerifiersEnvironment(self.env, self.runner, self.parse)

    def tool_schemas(self) -> list[dict[str, Any]]:
        return [tool_schema(t) for t in getattr(self.env, "tool_defs", None) or []]

    def examples(self, n: int = -1, eval_split: bool = False) -> list[Example]:
        """The env's own dataset (train, or eval) as grpokit examples, with the row kept as `columns`."""
        data = self.env.get_eval_dataset(n=n) if eval_split else self.env.get_dataset(n=n)
        out = []
        for i, row in enumerate(data):
            prompt = [as_dict(m) for m in row["prompt"]]
            users = [m for m in prompt if m.get("role") == "user"]
            text = users[-1]["content"] if users else ""
            meta = {k: row[k] for k in ("info", "task", "example_id") if k in row}
            meta.setdefault("example_id", i)
            columns = {**dict(row), "prompt": prompt}
            out.append(Example(str(text), str(row.get("answer", "")), meta, columns=columns, messages=prompt))
        return out

    def close(self) -> None:
        self.runner.close()


def verifiers_factory(spec: Any, parse: Callable[[str], ParsedTurn] | None = None, **env_args: Any) -> VerifiersFactory:
    """The factory of `agent.environment=verifiers:ID`: `spec` is an installed environment's id (loaded with
    `verifiers.load_environment(ID, **env_args)`), a MultiTurnEnv instance, or a callable returning one."""
    vf = classic_api()
    if isinstance(spec, str):
        env = vf.load_environment(spec.removeprefix("verifiers:"), **env_args)
    elif isinstance(spec, vf.MultiTurnEnv):
        env = spec
    else:
        env = spec(**env_args)
    return VerifiersFactory(env, parse)
