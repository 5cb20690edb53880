"""Failure injection: each failure mode is made to happen for real — a tiny random Llama (`model.name=tiny`, the
real SmolLM2 tokenizer) trained by the real trainer with a controlled reward or a broken setting — and the live
monitor must name it in the run directory's `alerts.jsonl`; a healthy run raises no alert at all.

Two facts about the tiny model shape the setups:

* its next-token distribution is almost uniform over ~49k tokens (entropy ~10.8 nats), so it practically never
  samples EOS: every response runs to `rollout.max_new_tokens` and is truncated. Where a case needs responses that
  end at varied lengths (a length-rewarding reward, the healthy run), the sampler is given a fixed random quarter
  of the vocabulary as extra end-of-sequence ids (`stop_frac`), as a stop-token list would: the engine cuts each
  response after the first of them and reports it as ended; everything downstream is unchanged;
* nearly-uniform logits make a temperature of 0.3 still nearly uniform, so identical completions (needed to see a
  verifier disagree with itself) only appear at a much lower temperature (0.01).

Thresholds are shortened through `monitor.thresholds` where a default window would need a longer run; each case
says which.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

import pytest
import torch
from tiny_config import tiny_overrides

from grpokit.config import build_config
from grpokit.monitor.detectors.system_time import TIME_VERDICTS
from grpokit.training import Trainer, fit

# every case trains and asserts what happened: `scripts/kernel_matrix.py` runs them under 5 seeds x each kernel
# set; each docstring gives the margin measured there. Precision pinned to fp32 (bf16-autocast has its own tests in
# test_precision.py), so `auto` choosing bf16 on a CPU with AVX512-BF16/AMX does not change the setup.
pytestmark = pytest.mark.trains
FAST = tiny_overrides("model.precision=fp32")


class Run:
    def __init__(self, trainer: Trainer, run_dir: Path) -> None:
        self.trainer = trainer
        self.rows = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
        self.rows = [r for r in self.rows if "time/step" in r]
        path = run_dir / "alerts.jsonl"
        self.alerts = [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []

    def fired(self) -> set[str]:
        """The detectors that fired, but where the time goes (an info verdict on this machine's speed, not a failure
        mode, that a run of any kind may get)."""
        return {a["detector"] for a in self.alerts if a["mode"] not in TIME_VERDICTS}

    def alert(self, detector: str) -> dict[str, Any]:
        """The latest record of `detector`'s first episode: onset step, confirmation and evidence as raised, severity
        and mode as escalated since (the trainer logs an escalation again)."""
        found = [a for a in self.alerts if a["detector"] == detector]
        assert found, f"{detector} did not fire; alerts: {self.alerts}"
        return [a for a in found if a["step"] == found[0]["step"]][-1]

    def series(self, key: str) -> list[float]:
        return [math.nan if r.get(key) is None else r[key] for r in self.rows]


def train(
    tmp: Path,
    steps: int,
    extra: list[str] | None = None,
    *,
    recipe: str = "grpo",
    stop_frac: float = 0.0,
    sampler_temperature: float | None = None,
) -> Run:
    """Train `steps` steps on the FAST setup plus `extra` overrides; return the logged rows and alerts."""
    cfg = build_config(recipe, overrides=FAST + [f"train.steps={steps}"] + list(extra or []))
    trainer = Trainer(cfg, tmp)
    if stop_frac:
        vocab = trainer.model.config.vocab_size
        ids = torch.randperm(vocab, generator=torch.Generator().manual_seed(0))[: int(stop_frac * vocab)]
        trainer.engine.eos_ids = sorted(set(trainer.engine.eos_ids) | set(ids.tolist()))
    if sampler_temperature is not None:
        generate = trainer.engine.generate

        def hotter(prompts, params):  # noqa: ANN001, ANN202 (the engine's own signature)
            # the engine samples at `sampler_temperature`; the learner keeps scoring at rollout.temperature
            return generate(prompts, dataclasses.replace(params, temperature=sampler_temperature))

        trainer.engine.generate = hotter
    fit(trainer, None, eval_before=False)
    run = Run(trainer, tmp)
    assert [r["step"] for r in run.rows] == list(range(1, steps + 1))
    return run


def thresholds(spec: str) -> str:
    return f"monitor.thresholds={{{spec}}}"


# ------------------------------------------------------------------------------------------------- healthy


def test_healthy_run_raises_no_alert(tmp_path: Path, margin: Any) -> None:
    """What healthy means for a random tiny model: every signal present and in range, with every window full.

    Responses end at varied lengths (a random quarter of the vocabulary ends a response, see the module doc), so
    truncation stays rare (~5%) and length statistics are defined; the reward (first visible character is a vowel)
    is learnable, binary and independent of length, so groups of 8 keep reward variance and correct and incorrect
    responses have the same length distribution; a modest learning rate (2e-4) keeps the KL to the reference (GRPO,
    k3 in the loss) small. 10 steps fill every window; thresholds are only made *stricter*: entropy patience 5
    (default 50), windows of 8 for KL drift, length bias and clipping (defaults 10, 10, 20) so they are full.
    Clip fractions are identically 0 in an on-policy run (§17.4), so the clipping detector is measurable but has
    nothing to see; no two completions coincide at T=1, so the duplicate-consistency check has nothing to see
    either (its input is NaN).

    Margins in all 10 runs of scripts/kernel_matrix.py (seeds 0-4 x kernel sets default/avx2): max KL loss
    0.0024-0.0046 (bound 0.01), mean zero-variance fraction 0-0.1 (bound 0.25), entropy 10.79 (bound 5).
    """
    run = train(
        tmp_path,
        10,
        [
            "rollout.group_size=8",
            "rollout.max_new_tokens=10",
            "train.micro_batch_size=16",
            "train.lr=2e-4",
            "reward.functions=[toy_rewards:starts_with_vowel]",
            thresholds(
                "entropy_collapse: {patience: 5}, clipping: {window: 8}, kl_drift: {window: 8}, "
                "length_bias: {window: 8}"
            ),
        ],
        stop_frac=0.25,
    )
    margin("max kl_loss (< 0.01)", max(run.series("actor/kl_loss")))
    margin("mean zv/acc_frac (< 0.25)", sum(run.series("zv/acc_frac")) / 10)
    margin("min entropy (> 5)", min(run.series("entropy/token_mean")))
    # where the time goes (time_split: generation- or learner-bound) is an info verdict on the machine's speed, not a
    # failure mode, and it depends on the machine's timings: it is left out of "no alert"
    failures = [a for a in run.alerts if a["detector"] != "time_split"]
    assert failures == [], failures
    assert [m for m in run.trainer.monitor.active() if m not in TIME_VERDICTS] == []
    available = set().union(*(set(r) for r in run.rows))
    # every detector can judge this run, but memory headroom: on a CPU grpokit logs no device memory
    assert set(run.trainer.monitor.not_measurable(available)) <= {"memory_headroom"}
    # the signals really are there and in range, so the silence is not vacuous
    assert all(math.isfinite(h) and h > 5.0 for h in run.series("entropy/token_mean"))
    assert sum(run.series("zv/acc_frac")) / 10 < 0.25
    assert sum(run.series("length/truncation_rate")) / 10 < 0.2
    assert all(math.isfinite(c) for c in run.series("reward/length_corr"))
    assert 0 < max(run.series("actor/kl_loss")) < 0.01
    assert max(run.series("mismatch/abs_diff_max")) < 1e-3
    assert all(math.isfinite(g) and g > 0 for g in run.series("train/grad_norm"))


# --------------------------------------------------------------------------------------- injected failures


def test_constant_reward_fires_advantage_collapse(tmp_path: Path) -> None:
    """A verifier no completion ever passes (reward 0 everywhere): every group has zero variance, critical on the
    second step (two rows at 0.8 or above name it before the window fills). Window shortened to 3 (default 5)."""
    run = train(
        tmp_path, 3, ["reward.functions=[toy_rewards:always_zero]", thresholds("advantage_collapse: {window: 3}")]
    )
    a = run.alert("advantage_collapse")
    assert (a["step"], a["fired_at"], a["severity"]) == (1, 2, "critical")
    assert a["evidence"]["zero_variance_frac"] == 1.0 and a["evidence"]["all_wrong_frac"] == 1.0
    assert "DAPO dynamic sampling" in a["fix"] and "easier prompts" in a["fix"]
    assert run.fired() <= {"advantage_collapse", "truncation"}


def test_a_solved_task_reads_as_learned_and_stop_when_learned_ends_the_run(tmp_path: Path) -> None:
    """A verifier every completion passes: every group is all-correct by construction. The zero-variance alert is
    the task learned (info, advice to stop), and `monitor.stop_when_learned=true` ends the run at the step it is
    confirmed, with the checkpoint, the final evaluation and the final model written as after a last step."""
    overrides = FAST + ["train.steps=12", "train.save_every=0", "reward.functions=[toy_rewards:always_one]"]
    cfg = build_config("grpo", overrides=overrides + ["monitor.stop_when_learned=true"])
    trainer = Trainer(cfg, tmp_path)
    summary = fit(trainer, None, eval_before=False)
    run = Run(trainer, tmp_path)
    assert [r["step"] for r in run.rows] == [1, 2, 3, 4, 5]  # the window of 5 steps confirms it at step 5
    a = run.alert("advantage_collapse")
    assert (a["mode"], a["severity"], a["fired_at"]) == ("convergence", "info", 5)
    assert a["evidence"]["all_correct_frac"] == 1.0 and "monitor.stop_when_learned" in a["fix"]
    assert summary["stopped_learned"]["step"] == 5 and (tmp_path / "checkpoints" / "step_5").is_dir()
    assert "eval/accuracy" in summary["eval_after"] and Path(summary["final_model"]).is_dir()


def test_collapsing_policy_fires_entropy_collapse(tmp_path: Path, margin: Any) -> None:
    """The vowel-fraction reward at a high learning rate (1e-1, no KL): the tiny model's entropy falls from ~10.8
    nats to well under 1. Patience lowered to 2 (default 50): 18 steps. Whether that is collapse depends on whether
    learning stalled, which the trajectory decides (the fall is the policy learning the reward): the detector fires
    in every numerics, as critical "entropy collapse" once a group's answers coincide or the reward stops rising,
    else as info "low entropy" with the reward still rising in its evidence; both are checked. Margin: fired by step
    6-16 of 18 in all 10 runs of scripts/kernel_matrix.py (seeds 0-4 x kernel sets default/avx2)."""
    run = train(
        tmp_path,
        18,
        ["train.lr=1e-1", "algo.kl_coef=0.0", thresholds("entropy_collapse: {patience: 2}")],
    )
    a = run.alert("entropy_collapse")
    margin("fired at step (of 18)", a["fired_at"])
    if a["mode"] == "entropy collapse":
        assert a["severity"] == "critical"
        assert "clip-higher" in a["fix"]
    else:  # still learning: the evidence shows the rise that makes it information
        assert (a["mode"], a["severity"]) == ("low entropy", "info")
        assert a["evidence"]["reward_later"] > a["evidence"]["reward_earlier"]
    h = run.series("entropy/token_mean")
    assert h[0] > 10.0  # the random tiny model starts near log(49152) = 10.8 nats
    # the baseline is the mean of the first 10 logged values (EntropyCollapse.baseline_steps), up to the step it fired
    # (the evidence is the reading's latest: where the reading changed after firing, the baseline holds all 10)
    bases = [h[: min(10, a["fired_at"])], h[:10]]
    assert any(a["evidence"]["initial_entropy"] == pytest.approx(sum(b) / len(b), abs=1e-4) for b in bases)
    below = [s for s in range(a["step"], a["fired_at"] + 1)]
    assert len(below) == 3 and a["evidence"]["steps_below"] >= 3  # 3 when it fired; more by a later reading
    assert all(h[s - 1] < a["evidence"]["threshold"] for s in below)  # onset..fired_at all under the threshold
    assert h[a["step"] - 2] >= a["evidence"]["threshold"]  # and the step before the onset was not
    assert run.fired() <= {"entropy_collapse", "truncation", "advantage_collapse"}


def test_hot_sampler_fires_sampler_learner_mismatch(tmp_path: Path, margin: Any) -> None:
    """The sampler draws at T=0.25 while the learner scores at rollout.temperature=1: the mismatch KL (§17.6) is
    far above 1e-3 by construction: 0.091-0.132 over the 10 runs of scripts/kernel_matrix.py (seeds 0-4 x kernel
    sets default/avx2). (At T=2 on the near-uniform tiny model it was only 0.00125-0.003: the KL grows with
    (1 - 1/T)^2.) Default thresholds (window 3)."""
    run = train(tmp_path, 3, sampler_temperature=0.25)
    margin("min mismatch kl (> 1e-3)", min(run.series("mismatch/kl_k3")))
    a = run.alert("sampler_mismatch")
    # the window (3) or, sooner, the log-prob gap (|diff| > 2 at some token) confirms it
    assert a["fired_at"] <= 3 and a["evidence"]["mismatch_kl"] > 1e-3
    assert "importance sampling" in a["fix"] and a["actions"] == ["algo.is_correction=token_truncate"]
    assert min(run.series("mismatch/kl_k3")) > 1e-3
    assert run.fired() <= {"sampler_mismatch", "truncation"}


def test_absurd_learning_rate_fires_numerical(tmp_path: Path) -> None:
    """lr=1e8: the first update makes the weights ~1e8 and the next backward overflows — a non-finite gradient,
    skipped by the trainer and reported critical. (lr=10, the next case, does not get that far.) The divergence
    guard would stop this run at step 1 (weights 1e8x their start): `train.on_divergence=continue` lets it go on."""
    run = train(tmp_path, 3, ["train.lr=1e8", "train.on_divergence=continue"])
    a = run.alert("numerical")
    assert (a["step"], a["severity"], a["evidence"]) == (2, "critical", {"nonfinite_grad": 1})
    assert "lower the learning rate" in a["fix"]
    assert run.series("train/nonfinite_grad") == [0.0, 1.0, 1.0]
    assert run.fired() <= {"numerical", "truncation", "divergence"}
    assert run.alert("divergence")["fired_at"] == 1 and "train.lr=1e+08" in run.alert("divergence")["fix"]


def test_learning_rate_ten_saturates_the_policy_and_is_caught(tmp_path: Path, margin: Any) -> None:
    """lr=10 with Adam and gradient clipping does not overflow the tiny model: one update saturates the policy
    (entropy ~0, all samples of a group identical), so no grad-norm spike or NaN ever shows — it is caught as KL
    drift (critical, k3 KL ~9 nats at step 2) and, once groups are degenerate, advantage collapse. Advantage
    window 3 (default 5). Margins in all 10 runs of scripts/kernel_matrix.py (seeds 0-4 x default/avx2): KL at step
    2 9.06-9.83 (bound 1), entropy at step 3 0-0.09 nats (bound 1, from 10.8)."""
    run = train(tmp_path, 4, ["train.lr=10", thresholds("advantage_collapse: {window: 3}")])
    margin("kl at step 2 (> 0.5)", run.series("kl_ref/k3")[1])
    margin("entropy at step 3 (< 1)", run.series("entropy/token_mean")[2])
    a = run.alert("kl_drift")
    assert (a["step"], a["severity"]) == (2, "critical") and a["evidence"]["kl"] > 1.0
    assert run.alert("advantage_collapse")["fired_at"] >= 3
    assert run.series("entropy/token_mean")[2] < 1.0


def test_self_inconsistent_verifier_fires_noisy_reward(tmp_path: Path, margin: Any) -> None:
    """A verifier that returns random.random() whatever the completion; one-token responses at T=0.01 make
    every group's completions identical, and identical completions get different scores at once. Defaults.
    Margin: inconsistency 1.0 (bound 0.5) in all 10 runs of scripts/kernel_matrix.py."""
    run = train(
        tmp_path,
        2,
        ["reward.functions=[toy_rewards:random_score]", "rollout.max_new_tokens=1", "rollout.temperature=0.01"],
    )
    a = run.alert("noisy_reward")
    margin("dup_inconsistency (> 0.5)", a["evidence"]["dup_inconsistency"])
    assert (a["step"], a["fired_at"], a["severity"]) == (1, 1, "critical")
    assert a["evidence"]["dup_inconsistency"] > 0.5
    assert "audit the verifier" in a["fix"]
    # identical completions whose random rewards sum to zero in each group give an update of exactly 0: the system
    # doctor's no-op update is right to name it
    assert run.fired() <= {"noisy_reward", "truncation", "noop_update"}


def test_length_reward_fires_noisy_reward(tmp_path: Path, margin: Any) -> None:
    """Reward = a correctness check nothing passes + the response length in characters: the reward tracks length
    (r ~0.85) and not correctness. Needs varied lengths, so a quarter of the vocabulary ends a response.
    Defaults (window 5). The accuracy-based zero-variance fraction is 1 here too (nothing is ever correct), so
    advantage collapse fires alongside. Margin: length correlation 0.947-0.987 (bound 0.5) in all 10 runs of
    scripts/kernel_matrix.py (seeds 0-4 x default/avx2)."""
    run = train(
        tmp_path,
        6,
        ["reward.functions=[toy_rewards:always_zero,toy_rewards:char_length]", "rollout.max_new_tokens=10"],
        stop_frac=0.25,
    )
    a = run.alert("noisy_reward")
    margin("length_corr (> 0.5)", a["evidence"]["length_corr"])
    assert (a["step"], a["fired_at"], a["severity"]) == (1, 5, "warning")
    assert a["evidence"]["length_corr"] > 0.5 and "length" in a["message"]
    assert run.fired() <= {"noisy_reward", "advantage_collapse", "truncation"}


def test_never_ending_responses_fire_truncation(tmp_path: Path) -> None:
    """The tiny model never samples EOS: every response hits max_new_tokens. Window shortened to 3 (default 5)."""
    run = train(tmp_path, 3, [thresholds("truncation: {window: 3}")])
    a = run.alert("truncation")
    assert (a["step"], a["fired_at"], a["severity"]) == (1, 3, "warning")
    assert a["evidence"]["truncation_rate"] == 1.0
    assert "overlong" in a["fix"] and "max_new_tokens" in a["fix"]
    assert run.fired() == {"truncation"}


def test_fast_drift_from_the_reference_fires_kl_drift(tmp_path: Path, margin: Any) -> None:
    """GRPO with a frozen reference (k3 KL in the loss, coefficient 0.04) and a learning rate that makes the drift
    happen by construction: Adam's first step moves every weight with a gradient by about lr = 1, ~50x the tiny
    model's initial weight scale (std 0.02): the policy saturates and stays far from the reference, so the KL is above
    kl_max=0.5 at every row from step 2 in any numerics, a spike at step 2 confirmed as drift (critical) at step 3.
    (At lr 5e-2 the KL crossed kl_max by step 7 on one CPU's kernels and never in 8 steps on an AVX2 one; at lr 0.3 it
    bounced back under 0.5 at step 3 on seed 0.) Default thresholds; 5 steps. Margin: KL 8.5-8.9 at its lowest over
    steps 2-5 (bound 0.5) in all 10 runs of scripts/kernel_matrix.py (seeds 0-4 x kernel sets default/avx2)."""
    run = train(tmp_path, 5, ["train.lr=1.0"])
    kl = run.series("kl_ref/k3")
    margin("kl at step 2 (> 0.5)", kl[1])
    a = run.alert("kl_drift")
    margin("fired at step (of 5)", a["fired_at"])
    margin("min kl over steps 2-5 (> 0.5)", min(kl[1:]))
    assert a["severity"] == "critical" and a["evidence"]["kl"] > 0.5
    # on-policy GRPO measures KL to the reference (k3, docs/math.md §17.3) from its training forward
    assert a["evidence"]["signal"] == "kl_ref/k3"
    assert kl[0] == pytest.approx(0.0, abs=1e-6) and min(kl[1:]) > 0.5
    assert "adaptive" in a["fix"] and "EMA reference" in a["fix"]
    assert run.fired() <= {"kl_drift", "truncation", "advantage_collapse", "entropy_collapse"}
