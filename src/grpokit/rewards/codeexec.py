"""The `code_exec` reward: run the completion's Python code against the example's test cases.

The reference answer is JSON: `{"tests": ["assert add(1, 2) == 3", ...]}` (or just the list of tests), with
an optional `"setup"` (code run before the solution, e.g. imports the tests need). The code is the last
```python fenced block of the completion (else the last ``` block, else the whole completion). The score is
the fraction of tests that pass (1.0 = all).

Each program runs in a fresh interpreter (`python -I -S`: no site-packages, no environment variables) with
a wall-clock limit (`PROGRAM_TIMEOUT_S`) and its own 512 MiB address-space and CPU limits, inside the reward
sandbox when the reward runs in the sandboxed worker (the registry marks `code_exec` isolated): no network,
limited processes, writes only in the worker's private directory. Output of the program is discarded.
The harness reports each passed test with a random nonce the program never sees (it is not in the program's
namespace), so a program that exits early (`sys.exit(0)`, `os._exit(0)`) or prints fake results scores 0
for the tests it did not pass. It is hardened against these common hacks, not against a program that
inspects the harness's own frames. A program that does not compile, raises or loops scores 0 for the tests
it did not pass; only a malformed reference answer is a reward failure (ValueError naming the example).
"""

from __future__ import annotations

import json
import math
import os
import re
import secrets
import subprocess
import sys
from typing import Any

from ..data.example import Example

PROGRAM_TIMEOUT_S = 2.0
PROGRAM_MEMORY_MB = 512
MAX_CODE_CHARS = 20_000
_FENCE = re.compile(r"```([\w+-]*)[ \t]*\n(.*?)```", re.DOTALL)
_THINK = re.compile(r"<think>.*?(</think>|$)", re.DOTALL)

# The harness, run with `python -I -S -c`. It sets its address-space and CPU limits (argv[1]), reads
# {setup, code, tests} as JSON from stdin and the nonce as a second line (kept in a local variable only),
# binds what it needs before the program runs, and reports "<nonce> <i>" per passed test on a duplicate of
# the original stdout; the program's own output is discarded.
_HARNESS = r"""
def _run():
    import json, os, resource, sys
    limits = json.loads(sys.argv[1])
    try:  # die with the reward worker if it is killed mid-run (subprocess starts us without a death signal)
        import ctypes

        ctypes.CDLL(None).prctl(1, 9, 0, 0, 0)  # PR_SET_PDEATHSIG, SIGKILL
    except (OSError, AttributeError):
        pass
    if os.getppid() not in (0, limits["parent"]):  # 0: the worker seen from inside its pid namespace
        os._exit(0)
    resource.setrlimit(resource.RLIMIT_AS, (limits["as"], limits["as"]))
    resource.setrlimit(resource.RLIMIT_CPU, (limits["cpu"], limits["cpu"]))
    spec = json.loads(sys.stdin.readline())
    nonce = sys.stdin.readline().strip()
    sys.stdin.close()
    out = os.dup(1)
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.dup2(null, 2)
    write, compile_, exec_, exit_ = os.write, compile, exec, os._exit
    ns = {"__name__": "__solution__", "__builtins__": __builtins__}
    try:
        exec_(compile_(spec["setup"] + "\n" + spec["code"], "<solution>", "exec"), ns)
    except BaseException:
        exit_(0)
    for i, test in enumerate(spec["tests"]):
        try:
            exec_(compile_(test, "<test>", "exec"), ns)
        except BaseException:
            continue
        write(out, ("%s %d\n" % (nonce, i)).encode())
    exit_(0)


_run()
"""


def extract_code(text: str) -> str:
    """The code of a completion: the last ```python block, else the last ``` block, else the whole text;
    reasoning inside <think>...</think> is not the answer and is dropped first."""
    text = _THINK.sub("", text)
    blocks = _FENCE.findall(text)
    python = [code for lang, code in blocks if lang.lower() in ("python", "py", "python3")]
    if python:
        return python[-1]
    if blocks:
        return blocks[-1][1]
    return text.strip()


def parse_tests(example: Example) -> tuple[str, list[str]]:
    """(setup code, test statements) from the example's answer; ValueError naming the example otherwise."""
    try:
        spec: Any = json.loads(example.answer)
    except ValueError as e:
        raise ValueError(
            f"code_exec: the answer of example {example.id!r} must be JSON like "
            f'{{"tests": ["assert f(1) == 2"]}}, got {example.answer[:80]!r}'
        ) from e
    if isinstance(spec, list):
        spec = {"tests": spec}
    tests = spec.get("tests") if isinstance(spec, dict) else None
    if not isinstance(tests, list) or not tests or not all(isinstance(t, str) for t in tests):
        raise ValueError(
            f"code_exec: example {example.id!r} needs a non-empty list of test statements under 'tests', "
            f"got {example.answer[:80]!r}"
        )
    setup = spec.get("setup", "")
    if not isinstance(setup, str):
        raise ValueError(f"code_exec: 'setup' of example {example.id!r} must be a string of code")
    return setup, tests


def run_tests(code: str, setup: str, tests: list[str], timeout_s: float = PROGRAM_TIMEOUT_S) -> int:
    """How many of `tests` pass after running `code` (and `setup`) in a fresh interpreter."""
    if len(code) > MAX_CODE_CHARS:
        return 0
    nonce = secrets.token_hex(16)
    # set by the harness before it reads the program (not by a preexec_fn, which would force a slow fork of the
    # reward worker, itself a fork of the trainer, instead of vfork)
    limits = json.dumps({"as": PROGRAM_MEMORY_MB << 20, "cpu": math.ceil(timeout_s) + 1, "parent": os.getpid()})
    message = json.dumps({"setup": setup, "code": code, "tests": tests}) + "\n" + nonce + "\n"
    try:
        proc = subprocess.run(
            [sys.executable, "-I", "-S", "-c", _HARNESS, limits],
            input=message.encode(),
            capture_output=True,
            timeout=timeout_s,
            check=False,
        )
        out = proc.stdout
    except subprocess.TimeoutExpired as e:
        out = e.stdout or b""
    passed = set()
    for line in out.decode(errors="replace").splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == nonce and parts[1].isdigit():
            passed.add(int(parts[1]))
    return len(passed & set(range(len(tests))))


def code_exec(completions: list[str], examples: list[Example]) -> list[float]:
    """Fraction of the example's tests that the completion's Python code passes (run in a fresh interpreter)."""
    if len(completions) != len(examples):
        raise ValueError(f"{len(completions)} completions for {len(examples)} examples")
    out = []
    for text, ex in zip(completions, examples):
        setup, tests = parse_tests(ex)
        out.append(run_tests(extract_code(text), setup, tests) / len(tests))
    return out
