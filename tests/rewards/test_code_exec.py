"""`code_exec` and the `code1` task: real programs run in the sandboxed reward worker (no mocks)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from grpokit.data import Example, get_task, list_tasks
from grpokit.data.code import PROBLEMS
from grpokit.rewards import RewardManager, list_rewards
from grpokit.rewards.codeexec import extract_code, run_tests

SOLUTIONS = {
    "add": "def add(a, b):\n    return a + b",
    "square": "def square(x):\n    return x * x",
    "is_even": "def is_even(n):\n    return n % 2 == 0",
    "maximum": "def maximum(xs):\n    return max(xs)",
    "reverse_string": "def reverse_string(s):\n    return s[::-1]",
    "count_vowels": "def count_vowels(s):\n    return sum(c in 'aeiouAEIOU' for c in s)",
    "factorial": "import math\ndef factorial(n):\n    return math.factorial(n)",
    "fibonacci": "def fibonacci(n):\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a",
    "sum_list": "def sum_list(xs):\n    return sum(xs)",
    "is_palindrome": "def is_palindrome(s):\n    return s == s[::-1]",
    "absolute": "def absolute(x):\n    return abs(x)",
    "first_char": "def first_char(s):\n    return s[:1]",
    "count_char": "def count_char(s, c):\n    return s.count(c)",
    "to_fahrenheit": "def to_fahrenheit(c):\n    return c * 9 / 5 + 32",
    "last_element": "def last_element(xs):\n    return xs[-1] if xs else None",
    "double_all": "def double_all(xs):\n    return [2 * x for x in xs]",
    "min_of_three": "def min_of_three(a, b, c):\n    return min(a, b, c)",
    "word_count": "def word_count(s):\n    return len(s.split())",
    "clamp": "def clamp(x, lo, hi):\n    return max(lo, min(x, hi))",
    "digit_sum": "def digit_sum(n):\n    return sum(int(d) for d in str(n))",
}
ADD = Example("Write add(a, b)", json.dumps({"tests": ["assert add(1, 2) == 3", "assert add(0, 0) == 0"]}), id="add")


def _fenced(code: str) -> str:
    return f"Here is the function:\n```python\n{code}\n```\nIt works."


def test_code1_task_splits_and_reward() -> None:
    task = get_task("code1")
    assert "code1" in list_tasks() and "code_exec" in list_rewards()
    assert task.default_reward == "code_exec"
    train, test = task.examples("train"), task.examples("test")
    assert (len(train), len(test)) == (15, 5)
    assert {e.id for e in train}.isdisjoint({e.id for e in test})
    assert task.examples("train", 40, seed=1) == task.examples("train", 40, seed=1)
    assert {e.id for e in task.examples("train", 40, seed=1)} == {e.id for e in train}
    assert all("```python" in e.prompt and e.meta["function"] in e.prompt for e in train + test)


def test_every_reference_solution_passes_in_the_sandbox() -> None:
    task = get_task("code1")
    examples = task.examples("train") + task.examples("test")
    assert sorted(e.meta["function"] for e in examples) == sorted(name for name, *_ in PROBLEMS)
    completions = [_fenced(SOLUTIONS[e.meta["function"]]) for e in examples]
    with RewardManager([("code_exec", 1.0)]) as m:
        assert m.worker.pid is not None  # code_exec runs in the sandboxed worker
        t0 = time.perf_counter()
        result = m.score(completions, examples)
        elapsed = time.perf_counter() - t0
    assert result.failures == [] and result.rewards == [1.0] * 20
    assert elapsed < 10  # ~30 ms per program on 2 cores


@pytest.mark.parametrize(
    ("completion", "expected"),
    [
        ("```python\ndef add(a, b):\n    return a + b\n```", 1.0),
        ("def add(a, b):\n    return a + b", 1.0),  # no fence: the whole completion
        ("```python\ndef add(a, b):\n    return a * b\n```", 0.5),  # 0 * 0 == 0 passes, 1 * 2 == 3 fails
        ("```python\ndef add(a, b) return a + b\n```", 0.0),  # syntax error
        ("```python\nraise RuntimeError('no')\n```", 0.0),
        ("The answer is 3.", 0.0),
        ("```python\nimport sys\nsys.exit(0)\n```", 0.0),  # exits before the tests: nothing passed
        ("```python\nimport os\nos._exit(0)\n```", 0.0),
        ("```python\nprint('0 0')\nprint('0 1')\ndef add(a, b):\n    return 0\n```", 0.5),  # fake lines ignored
        ("```python\nimport builtins\nbuiltins.AssertionError = Exception\ndef add(a, b):\n    return 7\n```", 0.0),
    ],
)
def test_code_exec_scores(completion: str, expected: float) -> None:
    with RewardManager([("code_exec", 1.0)], max_fail_frac=1.0) as m:
        result = m.score([completion], [ADD])
    assert result.failures == [] and result.rewards == [expected]


def test_hostile_programs_score_zero_and_do_no_harm() -> None:
    target = Path("/tmp") / f"grpokit-code-escape-{uuid.uuid4().hex}"
    programs = [
        "while True:\n    pass",  # killed at the per-program limit
        f"open({str(target)!r}, 'w').write('x')\ndef add(a, b):\n    return a + b",
        "import socket\nsocket.create_connection(('127.0.0.1', 22), timeout=1)\ndef add(a, b):\n    return a + b",
        "x = bytearray(20 * 2**30)\ndef add(a, b):\n    return a + b",
    ]
    try:
        with RewardManager([("code_exec", 1.0)], timeout_s=30, max_fail_frac=1.0) as m:
            t0 = time.perf_counter()
            result = m.score([_fenced(p) for p in programs], [ADD] * len(programs))
        assert time.perf_counter() - t0 < 15
        assert result.failures == [] and result.rewards == [0.0] * len(programs)
        assert not target.exists()
    finally:
        target.unlink(missing_ok=True)


def test_malformed_reference_is_a_failure_naming_the_example() -> None:
    bad = Example("q", "assert add(1, 2) == 3", id="broken/1")
    with RewardManager([("code_exec", 1.0)], max_fail_frac=1.0) as m:
        [failure] = m.score(["def add(a, b): return a + b"], [bad]).failures
    assert failure.kind == "exception" and "'broken/1' must be JSON like" in failure.message


def test_extract_code_prefers_the_last_python_block() -> None:
    text = "```\nplain\n```\n```python\nfirst\n```\nthen\n```py\nsecond\n```"
    assert extract_code(text) == "second\n"
    assert extract_code("```\nonly plain\n```") == "only plain\n"
    assert extract_code("  x = 1  ") == "x = 1"
    assert extract_code("<think>```python\nsecret\n```</think>```python\nshown\n```") == "shown\n"
    assert extract_code("<think>```python\nunfinished reasoning") == ""
    assert run_tests("def f():\n    return 2", "", ["assert f() == 2", "assert f() == 3"]) == 1


def test_audit_reward_code_probes_pass_for_code_exec() -> None:
    from grpokit.audit import audit_reward

    report = audit_reward("code_exec", kind="code", timeout_s=10)
    assert report["verdict"] == "PASS", report["issues"]
    assert report["probes"]["correct_score"] == 1.0
    assert {c["case"]: c["score"] for c in report["probes"]["hacks"]}["answer only in reasoning"] == 0.0


CODE_TRAINER = """
import json, sys
from grpokit.data import Example
from grpokit.rewards import RewardManager

m = RewardManager([("code_exec", 1.0)], timeout_s=120)
print(m.worker.pid, flush=True)
program = "```python\\nimport time\\ntime.sleep(60)\\n```"
m.score([program], [Example("q", json.dumps({"tests": ["assert True"]}))])
"""


def _parent(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return 0


def _running(pid: int) -> bool:
    """Whether `pid` is alive (not a zombie); once its parents are gone it is no longer under the worker."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in "ZX"
    except OSError:
        return False


def _descends_from(pid: int, ancestor: int) -> bool:
    while pid > 1:
        pid = _parent(pid)
        if pid == ancestor:
            return True
    return False


def _programs_of(worker: int) -> list[int]:
    """Pids of code_exec programs started under reward worker `worker` (the harness's argv names a parent; the
    calls are served by a process the worker forked into its pid namespace)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
        except OSError:
            continue
        if b'"parent": ' in cmdline and state != "Z" and _descends_from(int(pid), worker):
            found.append(int(pid))
    return found


def test_a_running_program_dies_when_the_trainer_is_killed(tmp_path: Path) -> None:
    script = tmp_path / "trainer.py"
    script.write_text(CODE_TRAINER)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen([sys.executable, str(script)], env=env, stdout=subprocess.PIPE, text=True)
    try:
        worker = int(proc.stdout.readline())
        deadline = time.monotonic() + 10
        while not _programs_of(worker) and time.monotonic() < deadline:
            time.sleep(0.02)
        [program] = _programs_of(worker)
        time.sleep(0.5)  # past the harness's start-up check of its parent: the program itself is running now
        proc.kill()
        proc.wait(timeout=10)
        deadline = time.monotonic() + 1.5  # under the 2 s program timeout, which no one is left to enforce
        while _running(program) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _running(program), f"program {program} outlived the trainer and its worker"
    finally:
        proc.kill()
        proc.wait()
