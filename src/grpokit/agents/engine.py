"""The multi-turn rollout: an engine that runs episodes on top of any single-turn engine (`hf`, `vllm`, ...).

    turn 1   the inner engine samples G responses per prompt (the prompt's prefill shared by its group)
    then     each unfinished episode's environment answers its last turn; the answer's tokens are appended
             (masked) and the inner engine continues every unfinished episode from its whole token history
    until    every episode has answered or been cut (`grpokit.agents.episode`)

The returned `RolloutOutput` is what the trainer gets from a single-turn engine, so every algorithm switch works on
episodes unchanged: `completion_ids` holds every token after the prompt, `completion_mask` only the policy's (the loss
and every token statistic see policy tokens only), `sampler_logp` the sampler's log-probs of those, `texts` each
episode's final policy message (what the reward functions score), and `episodes` the records of the turns.
Later turns prefill only what follows the prompt: the `hf` engine keeps each distinct prompt's cache for its episodes
(`continue_rows`); another engine prefills the whole history (vLLM reuses the cached prefix with prefix caching).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

import torch

from ..data.example import Example
from ..rollout.base import RolloutOutput, SamplingParams, assemble_output
from .environment import Environment, EpisodeFailure
from .episode import Episode
from .template import MessageChunker, encodable


class EpisodeEngine:
    """Runs episodes with `inner` for sampling, a fresh environment from `make_env` per episode, `chunker` for the
    environment's tokens, up to `max_turns` policy turns and `max_episode_tokens` tokens (prompt included)."""

    def __init__(
        self,
        inner: Any,
        make_env: Callable[[], Environment],
        chunker: MessageChunker,
        examples: dict[tuple[int, ...], Example],
        *,
        max_turns: int,
        max_episode_tokens: int,
        reprompt: Callable[[Example, str], list[int]] | None = None,
    ) -> None:
        self.inner, self.make_env, self.chunker, self.examples = inner, make_env, chunker, examples
        self.max_turns, self.max_episode_tokens = int(max_turns), int(max_episode_tokens)
        self.reprompt = reprompt
        self.tokenizer = chunker.tokenizer

    def __getattr__(self, name: str) -> Any:  # pad_id, eos_ids, model, start_error, ...: the inner engine's
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    def sync_weights(self, model: torch.nn.Module) -> None:
        self.inner.sync_weights(model)

    def example_of(self, prompt: list[int]) -> Example:
        ex = self.examples.get(tuple(prompt))
        return ex if ex is not None else Example(prompt=self.tokenizer.decode(prompt), answer="")

    def start(self, prompts: list[list[int]], n: int) -> list[Episode]:
        """n episodes per prompt, each with a fresh environment reset with the prompt's example."""
        eps = []
        for i, p in enumerate(prompts):
            ex = self.example_of(p)
            for _ in range(n):
                env = self.make_env()
                extra = env.reset(ex)
                if extra is not None and self.reprompt is None:
                    raise ValueError("this environment's reset() returned text, but the prompts cannot be re-rendered")
                eps.append(Episode(list(p) if extra is None else self.reprompt(ex, extra), env, i))
        return eps

    def generate(self, prompts: list[list[int]], params: SamplingParams) -> RolloutOutput:
        t0 = time.perf_counter()
        eps = self.start(prompts, params.n)
        if all(e.prompt == prompts[e.group] for e in eps):  # the group shares its prompt's prefill
            self.take(eps, self.inner.generate(prompts, params))
        else:
            self.take(eps, self.inner.generate([e.prompt for e in eps], dataclasses.replace(params, n=1)))
        one = dataclasses.replace(params, n=1, min_new_tokens=0)
        while live := [e for e in eps if not e.done and self.respond(e, params.max_new_tokens)]:
            self.take(live, self.continue_episodes(live, one))
        return self.output(eps, t0)

    def continue_episodes(self, live: list[Episode], params: SamplingParams) -> RolloutOutput:
        """The next turn of each live episode: with the prompt's cache shared by its episodes where the engine can
        (`hf`: `continue_rows`), else each whole history prefilled again (vLLM's prefix cache reuses it)."""
        if not hasattr(self.inner, "continue_rows"):
            return self.inner.generate([e.prompt + e.ids for e in live], params)
        distinct: dict[tuple[int, ...], int] = {}
        index = [distinct.setdefault(tuple(e.prompt), len(distinct)) for e in live]
        return self.inner.continue_rows([list(p) for p in distinct], index, [e.ids for e in live], params)

    def take(self, eps: list[Episode], out: RolloutOutput) -> None:
        """Append each episode's sampled turn (row i of `out`); a turn cut before its EOS ends the episode."""
        for i, e in enumerate(eps):
            n = int(out.completion_mask[i].sum())
            e.add_policy_turn(out.completion_ids[i, :n].tolist(), out.sampler_logp[i, :n].tolist(), out.texts[i])
            if not bool(out.eos[i]):
                e.end("length_limit")

    def respond(self, e: Episode, max_new_tokens: int) -> bool:
        """The environment's answer to the episode's last turn; True when the episode goes on to another turn."""
        try:
            obs = e.env.step(e.final_text)
        except EpisodeFailure as failure:
            e.fail(str(failure))
            return False
        e.add_observation(obs)
        if obs.done:
            if getattr(e.env, "scores", False) and obs.reward is None and e.reward is None:
                raise ValueError(
                    f"agent.environment: {type(getattr(e.env, 'instance', e.env)).__name__} ended an episode without "
                    "scoring it (its reward was None): the run stops rather than train on the reward functions alone"
                )
            e.end("answer")
            return False
        if e.policy_turns >= self.max_turns:
            e.end("turn_limit")
            return False
        messages = [encodable(m) for m in obs.messages]  # the policy's text echoed back: no lone surrogates
        chunk = self.chunker.ids(messages)
        if len(e.prompt) + len(e.ids) + len(chunk) + max_new_tokens > self.max_episode_tokens:
            e.end("context_limit")
            return False
        e.add_chunk(chunk, messages, [r.status for r in obs.results])
        return True

    def output(self, eps: list[Episode], t0: float) -> RolloutOutput:
        if eps and all(e.ended_by == "env_error" for e in eps):
            raise ValueError(f"agent.environment: every episode's step raised; the first: {eps[0].error}")
        pad = self.inner.pad_id
        width = max(1, max(len(e.ids) for e in eps))
        comp = torch.full((len(eps), width), pad, dtype=torch.long)
        mask = torch.zeros((len(eps), width), dtype=torch.long)
        samp = torch.zeros((len(eps), width), dtype=torch.float32)
        for i, e in enumerate(eps):
            k = len(e.ids)
            comp[i, :k] = torch.tensor(e.ids, dtype=torch.long)
            mask[i, :k] = torch.tensor(e.mask, dtype=torch.long)
            samp[i, :k] = torch.tensor(e.logp, dtype=torch.float32)
        answered = torch.tensor([e.ended_by == "answer" for e in eps])
        index = torch.tensor([e.group for e in eps], dtype=torch.long)
        prompts = [e.prompt for e in eps]
        texts = [e.final_text for e in eps]
        return assemble_output(
            self.tokenizer,
            pad,
            prompts,
            index,
            comp,
            samp,
            mask,
            answered,
            t0,
            texts=texts,
            episodes=[e.record() for e in eps],
        )
