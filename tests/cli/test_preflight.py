"""`grpokit preflight` on the tiny model with a built-in task (real model, real reward, no mocks)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from grpokit.config import build_config
from grpokit.preflight import (
    histogram,
    recommend_group_size,
    recommend_length,
    render,
    run_preflight,
    zero_variance,
)

ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(Path(__file__).parents[1])}
TINY = ["rollout.group_size=4", "rollout.max_new_tokens=4", "rollout.prompts_per_step=2"]


def test_zero_variance_matches_binomial_formula() -> None:
    rates = [0.0, 0.25, 0.5, 0.9, 1.0]
    for g in (2, 4, 8):
        z = zero_variance(rates, g)
        correct = sum(p**g for p in rates) / len(rates)
        wrong = sum((1 - p) ** g for p in rates) / len(rates)
        assert z["all_correct"] == pytest.approx(correct)
        assert z["all_wrong"] == pytest.approx(wrong)
        assert z["zero_variance"] == pytest.approx(correct + wrong)
    assert zero_variance([0.5], 4)["zero_variance"] == pytest.approx(2 * 0.5**4)
    assert math.isnan(zero_variance([], 4)["zero_variance"])


def test_zero_variance_from_counts_is_unbiased_up_to_the_sampled_group_size() -> None:
    """From n sampled answers, G <= n is forecast without the plug-in's bias: at G = n it is the observed share."""
    rates = [0 / 8, 1 / 8, 4 / 8, 8 / 8]  # counts 0, 1, 4, 8 of n = 8
    at_n = zero_variance(rates, 8, samples=8)
    assert at_n["zero_variance"] == pytest.approx(2 / 4)  # the all-wrong and the all-correct prompt
    assert zero_variance(rates, 8)["zero_variance"] > 0.58  # plug-in: (7/8)^8 = 0.34 counted for the 1-of-8 prompt
    g4 = zero_variance(rates, 4, samples=8)  # draws of 4 of the 8 without replacement
    assert g4["all_wrong"] == pytest.approx((1 + math.comb(7, 4) / 70 + math.comb(4, 4) / 70) / 4)
    assert g4["all_correct"] == pytest.approx((math.comb(4, 4) / 70 + 1) / 4)
    assert zero_variance(rates, 16, samples=8) == zero_variance(rates, 16)  # beyond n: the plug-in


def test_recommended_group_size() -> None:
    rates = [0.5, 0.5, 0.1, 0.9]
    table = {g: zero_variance(rates, g) for g in (2, 4, 8, 16)}
    # G=2: 0.5 + 0.5 + 0.82 + 0.82 over 4 = 0.66; G=4: (0.125*2 + 0.6562*2)/4 = 0.39
    assert recommend_group_size(table) == 4
    assert recommend_group_size(table, target=0.1) == 16
    hopeless = {g: zero_variance([0.0, 1.0], g) for g in (2, 4, 8)}
    assert recommend_group_size(hopeless) is None


def test_histogram_and_length_recommendation() -> None:
    h = histogram([0.0, 0.1, 0.5, 1.0, 1.0], bins=5)
    assert [b["count"] for b in h] == [2, 0, 1, 0, 2]
    lengths = torch.tensor([10, 20, 30, 40, 48])
    rec = recommend_length(lengths, torch.tensor([False] * 4 + [True]), 48)
    assert rec["truncation_rate"] == pytest.approx(0.2)
    assert rec["recommended_max_new_tokens"] == 2 * 48  # heavy truncation: double the limit
    rec = recommend_length(torch.tensor([10, 20, 30, 40]), torch.tensor([False] * 4), 48)
    assert rec["recommended_max_new_tokens"] == 56  # p99 39.7 x 1.25 = 49.6 -> next multiple of 8
    assert rec["recommended_overlong_cache"] == round(0.2 * 56)


def test_preflight_tiny_model_report(tmp_path: Path) -> None:
    cfg = build_config("dapo", TINY, **{"model.name": "tiny", "data.task": "add1"})
    report = run_preflight(cfg, n_prompts=3, out_dir=tmp_path)
    for key in ("pass_rates", "zero_variance", "filtered", "entropy", "length", "cost"):
        assert key in report
    assert report["config"]["prompts"] == 3 and report["config"]["group_size"] == 4
    assert len(report["pass_rates"]["per_prompt"]) == 3
    rates = [p["pass_rate"] for p in report["pass_rates"]["per_prompt"]]
    assert report["zero_variance"]["expected"]["4"]["zero_variance"] == pytest.approx(
        zero_variance(rates, 4)["zero_variance"]
    )
    assert set(report["zero_variance"]["expected"]) == {"2", "4", "8", "16", "32", "64"}
    filtered = Path(report["filtered"]["path"])
    assert filtered.exists()
    assert len(filtered.read_text().splitlines()) == report["filtered"]["kept"]
    assert report["filtered"]["kept"] + report["filtered"]["dropped_always"] + report["filtered"]["dropped_never"] == 3
    # a random tiny model: near-uniform next-token distribution
    ent = report["entropy"]
    assert ent["mean_nats"] > 0.5 * ent["ln_vocab"] and ent["verdict"].startswith("near-uniform")
    assert ent["p10"] <= ent["p50"] <= ent["p90"]
    assert report["length"]["max"] <= 4
    assert report["cost"]["seconds_per_step"] > 0 and report["cost"]["samples_per_step"] == 8
    saved = json.loads((tmp_path / "preflight.json").read_text())
    assert saved["config"]["model"] == "tiny"
    text = render(report)
    for needle in ("pass rate", "zero-variance", "recommended G", "difficulty filter", "entropy", "length", "cost"):
        assert needle in text


def test_preflight_cli(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "grpokit.cli", "preflight", "--model", "tiny", "--task", "add1", "--prompts", "2",
         "--group-size", "4", "--max-new-tokens", "4", "--out", str(tmp_path / "pf"), "--json"],
        capture_output=True, text=True, env=ENV, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["config"]["group_size"] == 4 and report["config"]["prompts"] == 2
    assert (tmp_path / "pf" / "preflight.json").exists() and (tmp_path / "pf" / "filtered.jsonl").exists()


# ------------------------------------------------------------------------------ issue 14: honest and talking


def test_length_advice_follows_the_correct_answers_lengths() -> None:
    lengths = torch.tensor([5, 6, 7, 30, 32, 32])
    truncated = torch.tensor([False, False, False, False, True, True])
    correct = torch.tensor([True, True, True, False, False, False])
    rec = recommend_length(lengths, truncated, 32, correct)
    # p99 of (5, 6, 7) = 6.98 x 1.25 = 8.7 -> 16; the rambling wrong answers (truncated 33%) do not double it
    assert rec["recommended_max_new_tokens"] == 16 and rec["correct_n"] == 3
    assert rec["correct_p50"] == 6.0 and "correct answers" in rec["note"]
    none_right = recommend_length(lengths, truncated, 32, torch.zeros(6, dtype=torch.bool))
    assert none_right["recommended_max_new_tokens"] == 64 and none_right["correct_n"] == 0


def test_a_busy_machine_is_recorded_and_said() -> None:
    """A process that waits instead of computing gets almost none of its threads: the estimate says so."""
    import time

    from grpokit.preflight.cost import MachineClock

    class Session:
        device, cfg = "cpu", build_config("grpo", overrides=["model.name=tiny"])
        precision = type("P", (), {"name": "fp32"})()

    clock = MachineClock()
    time.sleep(0.3)
    machine = clock.summary(Session())
    assert machine["cpu_share"] < 0.2 and machine["busy"] is True
    assert "the machine was busy" in machine["note"] and "--set model.precision=fp32" in machine["note"]


def test_preflight_talks_times_training_rounds_and_prints_the_train_command(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "grpokit.cli", "preflight", "--model", "tiny", "--task", "add1", "--prompts", "5",
         "--out", str(tmp_path / "pf"), *sum((["--set", o] for o in TINY), [])],
        capture_output=True, text=True, env=ENV, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    # progress on stderr: one line per training-shaped round of rollout.prompts_per_step=2 prompts
    rounds = [ln for ln in out.stderr.splitlines() if ln.startswith("preflight: sampling:")]
    assert [ln.split()[2] for ln in rounds] == ["2/5", "4/5", "5/5"]
    report = json.loads((tmp_path / "pf" / "preflight.json").read_text())
    cost = report["cost"]
    prec = cost["machine"]["precision"]  # what `auto` chose on this CPU (GRPOKIT_CPU_BF16 can force either)
    assert prec in ("fp32", "bf16-autocast") and cost["machine"]["device"] == "cpu"
    assert cost["machine"]["torch_threads"] >= 1 and cost["measured"]["generation_rounds"] == 3
    assert cost["seconds"]["optimizer"] > 0 and cost["measured"]["fwd_bwd_micro_batch"] == 8
    assert len(report["pass_rates"]["per_prompt"]) == 5
    assert f"{prec}, " in out.stdout and f"measured in {prec}" in out.stdout
    filtered = tmp_path / "pf" / "filtered.jsonl"
    if report["filtered"]["kept"]:
        assert f"--task {filtered}" in out.stdout and "reward.functions=[exact_numeric]" in out.stdout
    else:
        assert "nothing to train on from filtered.jsonl" in out.stdout


# ------------------------------------------------------------------------------ issue 28: a reward model's noise


def test_reward_model_noise_within_groups_against_a_verifier() -> None:
    from grpokit.preflight.estimates import reward_model_noise

    # group 1 ranks both right answers over both wrong ones; group 2 scores all alike (ties count 1/2)
    m = reward_model_noise([1.0, 0.0, 1.0, 0.0, 0.5, 0.5, 0.5, 0.5], [1, 0, 1, 0, 1, 1, 0, 0], 4)
    assert m["agreement_auc"] == pytest.approx((4 * 1.0 + 4 * 0.5) / 8) and m["pairs"] == 8
    assert m["gap"] == pytest.approx(0.5) and m["noise_to_signal"] == 0.0
    assert m["spread_within_groups"] == pytest.approx(0.25)
    assert m["spread_overall"] == pytest.approx(math.sqrt(0.125))
    assert m["verdict"] == "agrees with the verifier within groups"
    noisy = reward_model_noise([0.9, 0.1, 0.2, 0.8], [1, 1, 0, 0], 4)  # right 0.9, 0.1 vs wrong 0.2, 0.8
    assert noisy["agreement_auc"] == 0.5 and noisy["gap"] == pytest.approx(0.0)
    assert noisy["noise_to_signal"] == math.inf and noisy["verdict"].startswith("noisy: within groups")
    assert reward_model_noise([0.1, 0.2], None, 2)["verdict"].startswith("no verifier")


def test_preflight_reports_the_reward_models_noise(tmp_path: Path, embedded_model_dir: Path) -> None:
    from tiny_reward_model import build_tiny_reward_model

    rm = build_tiny_reward_model(tmp_path / "tiny_rm", embedded_model_dir)
    cfg = build_config(
        "grpo", [*TINY, f"reward.functions=[exact_numeric, {rm}]"], **{"model.name": "tiny", "data.task": "add1"}
    )
    report = run_preflight(cfg, n_prompts=2)
    m = report["reward_models"]["tiny_rm"]
    assert m["verifier"] == "exact_numeric"
    assert m["spread_within_groups"] > 0 and m["spread_overall"] > 0  # a random head still spreads its scores
    # the random tiny policy never answers right within 4 tokens: no right/wrong pair to rank
    assert m["pairs"] == 0 and m["verdict"].startswith("no group had both")
    assert "reward model tiny_rm: score std" in render(report)
    no_rm = run_preflight(build_config("grpo", TINY, **{"model.name": "tiny", "data.task": "add1"}), n_prompts=1)
    assert no_rm["reward_models"] == {} and "reward model" not in render(no_rm)
