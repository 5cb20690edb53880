"""`grpokit audit-reward`: real rewards (built-in and deliberately broken ones from toy_rewards), no mocks."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from grpokit.audit import audit_reward, render, wilson


def _case(report: dict, group: str, name: str) -> dict:
    return next(c for c in report["probes"][group] if c["case"] == name)


def test_wilson_interval_known_values() -> None:
    lo, hi = wilson(2, 4)
    assert lo == pytest.approx(0.1500, abs=1e-4) and hi == pytest.approx(0.8500, abs=1e-4)
    lo, hi = wilson(1, 6)
    assert lo == pytest.approx(0.0301, abs=1e-3) and hi == pytest.approx(0.5635, abs=1e-3)
    lo, hi = wilson(0, 10)
    assert lo == 0.0 and hi == pytest.approx(0.2775, abs=1e-3)
    assert all(math.isnan(x) for x in wilson(0, 0))


def test_exact_numeric_equivalences_pass_but_last_number_hacks_are_found() -> None:
    r = audit_reward("exact_numeric", kind="numeric", timeout_s=5)
    assert r["probes"]["correct_score"] == 1.0
    assert all(c["ok"] for c in r["probes"]["equivalent"]), r["probes"]["equivalent"]
    assert r["determinism"]["ok"] and not r["failures"]
    # a last-number grader rejects wrong and substring answers ...
    for name in ("wrong number", "answer as a substring", "negated", "empty", "prompt echoed"):
        assert _case(r, "hacks", name)["ok"], name
    # ... but accepts a list of guesses ending in the answer, and an answer only inside <think>
    assert not _case(r, "hacks", "several answers (right one last)")["ok"]
    assert not _case(r, "hacks", "answer only in reasoning")["ok"]
    assert r["verdict"] == "ISSUES FOUND"
    text = render(r)
    assert "several answers (right one last)" in text and "answer only in reasoning" in text
    assert r["latency"]["max_s"] < 1.0


def test_noisy_reward_fails_determinism() -> None:
    r = audit_reward("toy_rewards:random_score", timeout_s=5)
    assert not r["determinism"]["ok"]
    assert any(i.startswith("non-deterministic") for i in r["issues"])
    assert r["verdict"] == "ISSUES FOUND"


def test_lax_reward_fails_hack_probes() -> None:
    r = audit_reward("toy_rewards:any_number", timeout_s=5)
    assert not _case(r, "hacks", "wrong number")["ok"]
    assert not _case(r, "hacks", "several answers (right one first)")["ok"]
    assert _case(r, "hacks", "empty")["ok"]
    assert r["determinism"]["ok"]
    assert any("hack 'wrong number'" in i for i in r["issues"])


def test_hanging_reward_is_reported_as_timeout_and_stops_early() -> None:
    t0 = time.perf_counter()
    r = audit_reward("toy_rewards:sleeps_forever", timeout_s=1)
    assert time.perf_counter() - t0 < 15
    assert r["skipped_after_timeouts"]
    assert any(f["kind"] == "timeout" for f in r["failures"])
    assert r["issues"][0].startswith("timeout:")
    assert r["verdict"] == "ISSUES FOUND"


def test_raising_reward_is_reported_with_its_exception() -> None:
    r = audit_reward("toy_rewards:always_raises", timeout_s=5)
    assert r["failures"] and all(f["kind"] == "exception" for f in r["failures"])
    assert any(i.startswith("exception:") and "KeyError" in i for i in r["issues"])
    assert r["verdict"] == "ISSUES FOUND"


def test_labeled_file_false_positive_and_negative_rates(tmp_path: Path) -> None:
    rows = [
        # 6 right completions; exact_numeric misses the spelled-out one (1 false negative)
        {"completion": "7", "answer": "7", "expected": True},
        {"completion": "The answer is 12.", "answer": "12", "expected": True},
        {"completion": "\\boxed{3}", "answer": "3", "expected": True},
        {"prompt": "2+2?", "completion": "2 + 2 = 4", "answer": "4", "expected": True},
        {"completion": "1,234", "answer": "1234", "expected": True},
        {"completion": "seven", "answer": "7", "expected": True},
        # 4 wrong completions; it accepts the two that end with the answer (2 false positives)
        {"completion": "5", "answer": "7", "expected": False},
        {"completion": "3 or 5 or 7", "answer": "7", "expected": False},
        {"completion": "<think>7</think> I don't know", "answer": "7", "expected": "false"},
        {"completion": "", "answer": "7", "expected": False},
    ]
    path = tmp_path / "labeled.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    r = audit_reward("exact_numeric", labeled=path, timeout_s=5)
    lab = r["labeled"]
    assert (lab["positives"], lab["negatives"]) == (6, 4)
    assert (lab["false_negatives"], lab["false_positives"]) == (1, 2)
    assert lab["fn_rate"] == pytest.approx(1 / 6) and lab["fp_rate"] == pytest.approx(0.5)
    assert lab["fp_ci95"] == pytest.approx(list(wilson(2, 4))) and lab["fn_ci95"] == pytest.approx(list(wilson(1, 6)))
    assert {w["line"] for w in lab["failing_rows"]} == {6, 8, 9}
    assert r["determinism"]["ok"] and r["verdict"] == "ISSUES FOUND"
    assert "FP rate 50.0%" in render(r)


def test_math_verify_math_probes() -> None:
    r = audit_reward("math_verify", kind="math", timeout_s=10)
    assert r["probes"]["correct_score"] == 1.0
    assert all(c["ok"] for c in r["probes"]["equivalent"]), r["probes"]["equivalent"]
    assert _case(r, "hacks", "wrong answer")["ok"] and _case(r, "hacks", "empty")["ok"]
    assert r["determinism"]["ok"] and not r["failures"]


def test_audit_reward_cli(tmp_path: Path) -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(Path(__file__).parents[1])}

    def run(*args: str) -> subprocess.CompletedProcess:
        cmd = [sys.executable, "-m", "grpokit.cli", "audit-reward", *args]
        return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)

    out = run("--reward", "toy_rewards:any_number", "--json")
    assert out.returncode == 1, out.stderr
    assert json.loads(out.stdout)["verdict"] == "ISSUES FOUND"
    out = run("--reward", "exact_numerc")
    assert out.returncode == 2 and "Did you mean 'exact_numeric'" in out.stderr
