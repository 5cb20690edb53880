"""How each reward convention is called: the arguments its functions receive, built from the batch, and the values
read back from what they return (`signature.py` detects the convention; docs/bring_your_job.md tabulates them).

- **TRL**: keywords; `completions` are texts, `[{"role": "assistant", ...}]` for conversational prompts, or, in a
  multi-turn run, the whole episode after the prompt as TRL builds it for tool-using runs: assistant messages with
  `tool_calls` (`{"type": "function", "function": {"name", "arguments"}}`), `tool` messages with the results (a
  list result as a list, as TRL keeps it), and
  the environment's `user` messages (`episode_messages`). A run with an environment also passes `environments`,
  one per completion, as TRL 1.x does with `environment_factory` (`EnvironmentState`).
- **verl** `compute_score`: one call per completion, `solution_str` the response, or the decoded prompt followed
  by the response with `reward.verl_solution_str=prompt+response` (TinyZero, verl before its reward-manager
  change); a number or a dict with "score".
- **OpenRLHF** `reward_func(queries, prompts, labels)`: one call per batch with queries = prompt + response
  (decoded), prompts and the reference answers; a dict whose "rewards" (a tensor or list) are the rewards.
- **SkyRL**: as verl, the ground truth from the row's `reward_spec` (`{"method": "rule", "ground_truth": ...}`).
- **EasyR1** `compute_score(reward_inputs)`: one list of `{"response", "response_length", "ground_truth"}` per
  batch (one dict per call where the module says `REWARD_TYPE = "sequential"`); each score dict's "overall".
- **Oat** (understand-r1-zero's graders): `grader(model_response, gt_answer)` per completion -> `(info, reward)`.
- **ms-swift** ORM: the class built once, then `instance(completions, **columns, trainer_state=...)` per batch.
"""

from __future__ import annotations

import json
from typing import Any

from ..data.example import Example

SOLUTION_STR = ("response", "prompt+response")  # what a verl compute_score gets as solution_str


class EnvironmentState:
    """One episode's environment as a reward sees it in the worker: the instance's attributes at the episode's end
    (those that are JSON values: numbers, strings, lists, dicts), read as `env.score` (the instance itself and its
    methods stay in the trainer, where it ran; `get_reward()` is already the episode's environment reward)."""

    def __init__(self, state: dict[str, Any], kind: str = "") -> None:
        self.__dict__.update(state)
        self.__dict__["_kind"] = kind

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise AttributeError(
            f"the {self.__dict__.get('_kind') or 'environment'} passed to the reward has no attribute {name!r}: "
            "a reward sees the environment's attributes that are JSON values (numbers, strings, lists, dicts) "
            f"at the episode's end, here {sorted(k for k in self.__dict__ if not k.startswith('_'))}"
        )

    def __repr__(self) -> str:
        return f"EnvironmentState({self.__dict__.get('_kind', '')}, {sorted(self.__dict__)})"


def environment_snapshot(instance: Any, limit: int = 65536) -> dict[str, Any]:
    """The JSON-valued attributes of an environment instance (each at most `limit` characters as JSON), and its
    class name under "__class__": what an episode record keeps for the rewards (`EnvironmentState`)."""
    state: dict[str, Any] = {"__class__": type(instance).__name__}
    for key, value in vars(instance).items() if hasattr(instance, "__dict__") else ():
        try:
            text = json.dumps(value)
        except (TypeError, ValueError):
            continue
        if len(text) <= limit:
            state[str(key)] = json.loads(text)
    return state


def episode_messages(record: dict[str, Any]) -> list[dict[str, Any]]:
    """An episode record's turns as TRL's completion messages for tool-using runs (see the module docstring)."""
    out: list[dict[str, Any]] = []
    for turn in record.get("turns", []):
        role = turn.get("role", "")
        if role == "assistant":
            message: dict[str, Any] = {"role": "assistant", "content": turn.get("content", "")}
            calls = turn.get("calls") or []
            if calls:
                message["tool_calls"] = [
                    {"type": "function", "function": {"name": c["name"], "arguments": c.get("arguments", {})}}
                    for c in calls
                ]
            out.append(message)
        elif role == "tool":
            out.append({"role": "tool", "name": turn.get("name", ""), "content": tool_content(turn)})
        else:
            out.append({"role": role, "content": turn.get("content", "")})
    return out


def tool_content(turn: dict[str, Any]) -> Any:
    """A tool message's content as TRL gives it: a tool that returned a list keeps it (grpokit's tool message
    holds it as JSON), anything else is its text."""
    text = turn.get("content", "")
    if turn.get("status", "ok") == "ok" and text.startswith("["):
        try:
            value = json.loads(text)
        except ValueError:
            return text
        return value if isinstance(value, list) else text
    return text


def environments(episodes: list[dict[str, Any]] | None) -> list[EnvironmentState] | None:
    """Each episode's environment (None unless every episode kept one: a run without `agent.environment`)."""
    if not episodes or any("environment" not in e for e in episodes):
        return None
    states = [dict(e["environment"]) for e in episodes]
    return [EnvironmentState({k: v for k, v in s.items() if k != "__class__"}, s.get("__class__", "")) for s in states]


def prompt_text(ex: Example, prompt_texts: list[str] | None, i: int) -> str:
    """Sample i's prompt as decoded text: as the model saw it (chat template and special tokens) where the trainer
    passed it, else the example's prompt (its messages' contents, one per line)."""
    if prompt_texts is not None:
        return prompt_texts[i]
    if ex.messages:
        return "\n".join(str(m.get("content", "")) for m in ex.messages)
    return ex.prompt


def verl_kwargs(row: dict[str, Any], ex: Example, solution_str: str) -> dict[str, Any]:
    """verl's `compute_score` keywords for one sample (its row's data_source, ground truth and extra_info)."""
    spec = row.get("reward_model", row.get("reward_spec"))  # verl's column, SkyRL's
    truth = spec.get("ground_truth", ex.answer) if isinstance(spec, dict) else ex.answer
    extra = row.get("extra_info")
    if isinstance(extra, str):
        try:
            extra = json.loads(extra)
        except ValueError:
            pass
    return {
        "data_source": row.get("data_source", ex.meta.get("task", "")),
        "solution_str": solution_str,
        "ground_truth": truth,
        "extra_info": extra if extra is not None else {},
    }


def verl_score(out: Any) -> Any:
    """A verl scorer's value: the number, or a dict's "score"."""
    if isinstance(out, dict):
        if "score" not in out:
            raise ValueError(f"a verl reward returning a dict must have a 'score' key, got keys {sorted(out)}")
        return out["score"]
    return out


def openrlhf_args(
    completions: list[str], examples: list[Example], prompt_texts: list[str] | None
) -> tuple[list[str], list[str], list[str]]:
    """OpenRLHF's (queries, prompts, labels): decoded prompt + response, the prompt, the reference answer."""
    prompts = [prompt_text(ex, prompt_texts, i) for i, ex in enumerate(examples)]
    return [p + c for p, c in zip(prompts, completions)], prompts, [ex.answer for ex in examples]


def openrlhf_rewards(out: Any) -> Any:
    """The rewards of an OpenRLHF `reward_func`'s return value: a dict's "rewards" (its "scores" are for dynamic
    filtering, its "extra_logs" for wandb), or the value itself (a tensor or a list)."""
    if isinstance(out, dict):
        if "rewards" not in out:
            raise ValueError(
                f"an OpenRLHF reward_func returning a dict must have a 'rewards' key, got keys {sorted(out)}"
            )
        out = out["rewards"]
    if hasattr(out, "tolist") and getattr(out, "ndim", 1) == 1:
        return out.tolist()  # a tensor or array: plain floats for the wire
    return out


def easyr1_inputs(
    completions: list[str], examples: list[Example], completion_ids: list[list[int]] | None
) -> list[dict[str, Any]]:
    """EasyR1's reward inputs (verl/workers/reward/function.py RewardInput): the response, its length in tokens
    (left out where the caller passed no token ids) and the ground truth."""
    out: list[dict[str, Any]] = []
    for i, (text, ex) in enumerate(zip(completions, examples)):
        one: dict[str, Any] = {"response": text, "ground_truth": ex.answer}
        if completion_ids is not None:
            one["response_length"] = len(completion_ids[i])
        out.append(one)
    return out


def easyr1_overall(score: Any) -> Any:
    """The reward of one EasyR1 score: its dict's "overall" (the others are metrics), or the number itself."""
    if isinstance(score, dict):
        if "overall" not in score:
            raise ValueError(f"an EasyR1 reward returning a dict must have an 'overall' key, got keys {sorted(score)}")
        return score["overall"]
    return score


def easyr1_scores(out: Any) -> Any:
    """The rewards of an EasyR1 batch reward: each score's "overall" (a dict of lists: its "overall" list)."""
    if isinstance(out, dict):
        return easyr1_overall(out)
    return [easyr1_overall(s) for s in out] if isinstance(out, (list, tuple)) else out


def oat_reward(out: Any) -> Any:
    """The reward of an Oat grader's `(info, reward)` (info is its metrics: "formatted"), or the number itself."""
    if isinstance(out, tuple) and len(out) == 2 and isinstance(out[0], dict):
        return out[1]
    return out


def build_orm(cls: type) -> Any:
    """An ms-swift ORM class built as ms-swift builds it without a config (`orms[name]()`); ValueError naming the
    class when its constructor needs more."""
    try:
        return cls()
    except TypeError as e:
        raise ValueError(
            f"the ms-swift ORM class {cls.__qualname__!r} cannot be built with no arguments ({e}); ms-swift builds "
            "it as orms[name](args=...): give it defaults"
        ) from None
