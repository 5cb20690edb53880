"""Rewards: built-ins, user `module:function` rewards, and RewardManager's failure isolation (no mocks)."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from grpokit.data import Example, get_task
from grpokit.rewards import FAILURE_KINDS, RewardFailureError, RewardManager, list_rewards, load_reward
from grpokit.rewards.countdown import extract_expression

USER_REWARDS = """
import os
import subprocess
import sys
import time


def length_bonus(completions, examples):
    return [min(len(c), 10) / 10 for c in completions]


def raises_on_bad(completions, examples):
    out = []
    for c in completions:
        if "bad" in c:
            raise ValueError("cannot score " + c)
        out.append(1.0)
    return out


def none_on_bad(completions, examples):
    return [None if "bad" in c else 1.0 for c in completions]


def nan_on_bad(completions, examples):
    return [float("nan") if "bad" in c else 1.0 for c in completions]


def huge_on_bad(completions, examples):
    return [1e30 if "bad" in c else 1.0 for c in completions]


def inf_on_bad(completions, examples):
    return [float("inf") if "bad" in c else 1.0 for c in completions]


def interrupt_on_bad(completions, examples):
    if any("bad" in c for c in completions):
        raise KeyboardInterrupt
    return [1.0] * len(completions)


def str_on_bad(completions, examples):
    return ["bad" if "bad" in c else 1.0 for c in completions]


def dict_on_bad(completions, examples):
    if any("bad" in c for c in completions):
        return {"score": 1.0}
    return [1.0] * len(completions)


def skips_bad(completions, examples):
    return [1.0 for c in completions if "bad" not in c]


def hangs_on_bad(completions, examples):
    if any("bad" in c for c in completions):
        time.sleep(60)
    return [1.0] * len(completions)


def dies_on_bad(completions, examples):
    if any("bad" in c for c in completions):
        os._exit(3)
    return [1.0] * len(completions)


def one_value(completions, examples):
    return [1.0]


def worker_pid(completions, examples):
    return [float(os.getpid())] * len(completions)


NOT_A_FUNCTION = 3
"""


@pytest.fixture
def user_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The name of a fresh importable module holding USER_REWARDS."""
    name = f"user_rewards_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(USER_REWARDS))
    monkeypatch.syspath_prepend(str(tmp_path))
    return name


def _ex(answer: str) -> Example:
    return Example(prompt="q", answer=answer)


@pytest.mark.parametrize(
    ("completion", "answer", "expected"),
    [
        ("The answer is 42", "42", 1.0),
        ("7 + 5 = 12, so 13", "13", 1.0),  # the last number counts
        ("13, no wait, 12", "13", 0.0),
        ("It is -7.", "-7", 1.0),
        ("5-3 = 2", "2", 1.0),  # a minus between numbers is an operator
        ("x = 5-3", "-3", 0.0),
        ("Total: 1,234 apples", "1234", 1.0),
        ("1,234,567", "1,234,567", 1.0),
        ("2.50", "2.5", 1.0),
        ("42.0", "42", 1.0),
        ("no number here", "3", 0.0),
        ("", "0", 0.0),
        ("\u22123", "-3", 1.0),  # unicode minus
        ("#### 18", "Janet makes 18 dollars #### 18", 1.0),
    ],
)
def test_exact_numeric(completion: str, answer: str, expected: float) -> None:
    assert load_reward("exact_numeric")([completion], [_ex(answer)]) == [expected]


def test_exact_numeric_rejects_a_non_numeric_reference() -> None:
    with pytest.raises(ValueError, match=r"reference answer 'x\^2' .* math_verify"):
        load_reward("exact_numeric")(["4"], [_ex("x^2")])


@pytest.mark.parametrize(
    ("completion", "expected"),
    [
        ("42", 1.0),
        (" 42.\n", 1.0),
        ("-1,234.5", 1.0),
        ("The answer is 42", 0.0),
        ("42 apples", 0.0),
        ("", 0.0),
    ],
)
def test_format(completion: str, expected: float) -> None:
    assert load_reward("format")([completion], [_ex("42")]) == [expected]


@pytest.mark.parametrize(
    ("completion", "answer", "expected"),
    [
        ("So the answer is \\boxed{1/2}", "0.5", 1.0),
        ("\\boxed{\\frac{1}{2}}", "1/2", 1.0),
        ("$\\frac{3}{6}$", "\\frac{1}{2}", 1.0),
        ("The answer is 42", "42", 1.0),
        ("\\boxed{41}", "42", 0.0),
        ("I don't know", "42", 0.0),
    ],
)
def test_math_verify(completion: str, answer: str, expected: float) -> None:
    assert load_reward("math_verify")([completion], [_ex(answer)]) == [expected]


def test_countdown_reward_and_extraction() -> None:
    ex = get_task("countdown").example([3, 5, 2], 16)
    fn = load_reward("countdown")
    good = [
        "(3 + 5) * 2",
        "Let me think.\nAnswer: 2 * (5 + 3)\nDone.",
        "2*(3+5) = 16.",
        "\\boxed{(5+3)\u00d72}",
    ]
    assert fn(good, [ex] * len(good)) == [1.0] * len(good)
    bad = [
        "(3 + 5) * 2 * 1",
        "3 * 5 + 2 - 1",
        "(3 + 5) * 2\nwait, no: 3 + 5",
        "__import__('os')",
        "16",
        "8 * 2",
    ]
    assert fn(bad, [ex] * len(bad)) == [0.0] * len(bad)
    assert extract_expression("The expression is (3 + 5) * 2") == "(3 + 5) * 2"


def test_load_reward_errors(user_module: str, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"unknown reward 'exact_numerc'.*Did you mean 'exact_numeric'"):
        load_reward("exact_numerc")
    with pytest.raises(ValueError, match=r"reward 'no_such_module:f'.*cannot import module 'no_such_module'"):
        load_reward("no_such_module:f")
    with pytest.raises(ValueError, match=rf"'{user_module}:missing'.*no attribute 'missing'.*length_bonus"):
        load_reward(f"{user_module}:missing")
    with pytest.raises(ValueError, match=r"not a function"):
        load_reward(f"{user_module}:NOT_A_FUNCTION")
    by_path = load_reward(f"{tmp_path / user_module}.py:length_bonus")
    assert by_path(["abcde"], [_ex("1")]) == [0.5]
    assert set(list_rewards()) == {
        "exact_numeric",
        "math_verify",
        "format",
        "countdown",
        "code_exec",
        "gsm8k",
        "verl_data_source",
    }


def test_user_reward_by_module_path(user_module: str) -> None:
    fn = load_reward(f"{user_module}:length_bonus")
    assert fn(["abc", "a" * 50], [_ex("1"), _ex("2")]) == [0.3, 1.0]
    with RewardManager([(f"{user_module}:length_bonus", 1.0)]) as m:
        result = m.score(["abc", "a" * 50], [_ex("1"), _ex("2")])
        assert result.rewards == [0.3, 1.0]
        assert result.per_reward == {"length_bonus": [0.3, 1.0]}
        assert m.worker.pid is not None and m.worker.pid != os.getpid()  # it ran in the worker


def test_weighted_sum_of_two_rewards(user_module: str) -> None:
    examples = [_ex("42")] * 3
    completions = ["42", "The answer is 42", "41"]
    with RewardManager([("exact_numeric", 1.0), ("format", 0.5)], correctness="exact_numeric") as m:
        result = m.score(completions, examples)
    assert result.rewards == [1.5, 1.0, 0.5]
    assert result.accuracy == [1.0, 1.0, 0.0]
    assert result.per_reward == {"exact_numeric": [1.0, 1.0, 0.0], "format": [1.0, 0.0, 1.0]}
    assert result.failures == []
    assert result.metrics["reward/exact_numeric_mean"] == pytest.approx(2 / 3)
    assert result.metrics["reward/format_mean"] == pytest.approx(2 / 3)
    assert result.metrics["reward/fail_frac"] == 0.0
    assert all(result.metrics[f"reward/failures_{k}"] == 0 for k in FAILURE_KINDS)
    with RewardManager([(f"{user_module}:length_bonus", 2.0), ("exact_numeric", -1.0)]) as m:
        assert m.score(["42", "x"], [_ex("42"), _ex("42")]).rewards == pytest.approx([2 * 0.2 - 1, 2 * 0.1])


@pytest.mark.parametrize(
    ("fn", "kind", "message"),
    [
        ("raises_on_bad", "exception", "ValueError: cannot score bad"),
        ("nan_on_bad", "nan", "returned nan"),
        ("inf_on_bad", "nan", "returned inf"),
        ("huge_on_bad", "nan", "returned 1e+30, outside +-1e+06"),
        ("interrupt_on_bad", "exception", "the reward raised KeyboardInterrupt (at "),
        ("str_on_bad", "exception", "returned str 'bad', expected a float"),
        ("dict_on_bad", "wrong_count", "returned a dict instead of a list for 1 completion"),
        ("skips_bad", "wrong_count", "returned 0 values for 1 completion"),
        ("hangs_on_bad", "timeout", "no result after 1 s"),
        ("dies_on_bad", "exception", "worker process died (exit code"),
    ],
)
def test_each_failure_kind_is_isolated_and_reported(user_module: str, fn: str, kind: str, message: str) -> None:
    completions = ["fine 1", "bad sample", "fine 2", "fine 3"]
    examples = [_ex(str(i)) for i in range(4)]
    with RewardManager([(f"{user_module}:{fn}", 1.0), ("format", 0.0)], timeout_s=1.0) as m:
        first_pid = m.worker.pid
        t0 = time.perf_counter()
        result = m.score(completions, examples)
        elapsed = time.perf_counter() - t0
        [failure] = result.failures
        assert (failure.reward, failure.index, failure.completion, failure.kind) == (
            fn,
            1,
            "bad sample",
            kind,
        )
        assert message in failure.message
        assert math.isnan(result.rewards[1]) and math.isnan(result.per_reward[fn][1])
        assert [result.rewards[i] for i in (0, 2, 3)] == [1.0, 1.0, 1.0]  # the others still scored
        assert result.metrics[f"reward/failures_{kind}"] == 1
        assert sum(result.metrics[f"reward/failures_{k}"] for k in FAILURE_KINDS) == 1
        assert result.metrics["reward/fail_frac"] == 0.25
        assert result.metrics[f"reward/{fn}_mean"] == 1.0
        if kind == "timeout":
            assert elapsed < 5  # batch call + one per-sample call, each cut at 1 s
            with pytest.raises(ProcessLookupError):
                os.kill(first_pid, 0)  # the hung worker really was killed
            assert m.worker.started == 3  # killed twice (batch, then the bad sample) and re-forked
        # the manager keeps working after the failure
        assert m.score(["fine"], [_ex("0")]).rewards == [1.0]


def test_none_is_not_applicable_and_left_out_of_the_weighted_sum(user_module: str) -> None:
    completions = ["fine 1", "bad sample", "fine 2"]
    with RewardManager([(f"{user_module}:none_on_bad", 1.0), ("format", 0.5)]) as m:
        result = m.score(completions, [_ex("1")] * 3)
    assert result.failures == []
    assert result.rewards == [1.0, 0.0, 1.0]  # sample 1: only format (0.0 * 0.5) applies
    assert math.isnan(result.per_reward["none_on_bad"][1]) and math.isnan(result.accuracy[1])
    assert result.metrics["reward/none_on_bad_none_frac"] == pytest.approx(1 / 3)
    assert result.metrics["reward/format_none_frac"] == 0.0
    assert result.metrics["reward/fail_frac"] == 0.0
    # a sample no reward applies to is not a failure: it scores 0 (as TRL does) and counts in reward/na_frac
    with RewardManager([(f"{user_module}:none_on_bad", 1.0)]) as m:
        result = m.score(completions, [_ex("1")] * 3)
    assert result.failures == [] and result.not_applicable == [1]
    assert result.rewards == [1.0, 0.0, 1.0]
    assert result.metrics["reward/na_frac"] == pytest.approx(1 / 3) and result.metrics["reward/fail_frac"] == 0.0


def test_batch_level_failure_with_no_bad_sample_is_counted(user_module: str) -> None:
    with RewardManager([(f"{user_module}:one_value", 1.0)]) as m:
        result = m.score(["a", "b", "c"], [_ex("1")] * 3)
    assert result.rewards == [1.0, 1.0, 1.0] and result.failures == []
    assert result.metrics["reward/batch_retries"] == 1


def test_exceeding_max_fail_frac_raises_a_clear_error(user_module: str) -> None:
    completions = ["bad 1", "bad 2", "fine", "bad 3"]
    with RewardManager([(f"{user_module}:raises_on_bad", 1.0)], max_fail_frac=0.5) as m:
        with pytest.raises(RewardFailureError) as info:
            m.score(completions, [_ex("1")] * 4)
    msg = str(info.value)
    assert "raises_on_bad" in msg and "3 of 4" in msg and "3 exception" in msg and "'bad 1'" in msg
    assert "reward.max_fail_frac" in msg
    assert [f.index for f in info.value.failures] == [0, 1, 3]
    with RewardManager([(f"{user_module}:raises_on_bad", 1.0)], max_fail_frac=0.8) as m:
        assert m.score(completions, [_ex("1")] * 4).metrics["reward/fail_frac"] == 0.75
    # the same share of samples no reward applies to (None) is no failure: nothing raises at max_fail_frac=0.5
    with RewardManager([(f"{user_module}:none_on_bad", 1.0)], max_fail_frac=0.5) as m:
        metrics = m.score(completions, [_ex("1")] * 4).metrics
    assert metrics["reward/fail_frac"] == 0.0 and metrics["reward/na_frac"] == 0.75


def test_in_process_reward_failure_raises_with_the_reward_name() -> None:
    with RewardManager([("exact_numeric", 1.0)]) as m:
        with pytest.raises(RewardFailureError, match=r"reward 'exact_numeric' failed on at least 3 of 4.*exception"):
            m.score(["1", "2", "3", "4"], [_ex("not a number")] * 4)


def test_manager_rejects_bad_configuration(user_module: str) -> None:
    with pytest.raises(ValueError, match="unknown reward 'formt'"):
        RewardManager([("formt", 1.0)])
    with pytest.raises(ValueError, match="correctness='nope'"):
        RewardManager([("format", 1.0)], correctness="nope")


def test_builtin_rewards_are_fast() -> None:
    """The in-process built-ins on 32 completions must cost well under 50 ms (measured: well under 1 ms)."""
    examples = get_task("add2").examples("train", 32, seed=0)
    completions = [f"Let me add: the answer is {int(e.answer) + i % 2}." for i, e in enumerate(examples)]
    with RewardManager([("exact_numeric", 1.0), ("format", 0.2)]) as m:
        m.score(completions, examples)
        best = min(m.score(completions, examples).metrics["reward/seconds"] for _ in range(5))
    assert best < 0.01
    cd = get_task("countdown").examples("train", 32, seed=0)
    with RewardManager([("countdown", 1.0)]) as m:
        assert min(m.score([e.meta["solution"] for e in cd], cd).metrics["reward/seconds"] for _ in range(3)) < 0.01


UNORDERED = {
    "set": lambda c: {float(len(x)) for x in c},  # iterated in hash order, not the completions' order
    "dict": lambda c: {x: float(len(x)) for x in c},
    "str": lambda c: "".join(str(len(x)) for x in c),
}


def ordered(make):
    return lambda c, e: make([float(len(x)) if x != "-" else None for x in c])


@pytest.mark.parametrize("isolation", ["process", "inline"])
def test_only_ordered_sequences_of_numbers_or_none_are_rewards(isolation: str) -> None:
    import numpy as np

    for kind, make in UNORDERED.items():
        with RewardManager([(lambda c, e, make=make: make(c), 1.0)], isolation=isolation, max_fail_frac=1.0) as m:
            result = m.score(["ab", "abc"], [_ex("1")] * 2)
        assert all(math.isnan(r) for r in result.rewards), kind
        assert [(f.index, f.kind) for f in result.failures] == [(0, "wrong_count"), (1, "wrong_count")], kind
        message = result.failures[0].message
        assert message.startswith(f"returned a {kind} instead of a list for 1 completion; return a list (or tuple)")
        assert "one float, or None where the reward does not apply, per completion, in the completions' order" in (
            message
        )
    nan_for_none = lambda v: np.array([np.nan if x is None else x for x in v])  # noqa: E731
    generator = lambda v: (x for x in v)  # noqa: E731 (TRL iterates whatever a reward returns)
    for make in (list, tuple, nan_for_none, generator, iter):
        with RewardManager([(ordered(make), 1.0), ("format", 0.0)], isolation=isolation, max_fail_frac=1.0) as m:
            result = m.score(["ab", "-", "abc"], [_ex("1")] * 3)
        assert result.rewards[0] == 2.0 and result.rewards[2] == 3.0, make


def test_function_spec_runs_in_the_worker() -> None:
    scale = 2.0
    with RewardManager([(lambda c, e: [scale * len(x) for x in c], 1.0)]) as m:  # closures work (cloudpickle)
        result = m.score(["ab", "abc"], [_ex("1")] * 2)
        assert result.rewards == [4.0, 6.0] and m.worker.pid is not None


def test_interpreter_exits_promptly_with_a_live_worker(tmp_path: Path) -> None:
    script = tmp_path / "run.py"
    script.write_text(
        "from grpokit.data import Example\n"
        "from grpokit.rewards import RewardManager\n"
        "m = RewardManager([(lambda c, e: [1.0] * len(c), 1.0)])\n"
        "print(m.score(['x'], [Example('q', '1')]).rewards)\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[1.0]"
