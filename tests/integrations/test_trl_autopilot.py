"""Forecasts and the autopilot of `HealthCallback` inside a real TRL `GRPOTrainer` (TRL's own trainer, optimizer and
learning-rate schedule on CPU, a tiny random Llama with the real SmolLM2 tokenizer).

The alerts are real: grpokit's detectors fire on rows in TRL's own metric names, written here so that a failure
starts at a known step (a NaN gradient, KL climbing, entropy falling) and fed to the callback's `on_log` as the
Trainer feeds it; one test trains for real and lets the callback find its trainer by itself."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("trl")

from test_integration_trl import tiny_trainer  # noqa: E402

from grpokit.integrations.trl import HealthCallback  # noqa: E402


def row(**kw: float) -> dict[str, float]:
    """A TRL log row (TRL's names): healthy unless a keyword says otherwise."""
    base = {"loss": 0.01, "grad_norm": 0.5, "learning_rate": 1e-3, "reward": 0.4, "reward_std": 0.3}
    base.update({"entropy": 1.5, "kl": 0.01, "frac_reward_zero_std": 0.1, "clip_ratio/region_mean": 0.0})
    return {**base, **kw}


def events(trainer: Any) -> dict[str, Any]:
    """What the Trainer passes every callback event (transformers' CallbackHandler.call_event)."""
    return {"model": trainer.model, "optimizer": trainer.optimizer, "lr_scheduler": trainer.lr_scheduler}


def drive(cb: HealthCallback, trainer: Any, rows: dict[int, dict[str, float]]) -> None:
    """Begin training as the Trainer does (its optimizer and schedule built by its own method), then `feed`."""
    trainer.create_optimizer_and_scheduler(num_training_steps=trainer.args.max_steps)
    cb.on_train_begin(trainer.args, trainer.state, trainer.control, **events(trainer))
    feed(cb, trainer, rows)


def feed(cb: HealthCallback, trainer: Any, rows: dict[int, dict[str, float]]) -> None:
    """Feed `rows` (step -> TRL log row) to the callback's `on_log` at those steps, as the Trainer does."""
    for step, logs in rows.items():
        trainer.state.global_step = step
        cb.on_log(trainer.args, trainer.state, trainer.control, logs=dict(logs), **events(trainer))


def interventions(trainer: Any) -> list[dict[str, Any]]:
    path = Path(trainer.args.output_dir) / "grpokit_interventions.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines()]


def lr_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in rows if r["kind"] == "intervention" and r["key"] == "train.lr"]


@pytest.mark.slow
def test_nan_gradients_lower_the_learning_rate_of_optimizer_and_schedule(
    tmp_path: Path, embedded_model_dir: Path
) -> None:
    """NaN gradient norms at steps 4-5: the alerts' `train.lr*=...` actions reach every param group of TRL's optimizer
    and the schedule's base_lrs (the next scheduled rate is lowered by the same factor), with only what transformers
    passes a callback (no trainer bound). KL held at 1.0 from step 6: KL drift's learning-rate cut applies too, and its
    adaptive controller is refused in one line naming what to set in GRPOConfig."""
    out = io.StringIO()
    cb = HealthCallback(autopilot=True, out=out)
    trainer = tiny_trainer(tmp_path, embedded_model_dir, cb, learning_rate=1e-3, max_steps=20, log_completions=False)
    drive(cb, trainer, {1: row(), 2: row(), 3: row()})
    assert cb.autopilot is not None and cb.autopilot.trainer is None  # called from a test, not from a Trainer
    sched, groups = trainer.lr_scheduler, trainer.optimizer.param_groups
    untouched = [sched.lr_lambdas[0](1) * b for b in sched.base_lrs]  # the rate the schedule's next step gives
    nan = {"grad_norm": math.nan, "loss": math.nan}
    feed(cb, trainer, {4: row(**nan), 5: row(**nan), 6: row(kl=1.0), 7: row(kl=1.0), 8: row(kl=1.0)})
    rows = interventions(trainer)
    applied = lr_rows(rows)
    assert applied and {r["step"] for r in applied} <= {4, 5, 6}, rows  # step 6: KL drift's cut (a KL past 0.5)
    assert {r["step"] for r in applied} >= {4, 6}
    assert applied[0]["before"] == pytest.approx(1e-3)
    for a, b in zip(applied, applied[1:]):
        assert b["before"] == pytest.approx(a["after"])  # each change acts on the rate the last one left
    ratio = applied[-1]["after"] / 1e-3
    assert ratio < 1 and len(groups) == 2 and sched.base_lrs == pytest.approx([1e-3 * ratio] * 2)
    sched.step()  # the schedule's next step keeps the lower rate
    assert [g["lr"] for g in groups] == pytest.approx([ratio * x for x in untouched])
    text = out.getvalue()
    for r in applied:
        assert f"applied {r['action']}: learning_rate {r['before']:g} -> {r['after']:g}" in text
    refused = [r for r in rows if r["action"] == "algo.kl_controller=adaptive"]
    assert refused and refused[0]["kind"] == "refused" and refused[0]["detector"] == "kl_drift"
    line = [x for x in text.splitlines() if "refused algo.kl_controller=adaptive" in x]
    assert line == [
        "  refused algo.kl_controller=adaptive: GRPOTrainer keeps beta fixed (no adaptive KL controller); "
        "for the next run, in GRPOConfig: a larger beta"
    ]


@pytest.mark.slow
def test_beta_temperature_and_clip_higher_change_on_the_trainer(tmp_path: Path, embedded_model_dir: Path) -> None:
    """`actions=` gives KL drift `algo.kl_coef*=2` and entropy collapse a warmer sampler and clip-higher: TRL's
    `beta`, sampling temperature (attribute, generation config and kwargs) and `epsilon_high` change at the alerts'
    steps, each logged with its alert, before and after; the detectors' context follows."""
    out = io.StringIO()
    cb = HealthCallback(
        autopilot=True,
        out=out,
        thresholds={"entropy_collapse": {"patience": 2}},
        actions={
            "kl_drift": ["algo.kl_coef*=2"],
            "entropy_collapse": ["rollout.temperature=1.0", "algo.eps_high+=0.04"],
        },
    )
    trainer = tiny_trainer(
        tmp_path, embedded_model_dir, cb, temperature=0.7, num_iterations=2, beta=0.04, log_completions=False
    )
    assert cb.bind(trainer) is cb
    assert (trainer.beta, trainer.temperature, trainer.epsilon_high) == (0.04, 0.7, 0.2)
    rows = {s: row() for s in range(1, 4)}
    rows.update({s: row(kl=1.0) for s in range(4, 6)})
    rows.update({s: row(entropy=0.1) for s in range(6, 10)})
    drive(cb, trainer, rows)
    assert trainer.beta == pytest.approx(0.08)
    assert trainer.temperature == 1.0 and trainer.generation_config.temperature == 1.0
    assert trainer.generation_kwargs["temperature"] == 1.0
    assert trainer.epsilon_high == pytest.approx(0.24) and trainer.epsilon_low == 0.2
    logged = {r["key"]: r for r in interventions(trainer)}
    assert set(logged) == {"algo.kl_coef", "rollout.temperature", "algo.eps_high"}
    assert logged["algo.kl_coef"]["detector"] == "kl_drift" and logged["algo.kl_coef"]["step"] == 4
    assert (logged["algo.kl_coef"]["before"], logged["algo.kl_coef"]["after"]) == (0.04, pytest.approx(0.08))
    fired = logged["rollout.temperature"]
    assert fired["detector"] == "entropy_collapse" and fired["reason"].startswith(fired["alert"] + ": ")
    assert (fired["before"], fired["after"]) == (pytest.approx(0.7), 1.0)
    assert cb.context["kl_coef"] == pytest.approx(0.08) and cb.context["temperature"] == 1.0
    text = out.getvalue()
    assert "applied algo.kl_coef*=2: beta 0.04 -> 0.08 (trainer.beta)" in text
    assert "applied rollout.temperature=1.0: temperature 0.7 -> 1 (trainer.temperature, generation_config" in text


@pytest.mark.slow
def test_raising_beta_from_zero_is_refused_and_bounds_hold(tmp_path: Path, embedded_model_dir: Path) -> None:
    """beta=0: TRL never loaded a reference model, so `algo.kl_coef+=0.02` is refused with that reason and beta stays
    0. The learning rate stops at `Bounds.min_lr`; a further cut is refused as changing nothing within it."""
    from grpokit.training.autopilot import Bounds

    out = io.StringIO()
    cb = HealthCallback(
        autopilot=True, out=out, actions={"kl_drift": ["algo.kl_coef+=0.02"]}, bounds=Bounds(min_lr=5e-4)
    )
    trainer = tiny_trainer(tmp_path, embedded_model_dir, cb, beta=0.0, learning_rate=1e-3, log_completions=False)
    cb.bind(trainer)
    nan = {"grad_norm": math.nan, "loss": math.nan}
    drive(cb, trainer, {1: row(), 2: row(), 3: row(kl=1.0), 4: row(kl=1.0, **nan), 5: row(kl=1.0, **nan)})
    assert trainer.beta == 0.0 and trainer.ref_model is None
    rows = interventions(trainer)
    beta = [r for r in rows if r["key"] == "algo.kl_coef"]
    assert [r["kind"] for r in beta] == ["refused"] and beta[0]["next_run"] == "set beta"
    assert "beta=0: TRL loaded no reference model" in beta[0]["why"]
    assert trainer.lr_scheduler.base_lrs == pytest.approx([5e-4, 5e-4])
    lr = [r for r in rows if r["key"] == "train.lr"]
    assert lr[0]["kind"] == "intervention" and lr[0]["after"] == pytest.approx(5e-4)
    assert len(lr) >= 2 and all(r["kind"] == "refused" and "min_lr=0.0005" in r["why"] for r in lr[1:])
    assert "refused algo.kl_coef+=0.02: beta=0: TRL loaded no reference model" in out.getvalue()


@pytest.mark.slow
def test_every_process_acts_alike_and_only_the_main_one_writes(tmp_path: Path, embedded_model_dir: Path) -> None:
    """On a process other than the main one (TRL logs the same gathered rows on each), the alerts change that
    process's optimizer, schedule and beta as on the main one and stop it at the same step, but nothing is printed
    or written there."""
    out = io.StringIO()
    cb = HealthCallback(autopilot=True, out=out, stop_on="critical", actions={"kl_drift": ["algo.kl_coef*=2"]})
    trainer = tiny_trainer(tmp_path, embedded_model_dir, cb, learning_rate=1e-3, log_completions=False)
    cb.bind(trainer)
    trainer.state.is_world_process_zero = False
    nan = {"grad_norm": math.nan, "loss": math.nan}
    drive(cb, trainer, {1: row(), 2: row(kl=1.0), 3: row(kl=1.0, **nan), 4: row(kl=1.0, **nan)})
    applied = [r for r in cb.interventions if r["kind"] == "intervention"]
    assert trainer.beta == pytest.approx(0.08) and lr_rows(applied)
    assert trainer.lr_scheduler.base_lrs == pytest.approx([lr_rows(applied)[-1]["after"]] * 2)
    assert trainer.control.should_training_stop and cb.stopped_at == 3
    assert out.getvalue() == "" and not list((tmp_path / "out").glob("grpokit_*.jsonl"))


@pytest.mark.slow
def test_autopilot_finds_its_trainer_and_acts_while_trl_trains(tmp_path: Path, embedded_model_dir: Path) -> None:
    """Added as `callbacks=[HealthCallback(autopilot=True, ...)]` only: the callback finds the GRPOTrainer calling it.
    A reward that cannot vary collapses the advantages at step 2; the actions halve the learning rate (the rate TRL
    logs at steps 3-4 is half the schedule's), double beta and warm the sampler, in the real run."""
    out = io.StringIO()
    cb = HealthCallback(
        autopilot=True,
        out=out,
        thresholds={"advantage_collapse": {"window": 2}},
        actions={"advantage_collapse": ["train.lr*=0.5", "algo.kl_coef*=2", "rollout.temperature+=0.25"]},
    )
    trainer = tiny_trainer(tmp_path, embedded_model_dir, cb, max_steps=4, log_completions=False, report_to=[])
    trainer.train()
    assert cb.autopilot is not None and cb.autopilot.trainer is trainer
    rows = interventions(trainer)
    assert [(r["kind"], r["step"]) for r in rows] == [("intervention", 2)] * 3
    assert trainer.beta == pytest.approx(0.08) and trainer.temperature == 1.25
    assert trainer.generation_config.temperature == 1.25
    sched = trainer.lr_scheduler.scheduler if hasattr(trainer.lr_scheduler, "scheduler") else trainer.lr_scheduler
    assert sched.base_lrs == pytest.approx([5e-4] * len(sched.base_lrs))
    lrs = {h["step"]: h["learning_rate"] for h in trainer.state.log_history if "learning_rate" in h}
    lam = sched.lr_lambdas[0]
    # TRL logs at step s the rate its update used, base x lambda(s - 1): the full rate up to step 2, half after it
    assert [lrs[s] for s in (1, 2, 3, 4)] == pytest.approx([1e-3 * lam(0), 1e-3 * lam(1), 5e-4 * lam(2), 5e-4 * lam(3)])
    assert "[grpokit] autopilot at step 2, on advantage collapse (critical):" in out.getvalue()


@pytest.mark.slow
def test_a_resumed_run_keeps_the_changes_and_their_budget(tmp_path: Path, embedded_model_dir: Path) -> None:
    """Interventions at step 2, checkpoint-2, then a new trainer from the same GRPOConfig resumed there: beta and the
    temperature are set again to what the autopilot made them (the learning rate comes back with TRL's optimizer and
    schedule state), and the three changes count against a budget of 3, so the collapse seen again at step 4 is
    refused, not doubled again."""
    from grpokit.training.autopilot import Bounds

    acts = {"advantage_collapse": ["train.lr*=0.5", "algo.kl_coef*=2", "rollout.temperature+=0.25"]}
    opts = dict(max_steps=4, log_completions=False, report_to=[], save_strategy="steps", save_steps=2)
    first = HealthCallback(
        autopilot=True,
        out=io.StringIO(),
        thresholds={"advantage_collapse": {"window": 2}},
        actions=acts,
        bounds=Bounds(max_interventions=3),
    )
    tiny_trainer(tmp_path, embedded_model_dir, first, **opts).train()
    out = io.StringIO()
    again = HealthCallback(
        autopilot=True,
        out=out,
        thresholds={"advantage_collapse": {"window": 2}},
        actions=acts,
        bounds=Bounds(max_interventions=3),
    )
    trainer = tiny_trainer(tmp_path, embedded_model_dir, again, **opts)
    assert (trainer.beta, trainer.temperature) == (0.04, 1.0)  # what GRPOConfig says
    trainer.train(resume_from_checkpoint=str(tmp_path / "out" / "checkpoint-2"))
    assert trainer.beta == pytest.approx(0.08) and trainer.temperature == 1.25
    assert trainer.generation_config.temperature == 1.25 and again.context["kl_coef"] == pytest.approx(0.08)
    sched = trainer.lr_scheduler.scheduler if hasattr(trainer.lr_scheduler, "scheduler") else trainer.lr_scheduler
    assert sched.base_lrs == pytest.approx([5e-4] * len(sched.base_lrs))
    rows = interventions(trainer)
    assert [(r["kind"], r["step"]) for r in rows] == [("intervention", 2)] * 3 + [("refused", 4)] * 3
    assert all("budget of 3 interventions is spent" in r["why"] for r in rows[3:])
    assert "[grpokit] autopilot resumed at step 2: 3 earlier intervention(s); beta 0.08, temperature 1.25" in (
        out.getvalue()
    )


@pytest.mark.parametrize(
    ("signal", "start", "slope", "detector"),
    [
        ("entropy", 1.5, -0.02, "entropy_forecast"),
        ("kl", 0.05, 0.01, "kl_forecast"),
        ("frac_reward_zero_std", 0.05, 0.01, "zero_variance_forecast"),
    ],
)
def test_forecasts_print_their_trend_and_never_stop_the_run(
    tmp_path: Path, signal: str, start: float, slope: float, detector: str
) -> None:
    """A signal moving in a straight line toward its failure: the callback prints a FORECAST block with the fitted
    slope, window, R^2 and horizon (the crossing computed here from the line), appends it to grpokit_alerts.jsonl,
    and with `stop_on="warning"` does not stop the run on it (the failure is still ahead)."""
    from transformers import TrainerControl, TrainerState
    from trl import GRPOConfig

    out = io.StringIO()
    cb = HealthCallback(stop_on="warning", out=out)
    args = GRPOConfig(output_dir=str(tmp_path / "out"), use_cpu=True, report_to=[], num_generations=4)
    state, control = TrainerState(), TrainerControl()
    cb.on_train_begin(args, state, control)
    value = {s: start + slope * s for s in range(1, 41)}
    for s in range(1, 41):
        state.global_step = s
        cb.on_log(args, state, control, logs=row(**{signal: value[s]}))
        if any(a["detector"] == detector for _, a in cb.events):
            break
    fired = [a for e, a in cb.events if e == "onset" and a["detector"] == detector]
    assert fired, out.getvalue()
    ev, step = fired[0]["evidence"], fired[0]["fired_at"]
    threshold = ev["threshold"]
    assert ev["slope_per_step"] == pytest.approx(slope) and ev["r2"] == 1.0
    assert ev["horizon_steps"] == round((threshold - value[step]) / slope) > 0
    assert ev["fit_window"][1] == step and not control.should_training_stop and cb.stopped_at is None
    text = out.getvalue()
    assert f"[grpokit] FORECAST (warning): {fired[0]['mode']} (step {step})" in text
    assert (
        f"  trend: {ev['signal']} slope {ev['slope_per_step']}/step fitted over steps {ev['fit_window'][0]}-{step}, "
        f"R^2 1.0, now {ev['now']}, threshold {threshold}, horizon ~{ev['horizon_steps']} steps"
    ) in text
    lines = (tmp_path / "out" / "grpokit_alerts.jsonl").read_text().splitlines()
    logged = [json.loads(x) for x in lines if json.loads(x)["detector"] == detector]
    assert logged[0]["severity"] == "warning" and logged[0]["evidence"]["horizon_steps"] == ev["horizon_steps"]


def test_bad_autopilot_options_say_what_to_change() -> None:
    with pytest.raises(ValueError, match=r"actions=\{'kl_drfit'.*no detector 'kl_drfit'"):
        HealthCallback(autopilot=True, actions={"kl_drfit": ["algo.kl_coef*=2"]})
    with pytest.raises(ValueError, match=r"TRL takes only .* on \['algo.entropy_coef'"):
        HealthCallback(autopilot=True, actions={"kl_drift": ["algo.kl_controller=adaptive"]})
    with pytest.raises(ValueError, match=r"without autopilot=True"):
        HealthCallback(actions={"kl_drift": ["algo.kl_coef*=2"]})
