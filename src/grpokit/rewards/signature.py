"""Reward functions of every convention (the table in `conventions.py`), detected from what they declare or named by
`reward.convention`, and called alike. The rows called here:

- **grpokit**: `fn(completions, examples)` -> one value per completion; `examples` are `Example` objects.
- **TRL** (any function taking `**kwargs`, or a parameter named `prompts`, `completion_ids`, `trainer_state` or
  `environments`): called with keywords as TRL's GRPOTrainer does — `prompts`, `completions`,
  `completion_ids`, `trainer_state`, and every dataset column except prompt/completion as a list. When the
  prompts are conversational (lists of messages), completions are `[{"role": "assistant", "content": text}]`;
  so they are when the function's `completions` annotation asks for messages (mentions `dict`, as TRL's
  `accuracy_reward` and `think_format_reward` do), with string prompts then given as one user message. In a
  multi-turn run each completion is the episode's messages, and a run with an environment passes `environments`
  (`callers.py`).
- **verl** (a parameter named `solution_str` or `ground_truth`): `compute_score(data_source, solution_str,
  ground_truth, extra_info)` called once per completion; it may return a number or a dict with "score".
  `solution_str` is the response, or the prompt + response (`reward.verl_solution_str`).
- **OpenRLHF** (a parameter named `queries`): `reward_func(queries, prompts, labels)` once per batch, queries =
  prompt + response; it returns a dict whose "rewards" are the rewards, or the rewards.
- **SkyRL**: as verl, the ground truth from the row's `reward_spec`.
- **EasyR1** (`reward_inputs`, `reward_input`, or a `list[dict]` first parameter): `compute_score(reward_inputs)`
  once per batch (per input where the module's REWARD_TYPE is "sequential"); score dicts whose "overall" counts.
- **Oat** (`model_response`, `gt_answer`, a `str` first parameter): `grader(response, answer)` per completion,
  returning `(info, reward)`.
- **ms-swift** (a class): built once, then `instance(completions, **kwargs)` per batch with the dataset columns.

In every convention a value of None means "not applicable to this sample": the sample is left out of that
reward's weighted sum (as TRL does), not counted as a failure.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..data.example import Example
from . import callers, conventions
from .conventions import TRL_NAMES, parameters

TRL_EXCLUDED_COLUMNS = {"prompt", "completion", "completion_ids"}  # TRL passes every other dataset column


@dataclass
class CallContext:
    """What the trainer knows about a batch beyond texts and examples (all optional, one entry per sample):
    the raw prompts, the completions' token ids, the prompts as decoded text (chat template applied, what the
    model saw), the episode records of a multi-turn run; and what a verl scorer gets as `solution_str`."""

    prompts: list[Any] | None = None
    completion_ids: list[list[int]] | None = None
    trainer_state: Any = None
    prompt_texts: list[str] | None = None
    episodes: list[dict[str, Any]] | None = None
    solution_str: str = "response"

    def slice(self, i: int) -> CallContext:
        """The context of sample i alone."""

        def one(values: list[Any] | None) -> list[Any] | None:
            return values[i : i + 1] if values is not None else None

        return CallContext(
            one(self.prompts),
            one(self.completion_ids),
            self.trainer_state,
            one(self.prompt_texts),
            one(self.episodes),
            self.solution_str,
        )


def example_columns(ex: Example) -> dict[str, Any]:
    """The dataset row behind an example: its original columns when loaded from a file, else answer + meta."""
    if ex.columns is not None:
        return ex.columns
    return {"prompt": ex.prompt, "answer": ex.answer, **ex.meta}


def detect_convention(fn: Callable[..., Any]) -> str:
    """The convention `fn` declares (`conventions.detect`); ValueError when none fits or two do."""
    return conventions.detect(fn)


def _is_conversation(prompt: Any) -> bool:
    return isinstance(prompt, list) and all(isinstance(m, dict) and "role" in m for m in prompt)


def _accepts(params: list[inspect.Parameter], kwargs: dict[str, Any]) -> dict[str, Any]:
    """`kwargs` restricted to what the function takes (all of them when it has **kwargs)."""
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return kwargs
    names = {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    return {k: v for k, v in kwargs.items() if k in names}


def _missing(params: list[inspect.Parameter], kwargs: dict[str, Any]) -> list[str]:
    return [
        p.name
        for p in params
        if p.default is p.empty and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name not in kwargs
    ]


@dataclass
class AdaptedReward:
    """A reward function of any convention, called as `adapted(completions, examples, context)`."""

    fn: Callable[..., Any]
    convention: str = ""
    _params: list[inspect.Parameter] = field(default_factory=list, repr=False)
    wants_messages: bool = False
    declared: Callable[..., Any] | None = field(default=None, repr=False)  # the class of an ms-swift ORM

    def __post_init__(self) -> None:
        self.convention = self.convention or detect_convention(self.fn)
        if self.convention == "swift" and inspect.isclass(self.fn):
            self.declared, self.fn = self.fn, callers.build_orm(self.fn)  # ms-swift builds each ORM once
        self._params = parameters(self.fn) or []
        hint = next((p.annotation for p in self._params if p.name == "completions"), None)
        self.wants_messages = "dict" in str(hint)
        if self.convention == "easyr1":
            self._check_easyr1()

    def __call__(self, completions: list[str], examples: list[Example], context: CallContext | None = None) -> Any:
        context = context or CallContext()
        if self.convention == "trl":
            return self._call_trl(completions, examples, context)
        if self.convention in ("verl", "skyrl"):
            return [self._call_verl(i, c, ex, context) for i, (c, ex) in enumerate(zip(completions, examples))]
        if self.convention == "openrlhf":
            return callers.openrlhf_rewards(
                self.fn(*callers.openrlhf_args(completions, examples, context.prompt_texts))
            )
        if self.convention == "easyr1":
            inputs = callers.easyr1_inputs(completions, examples, context.completion_ids)
            if conventions.easyr1_sequential(self.declared or self.fn, self._params):
                return [callers.easyr1_overall(self.fn(one)) for one in inputs]
            return callers.easyr1_scores(self.fn(inputs))
        if self.convention == "oat":
            return [callers.oat_reward(self.fn(c, ex.answer)) for c, ex in zip(completions, examples)]
        if self.convention == "swift":
            return self._call_swift(completions, examples, context)
        return self.fn(completions, examples)

    def _check_easyr1(self) -> None:
        """ValueError naming the parameters an EasyR1 reward needs beyond its inputs (EasyR1 binds them from
        worker.reward.reward_function_kwargs with functools.partial): grpokit has no such values to give."""
        needs = _missing(self._params[1:], {})
        if needs:
            raise ValueError(
                f"EasyR1 reward {getattr(self.fn, '__qualname__', self.fn)!r} needs {needs}, which EasyR1 binds from "
                "worker.reward.reward_function_kwargs: give it functools.partial(compute_score, "
                f"{', '.join(f'{n}=...' for n in needs)}) in Python, or defaults in a wrapper module"
            )

    def _call_swift(self, completions: list[str], examples: list[Example], ctx: CallContext) -> Any:
        """ms-swift's call: instance(completions, **kwargs), the texts and every dataset column as a list, with
        trainer_state (swift/rl_core/grpo_algorithm.py)."""
        rows = [example_columns(ex) for ex in examples]
        keys = dict.fromkeys(k for row in rows for k in row if k not in TRL_EXCLUDED_COLUMNS)
        kwargs: dict[str, Any] = {k: [row.get(k) for row in rows] for k in keys}
        kwargs["trainer_state"] = ctx.trainer_state
        missing = _missing(self._params[1:], kwargs)
        if missing:
            raise TypeError(
                f"this ms-swift ORM needs {missing}, which the dataset does not have (columns: {sorted(keys)}); "
                "rename the column in the data file"
            )
        return self.fn(completions, **_accepts(self._params[1:], kwargs))

    def _completions(self, completions: list[str], conversational: bool, ctx: CallContext) -> list[Any]:
        """What TRL passes as `completions`: texts, one assistant message, or an episode's messages."""
        if ctx.episodes is not None:
            return [callers.episode_messages(e) for e in ctx.episodes]
        return [[{"role": "assistant", "content": c}] for c in completions] if conversational else completions

    def _call_trl(self, completions: list[str], examples: list[Example], ctx: CallContext) -> Any:
        rows = [example_columns(ex) for ex in examples]
        prompts = (
            ctx.prompts
            if ctx.prompts is not None
            else [row.get("prompt", ex.messages or ex.prompt) for row, ex in zip(rows, examples)]
        )
        conversational = bool(prompts) and all(_is_conversation(p) for p in prompts)
        if (self.wants_messages or ctx.episodes is not None) and not conversational:
            prompts = [p if _is_conversation(p) else [{"role": "user", "content": str(p)}] for p in prompts]
            conversational = True
        texts = self._completions(completions, conversational, ctx)
        kwargs: dict[str, Any] = {"prompts": prompts, "completions": texts, "completion_ids": ctx.completion_ids}
        # every column but prompt/completion(_ids); a column named like a keyword TRL passes itself is left out
        keys = dict.fromkeys(k for row in rows for k in row if k not in TRL_EXCLUDED_COLUMNS | TRL_NAMES)
        kwargs |= {k: [row.get(k) for row in rows] for k in keys}
        kwargs["trainer_state"] = ctx.trainer_state
        envs = callers.environments(ctx.episodes)
        if envs is not None:
            kwargs["environments"] = envs  # TRL 1.x passes them only with environment_factory
        missing = _missing(self._params, kwargs)
        if "environments" in missing:
            raise TypeError(
                "this TRL-style reward reads `environments`, which TRL passes only to runs with an "
                "environment_factory: set agent.environment=module:Class (docs/agents.md)"
            )
        if missing:
            raise TypeError(
                f"this TRL-style reward needs {missing}, which the dataset does not have (columns: {sorted(keys)}); "
                "rename the column in the data file or give the reward a default for it"
            )
        if "completion_ids" in {p.name for p in self._params} and ctx.completion_ids is None:
            raise TypeError("this TRL-style reward reads completion_ids, which the caller did not pass to score()")
        return self.fn(**_accepts(self._params, kwargs))

    def _call_verl(self, i: int, completion: str, ex: Example, ctx: CallContext) -> Any:
        solution = completion
        if ctx.solution_str == "prompt+response":
            solution = callers.prompt_text(ex, ctx.prompt_texts, i) + completion
        kwargs = callers.verl_kwargs(example_columns(ex), ex, solution)
        return callers.verl_score(self.fn(**_accepts(self._params, kwargs)))


def adapt(fn: Callable[..., Any], convention: str = conventions.AUTO) -> AdaptedReward:
    """Wrap `fn` for `RewardManager`, in the convention named (`reward.convention`) or the one it declares;
    ValueError when it declares none, or two."""
    if isinstance(fn, AdaptedReward):
        return fn
    return AdaptedReward(fn, "" if conventions.check_convention(convention) == conventions.AUTO else convention)
