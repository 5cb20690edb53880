"""Held-out evaluation's pass@k: the unbiased estimator on hand-computed counts, and on a real evaluation of the
tiny model, pass@1 equals mean accuracy and pass@k never falls as k grows."""

from __future__ import annotations

import pytest
import torch

from grpokit.config import build_config
from grpokit.training.evaluation import evaluate, pass_at_k
from grpokit.training.session import open_session


def test_pass_at_k_is_the_unbiased_estimator() -> None:
    # prompt 0: 1 of 4 correct; prompt 1: 4 of 4; prompt 2: 0 of 4
    idx = torch.tensor([0] * 4 + [1] * 4 + [2] * 4)
    ok = torch.tensor([1, 0, 0, 0] + [1] * 4 + [0] * 4, dtype=torch.bool)
    got = pass_at_k(idx, ok)
    assert set(got) == {"eval/pass@1", "eval/pass@2", "eval/pass@4"}
    assert got["eval/pass@1"] == pytest.approx((0.25 + 1 + 0) / 3)
    assert got["eval/pass@2"] == pytest.approx((1 - 3 / 6 + 1 + 0) / 3)  # 1 - C(3,2)/C(4,2) for prompt 0
    assert got["eval/pass@4"] == pytest.approx((1 + 1 + 0) / 3)
    assert pass_at_k(torch.tensor([0, 1]), torch.tensor([True, False])) == {}  # one sample per prompt: none


def test_evaluate_reports_pass_at_k_with_several_samples() -> None:
    cfg = build_config(
        "grpo",
        overrides=[
            "model.name=tiny",
            "rollout.max_new_tokens=4",
            "data.eval_size=6",
            "reward.functions=[toy_rewards:starts_with_vowel]",
        ],
    )
    session = open_session(cfg)
    try:
        m = evaluate(session, n_samples=4, seed=3)
    finally:
        session.close()
    assert m["eval/n"] == 24
    assert m["eval/pass@1"] == pytest.approx(m["eval/accuracy"])
    assert m["eval/accuracy"] > 0  # the toy reward passes some samples: pass@k is informative
    assert m["eval/pass@1"] <= m["eval/pass@2"] <= m["eval/pass@4"]
