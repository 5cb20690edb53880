"""The reward calling conventions, one row each, and how a function's declaration chooses its row.

A convention is chosen by what the function declares, never by its arity alone: a class (ms-swift's ORM), the
parameter names a project's trainer passes (`queries`, `reward_inputs`, `solution_str`, `model_response`,
`examples`, ...) and the annotations (`list[dict]` for EasyR1's reward inputs, `str` for one completion). The user
may name it instead: `reward.convention=easyr1` (or a `reward_convention` attribute on the function). A function
that declares the names of two conventions, or whose two plain parameters read as one completion and its answer,
is refused in one line naming the candidates and the key that chooses. docs/bring_your_job.md tabulates the rows;
`signature.py` and `callers.py` call each one as its trainer does.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..common.registry import Registry


@dataclass(frozen=True)
class Convention:
    """One row: whose convention it is, what a function declares to be taken for it, and how it is called."""

    project: str
    declares: str
    call: str


CONVENTIONS = Registry.of(
    "reward convention",
    {
        "grpokit": Convention("grpokit", "fn(completions, examples)", "once per batch, texts and Examples"),
        "trl": Convention("TRL", "**kwargs, or prompts/completion_ids/trainer_state", "keywords, once per batch"),
        "verl": Convention("verl", "solution_str or ground_truth", "compute_score once per completion"),
        "skyrl": Convention("SkyRL", "as verl, or named: reward.convention=skyrl", "as verl, truth from reward_spec"),
        "openrlhf": Convention("OpenRLHF", "queries", "reward_func(queries, prompts, labels) once per batch"),
        "easyr1": Convention("EasyR1", "reward_inputs, or list[dict] inputs", "compute_score(reward_inputs): overall"),
        "oat": Convention("Oat", "model_response, gt_answer, or one str", "once per completion, (info, reward)"),
        "swift": Convention("ms-swift", "a class (an ORM subclass)", "built once, instance(completions, **kwargs)"),
    },
)
AUTO = "auto"
NAMED = {  # parameter names only one project's trainer passes -> its convention
    "queries": "openrlhf",
    "reward_inputs": "easyr1",
    "reward_input": "easyr1",
    "solution_str": "verl",
    "ground_truth": "verl",
    "model_response": "oat",
    "gt_answer": "oat",
    "examples": "grpokit",
}
TRL_NAMES = {"prompts", "completions", "completion_ids", "trainer_state", "environments"}
ONE_COMPLETION = {"response", "completion", "solution", "prediction", "output", "text", "answer", "model_output"}


def check_convention(name: str) -> str:
    """`name` when it is `auto` or a row of the table; ValueError naming reward.convention and the choices."""
    if name != AUTO and name not in CONVENTIONS:
        raise ValueError(f"reward.convention={name!r} is not a convention: use auto or one of {sorted(CONVENTIONS)}")
    return name


def describe(name: str) -> str:
    """`easyr1-style function (EasyR1: compute_score(reward_inputs), scores' overall)` for the start lines."""
    row = CONVENTIONS.get(name) if name in CONVENTIONS else None  # a reward model has no row
    return f"{name}-style function" + (f" ({row.project}: {row.call})" if row is not None else "")


def parameters(fn: Callable[..., Any]) -> list[inspect.Parameter] | None:
    try:
        return list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):  # builtins and some C callables have no signature
        return None


def easyr1_sequential(fn: Callable[..., Any], params: list[inspect.Parameter]) -> bool:
    """Whether an EasyR1 reward takes one input at a time: its module says REWARD_TYPE = "sequential" (EasyR1's
    verl/workers/reward/function.py), or its parameter is `reward_input`."""
    module = sys.modules.get(getattr(fn, "__module__", "") or "")
    kind = getattr(module, "REWARD_TYPE", None)
    return kind == "sequential" or (kind is None and any(p.name == "reward_input" for p in params))


def _label(fn: Callable[..., Any], params: list[inspect.Parameter]) -> str:
    return f"reward {getattr(fn, '__qualname__', fn)!r}({', '.join(p.name for p in params)})"


def _from_annotations(params: list[inspect.Parameter], fn: Callable[..., Any]) -> str | None:
    """The convention the annotations declare: Example (grpokit), list[dict] inputs (EasyR1), one str (Oat)."""
    texts = [str(p.annotation) for p in params if p.annotation is not p.empty]
    if any("Example" in t for t in texts):
        return "grpokit"
    first = params[0].annotation if params else inspect.Parameter.empty
    text = str(first).replace("typing.", "").lower()
    if text.startswith(("list[dict", "rewardinput")):
        return "easyr1"
    if first is str or text in ("str", "<class 'str'>"):
        return "oat"
    returned = str(inspect.signature(fn).return_annotation).lower()
    return "oat" if returned.startswith(("tuple", "typing.tuple")) else None


def detect(fn: Callable[..., Any]) -> str:
    """The convention `fn` declares (module docstring); ValueError, one line, when none or two fit."""
    forced = getattr(fn, "reward_convention", None)
    if forced is not None:
        if forced not in CONVENTIONS:
            raise ValueError(f"reward_convention={forced!r} on {fn!r}: use one of {sorted(CONVENTIONS)}")
        return str(forced)
    if inspect.isclass(fn):
        return "swift"  # a class: built once, its instances called per batch (ms-swift's ORM)
    params = parameters(fn)
    if params is None:
        return "grpokit"
    named = {NAMED[p.name]: p.name for p in params if p.name in NAMED}
    if len(named) > 1:
        shown = ", ".join(f"{c} ({n})" for c, n in named.items())
        raise ValueError(
            f"{_label(fn, params)} declares the names of more than one reward convention: {shown}; choose with "
            f"reward.convention={'|'.join(named)}"
        )
    if named:
        return next(iter(named))
    names = {p.name for p in params}
    if names & (TRL_NAMES - {"completions"}) or any(p.kind is p.VAR_KEYWORD for p in params):
        return "trl"
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    declared = _from_annotations(positional, fn)
    if declared is not None:
        return declared
    required = [p for p in positional if p.default is p.empty]
    if any(p.kind is p.VAR_POSITIONAL for p in params) or (len(required) <= 2 <= len(positional)):
        if positional[0].name in ONE_COMPLETION:
            raise ValueError(
                f"{_label(fn, params)} is ambiguous: grpokit's fn(completions, examples) (a batch) or Oat's "
                f"grader(response, answer) -> (info, reward) (one completion); choose with "
                "reward.convention=grpokit|oat, or name the parameters completions, examples"
            )
        return "grpokit"
    raise ValueError(
        f"{_label(fn, params)} matches no reward convention: write "
        "fn(completions, examples) [grpokit], fn(completions, **kwargs) [TRL: dataset columns as keyword lists], "
        "compute_score(data_source, solution_str, ground_truth, extra_info) [verl, SkyRL], "
        "reward_func(queries, prompts, labels) [OpenRLHF], compute_score(reward_inputs) [EasyR1], "
        "grader(model_response, gt_answer) [Oat], an ORM class [ms-swift]; or name it with "
        f"reward.convention={'|'.join(CONVENTIONS)}"
    )
