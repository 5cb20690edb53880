"""What the reward sandbox costs: worker start and per-call round trip, sandbox on vs off, and code_exec per program.

A user reward (32 completions per call) runs in the worker process with `SandboxLimits()` (no network, limits,
private tmpfs, Landlock...) or with `sandbox=None` (the same worker, unconfined). "start" is building the
`RewardManager` plus its first call (a fresh interpreter + sandbox set-up + one round trip); "call" is one later
round trip. `--ballast-mb` first fills that much memory in this process (as a loaded model would): the worker
is no fork of it, so its start should not grow with it. Run from the repository root:

    .venv/bin/python bench/reward_sandbox.py
    .venv/bin/python bench/reward_sandbox.py --ballast-mb 512
"""

from __future__ import annotations

import argparse
import statistics
import time

from grpokit.data import get_task
from grpokit.rewards import RewardManager
from grpokit.rewards.codeexec import run_tests
from grpokit.rewards.sandbox import SandboxLimits


def lengths(completions: list[str], examples: list) -> list[float]:
    """A trivial user reward: the cost measured is the sandbox's and the round trip's, not the reward's."""
    return [float(len(c)) for c in completions]


def measure(sandbox: SandboxLimits | None, managers: int, calls: int) -> tuple[list[float], list[float]]:
    """(start times, call times) in seconds over `managers` fresh managers of `calls` calls each."""
    examples = get_task("add2").examples("train", 32, seed=0)
    texts = [f"the answer is {e.answer}" for e in examples]
    starts, per_call = [], []
    for _ in range(managers):
        t = time.perf_counter()
        with RewardManager([(lengths, 1.0)], sandbox=sandbox) as m:
            m.score(texts, examples)
            starts.append(time.perf_counter() - t)
            for _ in range(calls):
                t = time.perf_counter()
                m.score(texts, examples)
                per_call.append(time.perf_counter() - t)
    return starts, per_call


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--managers", type=int, default=10)
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--ballast-mb", type=int, default=0)
    args = parser.parse_args()
    ballast = bytearray(b"\x01" * (args.ballast_mb << 20))  # noqa: F841 (kept alive on purpose)
    with RewardManager([(lengths, 1.0)]) as m:
        print("sandbox mechanisms:", m.sandbox)
    for label, sandbox in (("no sandbox", None), ("sandbox", SandboxLimits())):
        starts, calls = measure(sandbox, args.managers, args.calls)
        p90 = statistics.quantiles(calls, n=10)[-1]
        print(
            f"{label:>10}: start + first call median {statistics.median(starts) * 1e3:.1f} ms; "
            f"call median {statistics.median(calls) * 1e3:.2f} ms (p90 {p90 * 1e3:.2f})"
        )
    code = "def add(a, b):\n    return a + b"
    tests = ["assert add(1, 2) == 3", "assert add(-4, 4) == 0"]
    times = []
    for _ in range(20):
        t = time.perf_counter()
        assert run_tests(code, "", tests) == 2
        times.append(time.perf_counter() - t)
    print(f" code_exec: median {statistics.median(times) * 1e3:.1f} ms per program (fresh interpreter, 2 tests)")


if __name__ == "__main__":
    main()
