"""bench/rescue.py without training: the mixed data of the advantage-collapse arm (one `add1` prompt beside three
unsolvable ones, held out on `add1`'s test split) and the table row read from run directories written by hand."""

from __future__ import annotations

import json
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import rescue  # noqa: E402

from grpokit.data.arithmetic import ADD1  # noqa: E402


def test_the_mixed_data_is_one_solvable_prompt_in_four_and_holds_out_add1(tmp_path: Path) -> None:
    sets = rescue.mixed_data(tmp_path)
    rows = [json.loads(x) for x in (tmp_path / "mixed_train.jsonl").read_text().splitlines()]
    train = {ex.prompt: ex.answer for ex in ADD1.examples("train")}
    solvable = [r for r in rows if r["prompt"] in train]
    assert len(rows) == 4 * len(train) and len(solvable) == len(train)
    assert all(r["answer"] == train[r["prompt"]] for r in solvable)
    for r in rows:
        if r["prompt"] not in train:  # a product of two 5-digit numbers, its true value as the answer
            a, b = (int(x) for x in r["prompt"].removeprefix("What is ").split("?")[0].split(" * "))
            assert 10_000 <= a < 100_000 and 10_000 <= b < 100_000 and r["answer"] == str(a * b)
    held = [json.loads(x) for x in (tmp_path / "add1_test.jsonl").read_text().splitlines()]
    assert [h["prompt"] for h in held] == [ex.prompt for ex in ADD1.examples("test")]
    assert f"data.task={tmp_path / 'mixed_train.jsonl'}" in sets and "reward.functions=[exact_numeric]" in sets


def run_dir(path: Path, acc: float, alerts: list[dict], interventions: list[dict]) -> Path:
    path.mkdir()
    (path / "metrics.jsonl").write_text(
        json.dumps({"step": 0, "eval/accuracy": 0.25}) + "\n" + json.dumps({"step": 12, "eval/accuracy": acc}) + "\n"
    )
    (path / "alerts.jsonl").write_text("".join(json.dumps(a) + "\n" for a in alerts))
    (path / "interventions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in interventions))
    return path


def test_a_row_gives_the_gap_the_verdict_and_what_the_autopilot_did(tmp_path: Path) -> None:
    kl = {"mode": "KL drift", "severity": "warning", "step": 2, "fired_at": 3}
    info = {"mode": "convergence", "severity": "info", "step": 5, "fired_at": 5}
    did = [
        {"kind": "intervention", "step": 3, "action": "train.lr*=0.25"},
        {"kind": "followup", "step": 3, "action": "train.lr*=0.25"},
        {"kind": "unable", "step": 4, "mode": "truncation"},
    ]
    a = run_dir(tmp_path / "a", 0.80, [kl, info], did)
    b = run_dir(tmp_path / "b", 0.70, [], [])
    row = rescue.row("KL drift, autopilot", [(0, a), (1, b)], healthy=0.9, autopilot=True)
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[:4] == ["KL drift, autopilot", "0.750 (0.700-0.800)", "-15.0", "not rescued"]
    assert cells[4] == "s0: KL drift (3)<br>s1: none"  # raised at step 3; info alerts are not listed
    assert cells[5] == "s0: `train.lr*=0.25` at step 3; could not act on truncation at step 4<br>s1: nothing"
    close = rescue.row("x", [(0, a)], healthy=0.85, autopilot=True)
    assert "| +-5.0 |" not in close and "| -5.0 | within 10 points |" in close
