"""Environments checked before they run (issue 48 item 3): a class is inspected before it is built (SkyRL's
BaseTextEnv built per episode from its row's columns, with reward_spec; a constructor grpokit cannot satisfy named
in one line; OpenRLHF's AgentInstance refused), async reset/step awaited, an episode the environment did not score
stops the run, a step that raises fails its episode only, and verifiers missing is one line naming its versions."""

from __future__ import annotations

import importlib.util
import math
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from grpokit.agents.calls import parse_hermes
from grpokit.agents.engine import EpisodeEngine
from grpokit.agents.environment import wrap_environment
from grpokit.agents.episode import Episode
from grpokit.agents.foreign_envs import SkyRLEnvironment, check_environment_class
from grpokit.data.example import Example

SKYRL_ENV = Path(__file__).parents[1] / "fixtures" / "conventions" / "skyrl" / "gsm8k_env.py"


def _gsm8k_env() -> type:
    """SkyRL's GSM8kEnv (vendored byte for byte; it imports skyrl_gym's BaseTextEnv)."""
    pytest.importorskip("skyrl_gym")
    spec = importlib.util.spec_from_file_location("skyrl_gsm8k_env_fixture", SKYRL_ENV)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.GSM8kEnv


def _engine(make: Any = None) -> EpisodeEngine:
    """An episode engine for respond()/output() alone: no sampling, no chunk to encode (the episodes end)."""
    return EpisodeEngine(None, make, types.SimpleNamespace(tokenizer=None), {}, max_turns=2, max_episode_tokens=64)


def _answered(env: Any, text: str) -> Episode:
    e = Episode(prompt=[1], env=env, group=0)
    e.add_policy_turn([2], [0.0], text)
    return e


def test_skyrl_env_is_built_per_episode_from_its_row() -> None:
    """GSM8kEnv(env_config, extras) asserts extras["reward_spec"]["ground_truth"]: it is inspected (not built
    with no arguments, which raised), then built per episode from the row (SkyRL's reward_spec column, or made from
    the answer), and its step's reward scores the episode."""
    cls = _gsm8k_env()
    assert check_environment_class(cls, "gsm8k_env.py:GSM8kEnv") == "skyrl"
    row = {"prompt": [{"role": "user", "content": "q"}], "env_class": "gsm8k"}
    row["reward_spec"] = {"method": "rule", "ground_truth": "72"}
    scored = []
    for ex, text in [(Example("q", "", columns=row), "so #### 72"), (Example("q", "72"), "#### 71")]:
        env = SkyRLEnvironment(cls)
        assert env.reset(ex) is None
        e = _answered(env, text)
        assert _engine().respond(e, 8) is False and e.ended_by == "answer"
        scored.append(e.reward)
    assert scored == [1.0, 0.0]
    with pytest.raises(ValueError, match=r"GSM8kEnv\(env_config, extras\) raised AssertionError: reward_spec field"):
        SkyRLEnvironment(cls).reset(Example("q", "", columns={"prompt": "q"}))


def test_a_constructor_grpokit_cannot_satisfy_is_named() -> None:
    class Board:
        def __init__(self, size, seed=0):
            self.size = size

    with pytest.raises(ValueError, match=r"agent.environment='b.py:Board': .*Board\(size\) needs arguments"):
        check_environment_class(Board, "b.py:Board")


def test_openrlhf_agent_instance_is_refused() -> None:
    """OpenRLHF's examples/python/agent_func.py shape: async reset(states)/step(states) returning dicts."""

    class AgentInstance:
        def __init__(self, *args, **kwargs):
            self.step_idx = 0

        async def reset(self, states: dict, **kwargs):
            return {"observation": states["observation"]}

        async def step(self, states: dict, **kwargs) -> dict[str, Any]:
            return {"rewards": 1.0, "environment_feedback": "", "done": True}

    with pytest.raises(ValueError, match=r"AgentInstance is an OpenRLHF AgentInstance .* grpokit does not drive"):
        check_environment_class(AgentInstance, "agent_func.py:AgentInstance")


class AsyncGuess:
    """grpokit's protocol, async: the coroutine used to be appended to the prompt as text."""

    async def reset(self, example: Example) -> str:
        self.secret = example.answer
        return " (guess a digit)"

    async def step(self, text: str) -> tuple[str | None, bool, float]:
        return None, True, float(text.strip() == self.secret)


class AsyncCounter:
    """TRL's environment_factory shape, async: reset(**row), a tool method, get_reward."""

    async def reset(self, **row: Any) -> None:
        self.count = 0

    async def increment(self, by: int) -> str:
        """Add to the count.

        Args:
            by: how much to add
        """
        self.count += by
        return f"count is now {self.count}"

    async def get_reward(self) -> float:
        return float(self.count == 3)


def test_async_reset_and_step_are_awaited() -> None:
    ex = Example("Guess", "7")
    env = wrap_environment(AsyncGuess(), parse_hermes, 1000)
    assert env.reset(ex) == " (guess a digit)"
    obs = env.step(" 7")
    assert obs.done and obs.reward == 1.0
    trl = wrap_environment(AsyncCounter(), parse_hermes, 1000)
    assert trl.reset(ex) is None
    tool = trl.step('<tool_call>{"name": "increment", "arguments": {"by": 3}}</tool_call>')
    assert tool.messages == [{"role": "tool", "name": "increment", "content": "count is now 3"}]
    assert trl.step("done").reward == 1.0


def test_an_episode_the_environment_did_not_score_stops_the_run() -> None:
    """A SkyRL env (it scores its episodes) whose step gives reward None, and a TRL env whose get_reward gives
    None: the first episode stops the run, not a silent fallback to the reward functions."""
    pytest.importorskip("skyrl_gym")
    from skyrl_gym.envs.base_text_env import BaseTextEnv

    class Silent(BaseTextEnv):
        def __init__(self, env_config: Any = None, extras: dict[str, Any] | None = None):
            super().__init__()

        def step(self, action: str) -> dict[str, Any]:
            return {"observations": [], "reward": None, "done": True, "metadata": {}}

    class Unsure(AsyncCounter):
        async def get_reward(self) -> None:
            return None

    skyrl = SkyRLEnvironment(Silent)
    skyrl.reset(Example("q", "1"))
    trl = wrap_environment(Unsure(), parse_hermes, 1000)
    for env in (skyrl, trl):
        with pytest.raises(ValueError, match=r"ended an episode without scoring it .* the run stops"):
            _engine().respond(_answered(env, "done"), 8)


class Flaky:
    def reset(self, example: Example) -> None:
        pass

    def step(self, text: str) -> tuple[None, bool, float]:
        if "boom" in text:
            raise RuntimeError("the board is gone")
        return None, True, 1.0


def test_a_step_that_raises_fails_that_episode_only() -> None:
    eng = _engine()
    bad, good = _answered(wrap_environment(Flaky(), parse_hermes, 100), "boom"), _answered(Flaky(), "ok")
    good.env = wrap_environment(Flaky(), parse_hermes, 100)
    assert eng.respond(bad, 8) is False and eng.respond(good, 8) is False
    assert bad.ended_by == "env_error" and math.isnan(bad.reward) and good.reward == 1.0
    assert bad.record()["env_error"] == "Flaky.step raised RuntimeError: the board is gone"
    with pytest.raises(ValueError, match=r"every episode's step raised; the first: Flaky.step raised RuntimeError"):
        eng.output([bad], 0.0)


def test_verifiers_missing_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    from grpokit.agents.verifiers_env import verifiers_factory

    monkeypatch.setitem(sys.modules, "verifiers", None)  # not importable, as where it is not installed
    monkeypatch.setitem(sys.modules, "verifiers.legacy", None)
    with pytest.raises(ValueError, match=r"needs the verifiers package, which is not installed .*>=0.1.9,<0.4"):
        verifiers_factory("verifiers:gsm8k")
