"""Whatever the policy writes is data (issue 38): the tool-call parser, the chat-template chunker and an environment
step, fed deep nesting, huge strings, invalid UTF-8 (lone surrogates), control characters and random JSON, give
counted parse failures that go back to the model as tool messages, never an exception out of the episode loop.

Real parts throughout: `parse_hermes`, the SmolLM2 tokenizer's ChatML chunker, TRL-convention and grpokit-protocol
environments stepped by `EpisodeEngine.respond` (the engine's own step), and the episode's record serialised as
samples.jsonl writes it. Example counts are bounded and the generation derandomized (`GRPOKIT_FUZZ_SCALE=N`: N
times the examples, drawn at random)."""

from __future__ import annotations

import json
import os
import re
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grpokit.agents.calls import CLOSE_TAG, MAX_DEPTH, MAX_NAME_CHARS, OPEN_TAG, parse_hermes
from grpokit.agents.engine import EpisodeEngine
from grpokit.agents.environment import ToolEnvironment, wrap_environment
from grpokit.agents.episode import Episode
from grpokit.agents.execution import ToolExecutor
from grpokit.agents.template import MessageChunker
from grpokit.agents.tools import tool_from_function

SCALE = int(os.environ.get("GRPOKIT_FUZZ_SCALE", "1"))
MAX_ERROR_CHARS = 400  # an error message the model reads back never echoes a huge input


def fuzz(n: int) -> settings:
    return settings(
        max_examples=n * SCALE,
        deadline=None,
        derandomize=SCALE == 1,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


def call(arguments: str, name: str = '"echo"') -> str:
    return f'{OPEN_TAG}{{"name": {name}, "arguments": {arguments}}}{CLOSE_TAG}'


# ------------------------------------------------------------------------------------------------ hostile turns

depth = st.integers(MAX_DEPTH + 1, 3000)
deep_objects = depth.map(lambda n: call('{"a": ' * n + "1" + "}" * n))
deep_lists = depth.map(lambda n: call("[" * n + "]" * n))
deep_unclosed = depth.map(lambda n: call("[" * n))  # not JSON: never closed
deep_in_a_string = depth.map(lambda n: call(json.dumps('{"a": ' * n + "1" + "}" * n)))  # arguments given as a string
deep_call = depth.map(lambda n: OPEN_TAG + "[" * n + "]" * n + CLOSE_TAG)
huge_name = st.integers(MAX_NAME_CHARS + 1, 2_000_000).map(lambda n: call("{}", json.dumps("n" * n)))
huge_number = st.integers(4301, 100_000).map(lambda n: call('{"x": ' + "7" * n + "}"))  # past int's digit limit
surrogate = st.sampled_from(["\\ud800", "\\udfff", "\\udc80x", "a\\ud83d"])  # lone halves, as JSON escapes
surrogate_name = surrogate.map(lambda s: call("{}", f'"echo{s}"'))
surrogate_argument = surrogate.map(lambda s: call(f'{{"text": "{s}"}}'))
surrogate_key = surrogate.map(lambda s: call(f'{{"{s}": 1}}'))
# a turn that opens a call and is sure to fail: (text, what the failure says)
MALFORMED = {
    "deep object": (deep_objects, "nested deeper than"),
    "deep list": (deep_lists, "nested deeper than"),
    "deep unclosed": (deep_unclosed, "not valid JSON|nested deeper than"),
    "deep string arguments": (deep_in_a_string, "nested deeper than"),
    "deep call": (deep_call, "nested deeper than"),
    "huge name": (huge_name, "characters long"),
    "surrogate in the name": (surrogate_name, "lone surrogate"),
    "surrogate in an argument": (surrogate_argument, "lone surrogate"),
    "surrogate in a key": (surrogate_key, "lone surrogate"),
}

controls = st.text(st.characters(codec="utf-8", max_codepoint=0x9F, categories=["Cc"]), min_size=1, max_size=50)
invalid_utf8 = st.binary(min_size=1, max_size=200).map(lambda b: (b + b"\xff\xc3").decode("utf-8", "surrogateescape"))
replaced_utf8 = st.binary(min_size=1, max_size=200).map(lambda b: (b + b"\xff").decode("utf-8", "replace"))
huge_text = st.tuples(st.text(min_size=1, max_size=8), st.integers(50_000, 500_000)).map(lambda t: t[0] * t[1])
json_values = st.recursive(
    st.none() | st.booleans() | st.floats() | st.integers() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=30,
)
random_call = json_values.map(lambda v: OPEN_TAG + json.dumps(v) + CLOSE_TAG)
pieces = st.one_of(
    st.text(),
    controls,
    invalid_utf8,
    replaced_utf8,
    huge_text,
    random_call,
    huge_number,
    st.sampled_from([OPEN_TAG, CLOSE_TAG, "{", "}", "[", '"', "\\", "\x00", "\x1b]52;c;SGVsbG8=\x07", "\x1b[2J"]),
    *(strategy for strategy, _ in MALFORMED.values()),
)
turns = st.lists(pieces, min_size=1, max_size=6).map("".join)


def check_parsed(parsed: Any) -> None:
    """A parsed turn's invariants: each block it opened is a call or one counted failure, and no error message
    echoes a huge input."""
    assert parsed.attempts == len(parsed.calls) + parsed.failures
    assert all(len(e) <= MAX_ERROR_CHARS for e in parsed.errors), [e[:100] for e in parsed.errors]
    for c in parsed.calls:  # what is logged with the episode serialises
        json.dumps({"name": c.name, "arguments": c.arguments}).encode("utf-8")


# ------------------------------------------------------------------------------------------------ the parser


@pytest.mark.parametrize("kind", sorted(MALFORMED))
def test_each_hostile_call_is_one_counted_failure(kind: str) -> None:
    strategy, says = MALFORMED[kind]

    @fuzz(8)
    @given(strategy, st.text(max_size=20), st.text(max_size=20))
    def run(block: str, before: str, after: str) -> None:
        text = before.replace(OPEN_TAG[:2], "") + block + after.replace(OPEN_TAG[:2], "")
        parsed = parse_hermes(text)
        check_parsed(parsed)
        assert parsed.attempts == 1 and parsed.failures == 1 and not parsed.calls
        assert re.search(says, parsed.errors[0]), parsed.errors[0][:200]

    run()


@fuzz(150)
@given(turns)
def test_the_parser_never_raises_on_any_turn(text: str) -> None:
    check_parsed(parse_hermes(text))


def test_a_parser_that_raises_is_a_counted_failure_of_the_step() -> None:
    """An environment's parser never raises out of its step, even a parser of the user's or a tokenizer's own."""

    def hostile(text: str) -> Any:
        raise RecursionError("maximum recursion depth exceeded while decoding a JSON object")

    executor = ToolExecutor([tool_from_function(EchoTools().echo)], sandbox=None)  # never started: no call is read
    for env in (wrap_environment(EchoTools(), hostile, 1000), ToolEnvironment(hostile, executor)):
        obs = env.step("<tool_call>{}</tool_call>")
        assert not obs.done and obs.parsed.attempts == 1 and obs.parsed.failures == 1
        assert obs.messages == [
            {
                "role": "tool",
                "name": "error",
                "content": "Error: the tool call could not be read (RecursionError: maximum recursion depth exceeded "
                "while decoding a JSON object)",
            }
        ]


# ------------------------------------------------------------------------------------------------ the chunker


@fuzz(60)
@given(st.lists(pieces, min_size=1, max_size=3).map("".join), st.sampled_from(["user", "tool"]))
def test_the_chunker_encodes_any_text_an_environment_echoes(smollm_tokenizer: Any, text: str, role: str) -> None:
    chunker = MessageChunker(smollm_tokenizer)
    message = {"role": role, "content": text[:20_000], **({"name": "echo"} if role == "tool" else {})}
    ids = chunker.ids([message])
    assert ids and all(isinstance(i, int) for i in ids)
    assert "\ufffd" in smollm_tokenizer.decode(ids) or not any("\ud800" <= ch <= "\udfff" for ch in text[:20_000])


# ------------------------------------------------------------------------------------------------ an environment step


class EchoTools:
    """A TRL-convention environment: its public methods are the tools; `echo` returns its text."""

    def reset(self, **row: Any) -> None:
        return None

    def echo(self, text: str = "") -> str:
        """Say it back.

        Args:
            text: what to say.
        """
        return text


class Echo:
    """A grpokit-protocol environment that sends the policy's turn back as the next user message."""

    def reset(self, example: Any) -> None:
        return None

    def step(self, text: str) -> tuple[str, bool, None]:
        return text[:5000], False, None


def step_once(tok: Any, env: Any, text: str) -> Episode:
    """One environment step of the engine (`EpisodeEngine.respond`) after a policy turn reading `text`."""
    engine = EpisodeEngine(None, lambda: env, MessageChunker(tok), {}, max_turns=4, max_episode_tokens=10**9)
    episode = Episode(prompt=[1, 2, 3], env=env, group=0)
    episode.add_policy_turn([5, 6], [-0.1, -0.2], text)
    engine.respond(episode, max_new_tokens=8)
    return episode


@fuzz(60)
@given(turns)
def test_an_environment_step_never_raises_and_counts_each_failure(smollm_tokenizer: Any, text: str) -> None:
    tools = wrap_environment(EchoTools(), parse_hermes, 1000)
    e = step_once(smollm_tokenizer, tools, text)
    expected = parse_hermes(text)
    assert e.attempts == expected.attempts and e.parse_failures == expected.failures
    if expected.attempts:  # each call and each failure answered with a tool message, and the episode goes on
        answers = [t for t in e.turns if t["role"] == "tool"]
        assert not e.done and len(answers) == expected.attempts
        assert sum(t["name"] == "error" for t in answers) == expected.failures
    else:
        assert e.ended_by == "answer"
    record = json.dumps(e.record())  # samples.jsonl
    record.encode("utf-8")
    echo = step_once(smollm_tokenizer, wrap_environment(Echo(), parse_hermes, 1000), text)
    json.dumps(echo.record()).encode("utf-8")
    assert not echo.done and echo.turns[-1]["role"] == "user"


def test_a_deeply_nested_call_is_answered_with_an_error_message(smollm_tokenizer: Any) -> None:
    """The probe of issue 38: arguments nested 1,000 levels deep made `parse_hermes` raise RecursionError out of
    the episode loop. Now the turn gets one tool message saying why, and the episode goes on."""
    text = "Let me call it. " + call('{"a": ' * 1000 + "1" + "}" * 1000)
    e = step_once(smollm_tokenizer, wrap_environment(EchoTools(), parse_hermes, 1000), text)
    assert (e.attempts, e.parse_failures, e.calls) == (1, 1, 0)
    assert not e.done and e.turns[-1] == {
        "role": "tool",
        "content": f"Error: the tool call: nested deeper than {MAX_DEPTH} levels",
        "name": "error",
        "status": "error",
    }
    assert e.turns[-2]["parse_error"] == f"the tool call: nested deeper than {MAX_DEPTH} levels"
    assert sum(e.mask) == 2 and len(e.ids) > 2  # the error message was appended (masked) for the next turn
    env = wrap_environment(EchoTools(), parse_hermes, 1000)
    for k, read in ((MAX_DEPTH - 1, 1), (MAX_DEPTH, 0)):  # the call object is a level: k + 1 levels in all
        e = step_once(smollm_tokenizer, env, call('{"a": ' * k + "1" + "}" * k))
        assert (e.attempts, e.parse_failures, e.calls) == (1, 1 - read, read), k


def test_a_tool_result_with_a_lone_surrogate_reaches_the_model_as_a_replacement_character(
    smollm_tokenizer: Any,
) -> None:
    e = step_once(smollm_tokenizer, wrap_environment(EchoTools(), parse_hermes, 1000), call('{"text": "ok \\udcff"}'))
    assert e.parse_failures == 1 and "lone surrogate" in e.turns[-1]["content"]  # refused at the parser
    echo = step_once(smollm_tokenizer, wrap_environment(Echo(), parse_hermes, 1000), "bytes: \udcff\udc80 end")
    assert echo.turns[-1]["content"] == "bytes: \ufffd\ufffd end"
    assert "bytes: \ufffd\ufffd end" in smollm_tokenizer.decode(echo.ids[2:])
