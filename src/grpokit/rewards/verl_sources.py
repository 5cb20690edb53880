"""verl's default scorer for a `data_source` -> the grpokit built-in reward that scores the same way.

A verl job without `custom_reward_function` is scored by `default_compute_score(data_source, ...)`
(volcengine/verl verl/utils/reward_score/__init__.py), which picks a scorer by each row's `data_source`. The table
below is that dispatch, each entry naming the grpokit built-in used instead and how close it is. A data source
verl has no default for (it raises NotImplementedError), or whose scorer grpokit has no counterpart for (code run
in verl's sandbox, geometry3k), gets `ValueError` with one line: the data source and the fix.

`by_data_source` (the built-in reward `verl_data_source`) is that dispatch as a reward: each row is scored by the
grpokit counterpart of its own `data_source`'s scorer, as verl scores data mixing sources (GSM8K + MATH in
verl's examples/grpo_trainer/run_qwen2-7b_math.sh).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..common.registry import Registry
from ..data.example import Example


@dataclass(frozen=True)
class VerlScorer:
    """The grpokit reward for one of verl's default scorers, and what differs (empty: the same behaviour)."""

    reward: str
    verl_scorer: str
    differs: str = ""


_GSM8K = VerlScorer("gsm8k", "gsm8k.compute_score")
_MATH = VerlScorer(
    "math_verify", "math_reward.compute_score", "verl compares the last \\boxed{} strings after normalising them; "
    "math_verify checks mathematical equivalence, so it accepts some answers verl's string check refuses"
)  # fmt: skip
_DAPO = VerlScorer(
    "math_verify", "math_dapo.compute_score", "verl reads the answer after 'Answer:' and gives -1 when wrong; "
    "math_verify gives 0 and reads \\boxed{} answers"
)  # fmt: skip
_PRIME = VerlScorer("math_verify", "prime_math.compute_score", "verl's prime_math grader differs in normalisation")

VERL_DEFAULT_SCORERS = Registry.of(
    "verl data_source",
    {
        "openai/gsm8k": _GSM8K,
        **dict.fromkeys(["lighteval/MATH", "DigitalLearningGmbH/MATH-lighteval", "HuggingFaceH4/MATH-500"], _MATH),
        **dict.fromkeys(["math_dapo", "math", "math_dapo_reasoning", "aime*"], _DAPO),
        **dict.fromkeys(
            [
                "numina_aops_forum",
                "numina_synthetic_math",
                "numina_amc_aime",
                "numina_synthetic_amc",
                "numina_cn_k12",
                "numina_olympiads",
            ],
            _PRIME,
        ),  # fmt: skip
    },
)


def verl_scorer(data_source: str) -> VerlScorer:
    """The grpokit counterpart of verl's default scorer for `data_source`; ValueError (one line) when none."""
    key = "aime*" if str(data_source).startswith("aime") else str(data_source)
    if key in VERL_DEFAULT_SCORERS:
        return VERL_DEFAULT_SCORERS[key]
    raise ValueError(
        f"data_source {data_source!r} has no verl default scorer grpokit reproduces (grpokit has openai/gsm8k, the "
        "MATH, math_dapo/aime and numina sources); set custom_reward_function.path/name to your compute_score, or "
        "--set reward.functions=[...]"
    )


def data_source_of(example: Example) -> str:
    """The row's `data_source` column (verl's parquet schema); ValueError naming the row when it has none."""
    row = example.columns if example.columns is not None else example.meta
    source = row.get("data_source") if isinstance(row, dict) else None
    if source is None:
        raise ValueError(
            f"{example.where}: no data_source field; verl's default scorer picks each row's check by it: add the "
            "column (verl's preprocessing writes it), or set reward.functions to one reward for every row"
        )
    return str(source)


def by_data_source(completions: list[str], examples: list[Example]) -> Sequence[float | None]:
    """verl's `default_compute_score` dispatch: each row scored by the grpokit reward for its `data_source`
    (`verl_scorer`), the rows of one reward scored together."""
    from .registry import load_reward

    if len(completions) != len(examples):
        raise ValueError(f"{len(completions)} completions for {len(examples)} examples")
    rows: dict[str, list[int]] = {}
    for i, ex in enumerate(examples):
        rows.setdefault(verl_scorer(data_source_of(ex)).reward, []).append(i)
    out: list[float | None] = [None] * len(completions)
    for reward, idx in rows.items():
        values = load_reward(reward)([completions[i] for i in idx], [examples[i] for i in idx])
        for i, v in zip(idx, values):
            out[i] = v
    return out
