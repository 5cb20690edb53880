"""grpokit's `gsm8k` reward behaves as verl's default GSM8K scorer: checked against verl's own `compute_score`
(tests/fixtures/field/verl/gsm8k.py, byte for byte, SOURCE.md) on vectors for each rule of its docstring and code:
the last '#### ' answer, commas and '$' dropped, the last 300 characters only, exact string equality."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from grpokit.data.example import Example
from grpokit.rewards import load_reward
from grpokit.rewards.gsm8k import final_answer

VERL_GSM8K = Path(__file__).parents[1] / "fixtures" / "field" / "verl" / "gsm8k.py"


def verl_compute_score():
    spec = importlib.util.spec_from_file_location("verl_gsm8k_fixture", VERL_GSM8K)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.compute_score


VECTORS = [
    ("Natalia sold 48 + 24 = 72 clips.\n#### 72", "72"),
    ("#### 72", "72"),
    ("The answer is 72", "72"),  # no '#### ': strict mode finds nothing
    ("#### 1,234", "1234"),  # commas dropped
    ("#### -5", "-5"),
    ("#### 72.0", "72"),  # string equality: 72.0 is not 72
    ("#### 70\nwait, no\n#### 72", "72"),  # the last one counts
    ("#### 72\nthen #### 70", "72"),
    ("####72", "72"),  # the space after the marks is required
    ("#### 72" + " filler" * 60, "72"),  # beyond the last 300 characters
    ("x" * 400 + "#### 72", "72"),
    ("#### $72", "72"),  # '$' before the number is not matched by verl's pattern
    ("#### 3.", "3."),
]


@pytest.mark.parametrize(("completion", "truth"), VECTORS)
def test_gsm8k_reward_scores_as_verls_compute_score(completion: str, truth: str) -> None:
    reward = load_reward("gsm8k")
    got = reward([completion], [Example(prompt="q", answer=truth)])
    assert got == [float(verl_compute_score()(completion, truth))]


def test_final_answer_and_a_raw_gsm8k_reference() -> None:
    assert final_answer("so #### 1,000 apples") == "1000" and final_answer("no answer") is None
    raw = Example(prompt="q", answer="48 + 24 = <<48+24=72>>72\n#### 72")  # the dataset's own answer column
    assert load_reward("gsm8k")(["#### 72", "#### 71"], [raw, raw]) == [1.0, 0.0]
