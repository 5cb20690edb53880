"""`gsm8k`: GSM8K's '#### answer' check, with the behaviour of verl's default GSM8K scorer.

verl scores rows whose `data_source` is `openai/gsm8k` with `verl.utils.reward_score.gsm8k.compute_score` in its
default ("strict") mode (volcengine/verl, verl/utils/reward_score/gsm8k.py). Its behaviour, which this function
reproduces (grpokit's own code, checked against those rules in tests/rewards/test_gsm8k.py):

* only the completion's last `TAIL_CHARS` (300) characters are searched;
* the answer is the number after the *last* `#### ` (a space after the marks; an optional minus, then digits,
  dots and commas); commas and dollar signs are dropped from it;
* the score is 1.0 when that string equals the reference answer exactly as strings (`#### 72.0` is not `72`),
  else 0.0; no `#### number` at all is 0.0 too.

The reference is the example's answer: verl's `reward_model.ground_truth`, already the bare number, compared as
is; a raw GSM8K answer ("reasoning #### 72") is first cut to what follows its last '####' (verl's preprocessing).
"""

from __future__ import annotations

import re

from ..data.example import Example

TAIL_CHARS = 300
_ANSWER = re.compile(r"#### (-?[0-9.,]+)")


def final_answer(text: str) -> str | None:
    """The number after the last '#### ' within the last TAIL_CHARS characters, commas and '$' dropped; or None."""
    found = _ANSWER.findall(text[-TAIL_CHARS:])
    return found[-1].replace(",", "").replace("$", "") if found else None


def gsm8k_answer(completions: list[str], examples: list[Example]) -> list[float]:
    """1.0 when the completion's '#### answer' equals the reference answer string, else 0.0 (verl's gsm8k)."""
    if len(completions) != len(examples):
        raise ValueError(f"{len(completions)} completions for {len(examples)} examples")
    return [float(final_answer(text) == reference(ex)) for text, ex in zip(completions, examples)]


def reference(example: Example) -> str:
    """The reference answer string: verl's ground truth as is, or what follows a raw GSM8K answer's last '####'."""
    answer = str(example.answer)
    return answer.rpartition("####")[2].strip().replace(",", "") if "####" in answer else answer
