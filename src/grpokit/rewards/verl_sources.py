"""verl's default scorer for a `data_source` -> the grpokit built-in reward that scores the same way.

A verl job without `custom_reward_function` is scored by `default_compute_score(data_source, ...)`
(volcengine/verl verl/utils/reward_score/__init__.py), which picks a scorer by each row's `data_source`. The table
below is that dispatch, each entry naming the grpokit built-in used instead and how close it is. A data source
verl has no default for (it raises NotImplementedError), or whose scorer grpokit has no counterpart for (code run
in verl's sandbox, geometry3k), gets `ValueError` with one line: the data source and the fix.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..common.registry import Registry


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
