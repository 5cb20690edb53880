"""Reward functions by signature: grpokit's, TRL's own (imported from `trl`) and verl-style, used unchanged."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import toy_rewards

from grpokit.audit import audit_reward, render
from grpokit.data import Example, get_task, load_jsonl
from grpokit.rewards import RewardManager, load_reward
from grpokit.rewards.signature import detect_convention

trl_rewards = pytest.importorskip("trl.rewards")


def _conversation(question: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": question}]


def test_conventions_are_detected_from_the_signature() -> None:
    assert detect_convention(load_reward("exact_numeric")) == "grpokit"
    assert detect_convention(lambda c, e: [0.0] * len(c)) == "grpokit"
    assert detect_convention(toy_rewards.vowel_frac) == "grpokit"
    assert detect_convention(toy_rewards.reward_len) == "trl"
    assert detect_convention(trl_rewards.accuracy_reward) == "trl"
    assert detect_convention(trl_rewards.think_format_reward) == "trl"
    assert detect_convention(trl_rewards.get_soft_overlong_punishment(10, 5)) == "trl"  # a callable object
    assert detect_convention(toy_rewards.compute_score) == "verl"
    assert detect_convention(toy_rewards.gsm8k_strict) == "verl"

    def three(a, b, c):
        return [0.0]

    with pytest.raises(
        ValueError, match=r"'.*three'\(a, b, c\) matches no reward convention.*\*\*kwargs.*solution_str"
    ):
        RewardManager([(three, 1.0)])


def test_trl_reward_len_from_the_cli_spec(tmp_path: Path) -> None:
    """The issue's case: `audit-reward --reward rewards.py:reward_len` used to raise TypeError 39 times."""
    rewards = tmp_path / "rewards.py"
    rewards.write_text(
        "def reward_len(completions, **kwargs):\n"
        "    return [-abs(20 - len(completion)) for completion in completions]\n"
    )
    report = audit_reward(f"{rewards}:reward_len", timeout_s=5)
    assert report["convention"] == "trl" and "(trl-style, kind numeric" in render(report)
    assert report["failures"] == []
    assert report["determinism"]["ok"]
    assert report["probes"]["correct_score"] == -19.0  # "7" is 19 characters short of 20
    with RewardManager([(f"{rewards}:reward_len", 1.0)]) as m:
        result = m.score(["a" * 20, "a" * 25], [Example("q", "1")] * 2)
    assert result.rewards == [0.0, -5.0] and result.failures == []


def test_trl_reward_receives_prompts_columns_and_trainer_state(tmp_path: Path) -> None:
    data = tmp_path / "train.jsonl"
    rows = [
        {"prompt": "Q1: 2+2?", "solution": "4", "difficulty": 1},
        {"prompt": "Q2: 3*3?", "solution": "9", "difficulty": 3},
    ]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    examples = load_jsonl(data, answer_key="solution")
    with RewardManager([("toy_rewards:trl_reads_columns", 1.0)]) as m:
        result = m.score(
            ["4", " 9 "],
            examples,
            completion_ids=[[1, 2], [3]],
            trainer_state={"global_step": 7},
        )
    assert result.failures == [] and result.rewards == [1.0, 3.0]


def test_trl_accuracy_reward_conversational_with_none_as_not_applicable() -> None:
    solutions = [r"\frac{1}{3}", r"\frac{1}{3}", "not latex at all {"]
    examples = [
        Example(prompt="What is 1/3?", answer=s, columns={"prompt": _conversation("What is 1/3?"), "solution": s})
        for s in solutions
    ]
    completions = [r"My answer is \boxed{\frac{1}{3}}", r"My answer is \boxed{\frac{1}{2}}", r"\boxed{1}"]
    with RewardManager([("trl.rewards:accuracy_reward", 1.0), ("trl.rewards:think_format_reward", 0.5)]) as m:
        result = m.score(completions, examples)
    assert result.per_reward["accuracy_reward"][:2] == [1.0, 0.0]
    assert math.isnan(result.per_reward["accuracy_reward"][2])  # gold not parseable: TRL returns None
    assert result.per_reward["think_format_reward"] == [0.0, 0.0, 0.0]
    assert result.rewards == [1.0, 0.0, 0.0]  # sample 2: only the format reward applies
    assert result.failures == []
    assert result.metrics["reward/accuracy_reward_none_frac"] == pytest.approx(1 / 3)


def test_trl_rewards_that_want_messages_get_them_with_plain_prompts() -> None:
    """accuracy_reward and think_format_reward index completion[0]["content"]; string prompts work too."""
    examples = [Example("What is 1/2?", r"\frac{1}{2}", columns={"prompt": "What is 1/2?", "solution": "0.5"})] * 2
    completions = ["<think>half</think> \\boxed{\\frac{1}{2}}", "\\boxed{2}"]
    with RewardManager([("trl.rewards:accuracy_reward", 1.0), ("trl.rewards:think_format_reward", 1.0)]) as m:
        result = m.score(completions, examples)
    assert result.failures == []
    assert result.per_reward == {"accuracy_reward": [1.0, 0.0], "think_format_reward": [1.0, 0.0]}


def test_trl_reward_needing_a_missing_column_fails_with_the_fix() -> None:
    examples = get_task("add1").examples("train", 2, seed=0)
    with RewardManager([("trl.rewards:accuracy_reward", 1.0)], max_fail_frac=1.0) as m:
        result = m.score(["1", "2"], examples)
    assert [f.kind for f in result.failures] == ["exception", "exception"]
    msg = result.failures[0].message
    assert "needs ['solution'], which the dataset does not have" in msg
    assert "'a'" in msg and "'answer'" in msg and "rename the column" in msg


def test_trl_soft_overlong_punishment_reads_completion_ids() -> None:
    punish = trl_rewards.get_soft_overlong_punishment(max_completion_len=10, soft_punish_cache=4)
    examples = [Example("q", "1")] * 3
    with RewardManager([(punish, 1.0)], max_fail_frac=1.0) as m:
        result = m.score(["a", "b", "c"], examples, completion_ids=[[1] * 5, [1] * 8, [1] * 12])
        assert result.rewards == [0.0, -0.5, -1.0]
        missing = m.score(["a"], examples[:1])  # the caller did not pass token ids
    [failure] = missing.failures
    assert "reads completion_ids, which the caller did not pass to score()" in failure.message


def test_verl_compute_score_with_reward_model_ground_truth_and_extra_info() -> None:
    def verl_row(truth: str, split: str) -> dict:
        return {
            "data_source": "openai/gsm8k",
            "prompt": _conversation("How many?"),
            "reward_model": {"style": "rule", "ground_truth": truth},
            "extra_info": {"split": split, "index": 0},
        }

    examples = [
        Example("How many?", "72", columns=verl_row("72", "train")),
        Example("How many?", "72", columns=verl_row("72", "test")),
        Example("How many?", "10", columns=verl_row("10", "train")),
    ]
    completions = ["... #### 72", "#### 72", "I think 10"]
    with RewardManager([("toy_rewards:compute_score", 1.0), ("toy_rewards:gsm8k_strict", 1.0)]) as m:
        result = m.score(completions, examples)
    assert result.failures == []
    assert result.per_reward["compute_score"] == [1.0, 1.5, 0.0]  # dict results: their "score"
    assert result.per_reward["gsm8k_strict"] == [1.0, 1.0, 0.0]


def test_verl_reward_on_grpokit_examples_uses_the_answer() -> None:
    examples = [Example("q", "18", meta={"task": "openai/gsm8k"})]
    with RewardManager([("toy_rewards:compute_score", 1.0)]) as m:
        assert m.score(["#### 18"], examples).rewards == [1.0]


def test_grpokit_convention_still_gets_example_objects() -> None:
    def grpokit_style(completions, examples):
        return [float(type(e).__name__ == "Example" and c == e.answer) for c, e in zip(completions, examples)]

    with RewardManager([(grpokit_style, 1.0)]) as m:
        assert m.score(["3", "4"], [Example("q", "3")] * 2).rewards == [1.0, 0.0]


def test_audit_of_trl_accuracy_reward_on_math_probes() -> None:
    report = audit_reward("trl.rewards:accuracy_reward", kind="math", timeout_s=10)
    assert report["failures"] == []
    assert report["probes"]["correct_score"] == 1.0
    equivalent = {c["case"]: c["score"] for c in report["probes"]["equivalent"]}
    assert equivalent["decimal"] == 1.0 and equivalent["slash fraction"] == 1.0
    hacks = {c["case"]: c["score"] for c in report["probes"]["hacks"]}
    assert hacks["wrong answer"] == 0.0 and hacks["empty"] == 0.0


def test_per_sample_retry_passes_each_sample_its_own_ids_and_prompt() -> None:
    examples = [Example("q", "1")] * 3
    ids = [[1, 2], [3], [4, 5, 6]]
    with RewardManager([("toy_rewards:ids_length_unless_bad", 1.0)], max_fail_frac=1.0) as m:
        result = m.score(["ok", "bad", "fine"], examples, completion_ids=ids)
        assert result.metrics["reward/batch_retries"] == 1
        assert result.rewards[0] == 2.0 and result.rewards[2] == 3.0 and math.isnan(result.rewards[1])
        assert [f.index for f in result.failures] == [1]
        with pytest.raises(ValueError, match="3 completions but 2 completion_ids"):
            m.score(["a", "b", "c"], examples, completion_ids=ids[:2])


def test_caller_given_conversational_prompts_make_message_completions() -> None:
    seen = []

    def shape(prompts, completions, **kwargs):
        seen.append((prompts[0][0]["role"], completions[0][0]["role"], completions[0][0]["content"]))
        return [1.0] * len(completions)

    with RewardManager([(shape, 1.0)], isolation="inline") as m:  # inline, so `seen` is this process's list
        assert m.score(["hi"], [Example("q", "1")], prompts=[[{"role": "user", "content": "q"}]]).rewards == [1.0]
    assert seen == [("user", "assistant", "hi")]
