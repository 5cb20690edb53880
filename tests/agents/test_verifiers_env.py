"""verifiers' classic environments as grpokit environments: a guessing game (a MultiTurnEnv with a rubric) and a
ToolEnv, each driven by scripted policy turns through `wrap_environment`; no model and no client. Skipped where
verifiers (classic API: 0.1.9 to 0.3.x) is not installed."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("verifiers")
datasets = pytest.importorskip("datasets")

from grpokit.agents.calls import parse_hermes  # noqa: E402
from grpokit.agents.environment import wrap_environment  # noqa: E402
from grpokit.agents.verifiers_env import VerifiersFactory, classic_api, verifiers_factory  # noqa: E402
from grpokit.data.example import Example  # noqa: E402

try:
    vf = classic_api()
except ImportError as e:  # verifiers 0.4+: only the v1 stack
    pytest.skip(str(e), allow_module_level=True)


def dataset() -> Any:
    rows = [{"question": "Guess my number (1-10).", "answer": "7"}, {"question": "Guess again.", "answer": "3"}]
    return datasets.Dataset.from_list(rows)


class GuessEnv(vf.MultiTurnEnv):
    """Higher/lower until the guess is right; reward 1 for a solved game, less for each extra guess."""

    async def setup_state(self, state: Any) -> Any:
        state["guesses"] = 0
        return state

    async def env_response(self, messages: Any, state: Any, **kwargs: Any) -> Any:
        guess = str(messages[-1].content).strip()
        state["guesses"] += 1
        secret = int(state["answer"])
        if guess == str(secret):
            reply = [vf.UserMessage(content="correct")]
            state["final_env_response"] = reply
            state["solved"] = True
            return reply
        hint = "higher" if guess.isdigit() and int(guess) < secret else "lower"
        return [vf.UserMessage(content=hint)]


async def solved(state: Any) -> float:
    return 1.0 / state["guesses"] if state.get("solved") else 0.0


def guess_env(max_turns: int = 5) -> GuessEnv:
    return GuessEnv(dataset=dataset(), rubric=vf.Rubric(funcs=[solved]), max_turns=max_turns)


def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: the first
        b: the second
    """
    return a + b


async def says_five(completion: Any) -> float:
    last = completion[-1]
    return float(last.role == "assistant" and "5" in str(last.content))


def tool_env() -> Any:
    return vf.ToolEnv(tools=[add], dataset=dataset(), rubric=vf.Rubric(funcs=[says_five]), max_turns=4)


def play(factory: VerifiersFactory, example: Example, turns: list[str]) -> list[Any]:
    env = wrap_environment(factory(), parse_hermes, 1000)
    env.reset(example)
    return [env.step(t) for t in turns]


def test_guessing_game_runs_env_response_and_rubric() -> None:
    factory = verifiers_factory(guess_env)
    try:
        example = Example("Guess my number (1-10).", "7")
        low, high, right = play(factory, example, ["4", "9", "7"])
        assert (low.messages, low.done, low.reward) == ([{"role": "user", "content": "higher"}], False, None)
        assert (high.messages, high.done) == ([{"role": "user", "content": "lower"}], False)
        assert right.done and right.messages == [{"role": "user", "content": "correct"}]
        assert right.reward == pytest.approx(1 / 3)
        # each episode is fresh: a second one on the same factory (and loop) starts from zero
        (first_try,) = play(factory, Example("Guess again.", "3"), ["3"])
        assert first_try.done and first_try.reward == pytest.approx(1.0)
    finally:
        factory.close()


def test_max_turns_stop_ends_the_episode_unsolved() -> None:
    factory = verifiers_factory(guess_env, max_turns=2)
    try:
        first, second = play(factory, Example("Guess my number (1-10).", "7"), ["1", "2"])
        assert not first.done
        assert second.done and second.messages == [] and second.reward == 0.0
    finally:
        factory.close()


def test_tool_env_gets_tool_calls_from_grpokit_parser() -> None:
    factory = VerifiersFactory(tool_env(), parse_hermes)
    try:
        (schema,) = factory.tool_schemas()
        assert schema["type"] == "function" and schema["function"]["name"] == "add"
        assert set(schema["function"]["parameters"]["properties"]) == {"a", "b"}
        call = '<tool_call>{"name": "add", "arguments": {"a": 2, "b": 3}}</tool_call>'
        tool_turn, answer = play(factory, Example("What is 2+3?", "5"), [call, "The sum is 5."])
        assert not tool_turn.done and tool_turn.parsed is not None and tool_turn.parsed.attempts == 1
        (reply,) = tool_turn.messages
        assert (reply["role"], reply["name"], str(reply["content"])) == ("tool", "add", "5")
        assert answer.done and answer.reward == 1.0
    finally:
        factory.close()


def test_examples_come_from_the_env_dataset() -> None:
    factory = VerifiersFactory(guess_env())
    try:
        first, second = factory.examples()
        assert (first.prompt, first.answer) == ("Guess my number (1-10).", "7")
        assert first.messages is not None and first.messages[-1] == {"role": "user", "content": first.prompt}
        assert second.answer == "3"
        (won,) = play(factory, first, ["7"])
        assert won.reward == pytest.approx(1.0)
    finally:
        factory.close()


def test_not_a_multiturn_env_is_refused() -> None:
    with pytest.raises(ValueError, match="not a verifiers MultiTurnEnv"):
        VerifiersFactory(object())
