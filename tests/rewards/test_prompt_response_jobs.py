"""Jobs whose verl scorer reads the prompt + response, run for 2 steps on the tiny model (issue 39): TinyZero's
countdown (`tinyzero/countdown.py`) and simpleRL-reason's Knights and Knaves (`simplerl/kk.py`, which its
`main_ppo.py` RewardManager calls with `tokenizer.decode(prompt + response)`), their data in their own schema, their
scorers vendored byte for byte (tests/fixtures/conventions/SOURCE.md), with reward.verl_solution_str=prompt+response.
A probe scorer beside them checks that what they get starts with the prompt as the model saw it (the chat template
decoded with its special tokens)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from tiny_config import tiny_overrides

from grpokit.config import build_config
from grpokit.training import Trainer
from grpokit.training.evaluation import evaluate

pytestmark = pytest.mark.slow

FIX = Path(__file__).parents[1] / "fixtures" / "conventions"
PROBE = '''
def sees_the_prompt(data_source, solution_str, ground_truth, extra_info):
    """1 where solution_str is the chat-templated prompt (holding this row's question), then the response."""
    head, _, _ = solution_str.partition("<|im_start|>assistant\\n")
    return float(solution_str.startswith("<|im_start|>") and extra_info["needle"] in head)
'''


def _countdown_rows() -> list[dict]:
    rows = []
    for i in range(12):
        nums, target = [i + 2, 3, 5], (i + 2) * 3 + 5
        question = (
            f"Using the numbers {nums}, create an equation that equals {target}. You can use basic arithmetic "
            "operations (+, -, *, /) and each number can only be used once. Show your work in <think> </think> "
            "tags. And return the final answer in <answer> </answer> tags, for example <answer> (1 + 2) / 3 </answer>."
        )
        rows.append(
            {
                "data_source": "countdown",
                "prompt": [{"role": "user", "content": question}],
                "ability": "math",
                "reward_model": {"style": "rule", "ground_truth": {"target": target, "numbers": nums}},
                "extra_info": {"split": "train", "index": i, "needle": f"equals {target}."},
            }
        )
    return rows


def _kk_rows() -> list[dict]:
    names = ["Zoey", "Oliver", "Ava", "Liam", "Mia", "Noah"]
    rows = []
    for i in range(12):
        a, b = names[i % 6], names[(i + 1) % 6]
        question = (
            "A very special island is inhabited only by knights and knaves. Knights always tell the truth, and "
            f"knaves always lie. You meet 2 inhabitants: {a} and {b}. {a} says that {b} is a knave. {b} says "
            f"that {a} is a knight or {b} is a knight. So who is a knight and who is a knave? (question {i})"
        )
        truth = f"({1}) {a} is a knave\n({2}) {b} is a knight"
        rows.append(
            {
                "data_source": "kk_logic",
                "prompt": [{"role": "user", "content": question}],
                "reward_model": {"style": "rule", "ground_truth": {"solution_text_format": truth}},
                "extra_info": {"split": "train", "index": i, "needle": f"(question {i})"},
            }
        )
    return rows


def _two_steps(tmp_path: Path, rows: list[dict], scorer: str) -> tuple[list[dict[str, float]], dict[str, float]]:
    """The metrics of two training steps, and of an evaluation after them (the probe's mean is the accuracy)."""
    data = tmp_path / "train.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "probe.py").write_text(PROBE)
    rewards = f"[{tmp_path / 'probe.py'}:sees_the_prompt,{scorer}]"  # the probe first: it is the accuracy
    overrides = tiny_overrides(
        f"data.task={data}", f"reward.functions={rewards}", "reward.weights=[0,1]", "train.steps=2"
    )
    cfg = build_config("grpo", overrides=[*overrides, "reward.verl_solution_str=prompt+response"])
    t = Trainer(cfg, tmp_path / "run")
    try:
        steps = [t.train_step().metrics for _ in range(2)]
        return steps, evaluate(t.session, seed=1)
    finally:
        t.session.close()


def test_tinyzero_countdown_trains_two_steps_given_prompt_and_response(tmp_path: Path) -> None:
    steps, held_out = _two_steps(tmp_path, _countdown_rows(), f"{FIX / 'tinyzero' / 'countdown.py'}:compute_score")
    assert held_out["eval/accuracy"] == 1.0  # evaluation gives the scorers the prompt as the model saw it too
    for m in steps:
        assert m["reward/fail_frac"] == 0.0 and m["reward/sees_the_prompt_mean"] == 1.0
        # the tiny model writes no <answer>: TinyZero's 0 (0.1 for a well-formed wrong one, 1 for a right one)
        assert 0.0 <= m["reward/compute_score_mean"] <= 1.0


def test_simplerl_knights_and_knaves_trains_two_steps_given_prompt_and_response(tmp_path: Path) -> None:
    steps, _ = _two_steps(tmp_path, _kk_rows(), f"{FIX / 'simplerl' / 'kk.py'}:compute_score")
    for m in steps:
        assert m["reward/fail_frac"] == 0.0 and m["reward/sees_the_prompt_mean"] == 1.0
        # no <think>/<answer> structure from the tiny model: kk.py's format penalty, -1, for every completion
        assert m["reward/compute_score_mean"] == -1.0 and m["reward/compute_score_constant"] == 1.0
        assert math.isfinite(m["reward/mean"])
