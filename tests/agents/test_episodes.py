"""Episodes on the real SmolLM2-135M-Instruct with its real tokenizer: the loss covers the policy's tokens only, the
ids trained on are exactly the ids sampled (no decode/re-encode drift: the learner's own log-probs of the episode
match the sampler's), the template's chunks extend a conversation exactly as rendering it whole does, each ending is
recorded, and TRL's environment_factory convention drops in."""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any

import pytest
import torch

from grpokit.agents.calls import parse_hermes
from grpokit.agents.engine import EpisodeEngine
from grpokit.agents.environment import wrap_environment
from grpokit.agents.template import MessageChunker
from grpokit.data.example import Example
from grpokit.models import load_model_and_tokenizer
from grpokit.rollout import SamplingParams
from grpokit.rollout.hf import SharedPrefixSampler
from grpokit.training.batch import from_rollout
from grpokit.training.phases.advantage import score_pass

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def smol() -> tuple[Any, Any]:
    model, tok = load_model_and_tokenizer("smollm2-135m-instruct", dtype="fp32", device="cpu")
    return model.eval(), tok


def prompt_ids(tok: Any, text: str) -> list[int]:
    rendered = tok.apply_chat_template([{"role": "user", "content": text}], tokenize=False, add_generation_prompt=True)
    return tok(rendered, add_special_tokens=False)["input_ids"]


class Echo:
    """A grpokit-protocol environment: answers every turn with a user message until `turns` turns, then ends."""

    def __init__(self, turns: int = 3) -> None:
        self.turns, self.seen = turns, 0

    def reset(self, example: Example) -> None:
        self.seen = 0

    def step(self, text: str) -> tuple[str | None, bool, float | None]:
        self.seen += 1
        done = self.seen >= self.turns
        return (None if done else f"Say it again, shorter (turn {self.seen + 1})."), done, 0.5 * done


def engine(smol: tuple[Any, Any], make: Any, **kw: Any) -> EpisodeEngine:
    model, tok = smol
    opts = {"max_turns": 4, "max_episode_tokens": 2048, **kw}
    return EpisodeEngine(SharedPrefixSampler(model, tok), make, MessageChunker(tok), {}, **opts)


def test_chunks_extend_the_conversation_exactly_as_the_template_renders_it(smol: tuple[Any, Any]) -> None:
    _, tok = smol
    chunker = MessageChunker(tok)
    user = [{"role": "user", "content": "What is 2 + 3?"}]
    reply = "<tool_call>" + '{"name": "calculator", "arguments": {"expression": "2 + 3"}}' + "</tool_call>"
    tool = [{"role": "tool", "name": "calculator", "content": "5"}]
    sampled = tok(reply, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]  # a turn as the sampler ends it
    ours = prompt_ids(tok, user[0]["content"]) + sampled + chunker.ids(tool)
    whole = tok.apply_chat_template(
        [*user, {"role": "assistant", "content": reply}, *tool], tokenize=False, add_generation_prompt=True
    )
    assert tok.decode(ours) == whole
    assert ours == tok(whole, add_special_tokens=False)["input_ids"]


def test_the_loss_covers_policy_tokens_only_and_trains_on_exactly_the_sampled_ids(smol: tuple[Any, Any]) -> None:
    model, tok = smol
    eng = engine(smol, lambda: wrap_environment(Echo(3), parse_hermes, 1000))
    prompts = [prompt_ids(tok, "Name a color in one word."), prompt_ids(tok, "Name an animal in one word.")]
    torch.manual_seed(0)
    sampling = SamplingParams(n=3, max_new_tokens=24)
    out = eng.generate(prompts, sampling)
    assert len(out.episodes) == 6 and out.prompt_index.tolist() == [0, 0, 0, 1, 1, 1]
    multi = [i for i, e in enumerate(out.episodes) if e["ended_by"] == "answer"]
    assert multi, [e["ended_by"] for e in out.episodes]
    for i, e in enumerate(out.episodes):
        row, mask = out.completion_ids[i, : e["span"]], out.completion_mask[i, : e["span"]]
        assert int(mask.sum()) == e["policy_tokens"] and e["span"] - e["policy_tokens"] == e["env_tokens"]
        assert out.completion_mask[i, e["span"] :].sum() == 0
        turns = [t for t in e["turns"] if t["role"] == "assistant"]
        # each policy run of the mask decodes to that turn's text, each environment run to the template's chunk
        runs = torch.nonzero(torch.diff(torch.cat([torch.tensor([0]), mask, torch.tensor([0])]))).flatten().tolist()
        policy_runs = [row[a:b].tolist() for a, b in zip(runs[::2], runs[1::2])]
        assert [tok.decode(r, skip_special_tokens=True) for r in policy_runs] == [t["content"] for t in turns]
        if e["ended_by"] == "answer":
            assert len(turns) == 3 and e["env_reward"] == 0.5
            env = tok.decode(row[mask == 0].tolist())
            assert env.count("<|im_start|>user\nSay it again") == 2 and env.count("<|im_start|>assistant\n") == 2
    # the learner's log-probs of every policy token, with the environment's tokens in its context, are the
    # sampler's: the ids trained on are the ids sampled, in the positions they were sampled at
    b = from_rollout(out, torch.zeros(6), torch.zeros(6), 0, [0, 1], eng.pad_id)
    lp, _, _ = score_pass(model, b, micro_batch_size=8, sampling=sampling, autocast=contextlib.nullcontext)
    m = b.raw_mask.bool()
    assert torch.isfinite(lp[m]).all()
    torch.testing.assert_close(lp[m], out.sampler_logp[m], atol=2e-3, rtol=0)
    assert (out.sampler_logp[~m] == 0).all()


def test_each_ending_is_recorded(smol: tuple[Any, Any]) -> None:
    _, tok = smol
    prompts = [prompt_ids(tok, "Name a color in one word.")]
    torch.manual_seed(1)
    turns = engine(smol, lambda: wrap_environment(Echo(10), parse_hermes, 1000), max_turns=2)
    out = turns.generate(prompts, SamplingParams(n=4, max_new_tokens=24))
    ends = {e["ended_by"] for e in out.episodes}
    assert ends <= {"turn_limit", "length_limit"} and "turn_limit" in ends
    assert all(
        e["ended_by"] != "turn_limit" or sum(t["role"] == "assistant" for t in e["turns"]) == 2 for e in out.episodes
    )
    assert out.truncated.all() and not out.eos.any()
    torch.manual_seed(1)
    ctx = engine(smol, lambda: wrap_environment(Echo(10), parse_hermes, 1000), max_episode_tokens=len(prompts[0]) + 40)
    out = ctx.generate(prompts, SamplingParams(n=4, max_new_tokens=24))
    assert {e["ended_by"] for e in out.episodes} <= {"context_limit", "length_limit"}
    assert any(e["ended_by"] == "context_limit" for e in out.episodes)
    assert all(len(prompts[0]) + e["span"] <= len(prompts[0]) + 40 for e in out.episodes)
    torch.manual_seed(1)
    short = engine(smol, lambda: wrap_environment(Echo(3), parse_hermes, 1000))
    out = short.generate(prompts, SamplingParams(n=4, max_new_tokens=2))
    assert all(e["ended_by"] == "length_limit" and len(e["turns"]) == 1 for e in out.episodes)


class Counter:
    """An environment in TRL's environment_factory convention: reset(**row) returns text for the first user message,
    public methods are the tools, get_reward scores the episode from its state."""

    def reset(self, **row: Any) -> str:
        self.count, self.target = 0, int(row["answer"])
        return f" (Start counting at 0; the target is {self.target}.)"

    def increment(self, by: int) -> str:
        """Add to the counter.

        Args:
            by: how much to add.
        """
        self.count += by
        return f"count is now {self.count}"

    def get_reward(self) -> float:
        return float(self.count == self.target)


def test_trl_environment_factory_convention_drops_in(smol: tuple[Any, Any]) -> None:
    model, tok = smol
    ex = Example(prompt="Count to the target with the increment tool.", answer="3")
    base = prompt_ids(tok, ex.prompt)

    def reprompt(example: Example, extra: str) -> list[int]:
        return prompt_ids(tok, example.prompt + extra)

    env = wrap_environment(Counter(), parse_hermes, 1000)
    assert env.reset(ex).endswith("the target is 3.)")
    call = '<tool_call>{"name": "increment", "arguments": {"by": 3}}</tool_call>'
    obs = env.step(call)
    assert not obs.done and obs.messages == [{"role": "tool", "name": "increment", "content": "count is now 3"}]
    wrong = env.step('<tool_call>{"name": "increment", "arguments": {"step": 1}}</tool_call>')
    assert wrong.results[0].status == "error" and "unexpected keyword argument 'step'" in wrong.messages[0]["content"]
    end = env.step("Done.")
    assert end.done and end.reward == 1.0
    eng = EpisodeEngine(
        SharedPrefixSampler(model, tok),
        lambda: wrap_environment(Counter(), parse_hermes, 1000),
        MessageChunker(tok),
        {tuple(base): ex},
        max_turns=2,
        max_episode_tokens=2048,
        reprompt=reprompt,
    )
    out = eng.generate([base], SamplingParams(n=2, max_new_tokens=16))
    want = reprompt(ex, " (Start counting at 0; the target is 3.)")
    assert out.prompt_ids[0][out.prompt_mask[0].bool()].tolist() == want  # reset's text joined the user message
    assert all(e["env_reward"] in (0.0, 1.0, None) for e in out.episodes)
    assert dataclasses.is_dataclass(out)
