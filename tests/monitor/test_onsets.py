"""Issue 40, "the demo's own report reads oddly": an alert's onset is the step where its condition first held (never
the start of a window whose first rows were still below), and a sampler/learner mismatch KL is judged against what
the run's precision gives by rounding alone (bf16: ~2e-3 more than fp32's 1e-3)."""

from __future__ import annotations

from typing import Any

import pytest

from grpokit.monitor.detectors import Alert, Detector, SamplerMismatch, Saturation
from grpokit.monitor.detectors.ratios import precision_mismatch_kl


def feed(det: Detector, rows: list[dict[str, Any]]) -> list[Alert]:
    """Observe `rows` as steps 1, 2, ...; return every alert raised."""
    return [a for i, row in enumerate(rows, 1) if (a := det.observe(i, row)) is not None]


def test_saturation_on_all_correct_groups_dates_from_the_first_step_at_the_ceiling_not_the_window() -> None:
    """The demo's shape: train accuracy 47% at step 2; the all-correct share first reaches 0.8 at step 6. The
    window mean crosses 0.8 at step 11 over steps 2-11: the alert says since step 6 (it said 2)."""
    rows = [{"reward/accuracy": 0.3, "zv/all_correct": 0.0}, {"reward/accuracy": 0.47, "zv/all_correct": 0.2}]
    rows += [{"reward/accuracy": 0.85, "zv/all_correct": 0.7}] * 3
    rows += [{"reward/accuracy": 0.97, "zv/all_correct": 0.97}] * 10
    (a,) = feed(Saturation(), rows)
    assert (a.mode, a.fired_at, a.step) == ("converged / saturated", 11, 6)
    assert a.evidence["all_correct_groups"] == 0.812 and a.evidence["accuracy"] == 0.884
    assert rows[a.step - 1]["zv/all_correct"] >= Saturation.all_correct


def test_saturation_on_train_accuracy_never_dates_from_a_row_below_the_ceiling() -> None:
    """Accuracy 0.47 at step 2, 0.94 at steps 3-5, at or above 0.95 only from step 6: the 10-step mean reaches 0.95
    at step 12 (window 3-12): the onset is step 6, not step 3 where accuracy was 94%."""
    rows = [{"reward/accuracy": v} for v in (0.3, 0.47, 0.94, 0.94, 0.94)] + [{"reward/accuracy": 1.0}] * 10
    (a,) = feed(Saturation(), rows)
    assert (a.fired_at, a.step, a.evidence["accuracy"]) == (12, 6, 0.982)
    assert rows[a.step - 1]["reward/accuracy"] >= Saturation.ceiling


def test_saturation_on_held_out_accuracy_dates_from_the_evaluation() -> None:
    rows = [{"reward/accuracy": 0.5}] * 6 + [{"reward/accuracy": 0.6, "eval/accuracy": 0.97}] + [{}] * 2
    (a,) = feed(Saturation(), rows)
    assert (a.fired_at, a.step) == (7, 7) and a.evidence["held_out_step"] == 7
    # a held-out accuracy below the ceiling is no onset, even when a later one is at it
    rows = [{"reward/accuracy": 0.5, "eval/accuracy": 0.5}] * 4 + [{"reward/accuracy": 0.5, "eval/accuracy": 1.0}]
    (a,) = feed(Saturation(), rows)
    assert (a.fired_at, a.step) == (5, 5)


def kl_rows(kl: float, n: int = 6) -> list[dict[str, Any]]:
    return [{"mismatch/kl_k3": kl, "mismatch/frac_high": 0.0, "mismatch/abs_diff_max": 0.05}] * n


@pytest.mark.parametrize("precision", ["bf16-autocast", "bf16", "bfloat16", "BF16-mixed"])
def test_a_bf16_sized_mismatch_is_quiet_under_bf16(precision: str) -> None:
    """The demo's reading: k3 1.03e-3 under bf16 autocast, what bf16 rounding gives: no warning."""
    assert feed(SamplerMismatch({"precision": precision}), kl_rows(0.00103)) == []
    assert feed(SamplerMismatch({"precision": precision}), kl_rows(0.0029)) == []


@pytest.mark.parametrize("context", [{}, {"precision": "fp32"}, {"precision": "float32"}, {"precision": "tf99"}])
def test_the_same_mismatch_under_fp32_or_no_stated_precision_warns_as_before(context: dict[str, Any]) -> None:
    (a,) = feed(SamplerMismatch(context), kl_rows(0.00103))
    assert (a.step, a.fired_at, a.severity) == (3, 3, "warning")
    assert a.evidence["mismatch_kl"] == 0.00103 and a.evidence["kl_threshold"] == 0.001


def test_a_real_mismatch_under_bf16_still_warns() -> None:
    (a,) = feed(SamplerMismatch({"precision": "bf16-autocast"}), kl_rows(0.05))
    assert (a.mode, a.step, a.fired_at, a.severity) == ("sampler/learner mismatch", 3, 3, "warning")
    assert a.evidence["mismatch_kl"] == 0.05
    assert a.evidence["kl_threshold"] == 0.002953 and a.evidence["precision"] == "bf16-autocast"
    # just above the bf16 threshold fires too; a user's kl_max still moves it
    assert len(feed(SamplerMismatch({"precision": "bf16"}), kl_rows(0.0031))) == 1
    assert feed(SamplerMismatch({"precision": "bf16"}, kl_max=0.01), kl_rows(0.0115)) == []
    assert len(feed(SamplerMismatch({"precision": "bf16"}, kl_max=0.01), kl_rows(0.0125))) == 1


def test_the_precision_floor_follows_the_significand_bits() -> None:
    assert precision_mismatch_kl("bf16-autocast", 16.0) == pytest.approx(1.953125e-3)
    assert precision_mismatch_kl("fp16", 16.0) == pytest.approx(3.0517578125e-5)
    assert precision_mismatch_kl("fp32", 16.0) < 1e-11 and precision_mismatch_kl(None, 16.0) < 1e-11


def test_a_grpokit_runs_precision_reaches_the_mismatch_detector() -> None:
    """The doctor reads a grpokit run's `model.precision` from its config.yaml into the detectors' context (`auto`
    says nothing: it resolved on the machine that ran it), so the demo's bf16 reading stays quiet there too."""
    from grpokit.monitor.readers.grpokit_run import grpokit_context

    ctx = grpokit_context({"recipe": "grpo", "model": {"precision": "bf16-autocast"}})
    assert ctx["precision"] == "bf16-autocast" and feed(SamplerMismatch(ctx), kl_rows(0.00103)) == []
    auto = grpokit_context({"recipe": "grpo", "model": {"precision": "auto"}})
    assert auto.get("precision") is None and len(feed(SamplerMismatch(auto), kl_rows(0.00103))) == 1
