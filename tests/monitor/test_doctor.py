"""`grpokit doctor` and `grpokit report` on real logs: TRL runs (committed fixtures with the script that made
them), a verl-format console log, and grpokit run directories; autopilot on a real tiny run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tiny_config import SEED

from grpokit.config import build_config
from grpokit.monitor.doctor import diagnose, diagnose_all, render
from grpokit.monitor.doctor.diagnose import VERDICT_MEANING
from grpokit.monitor.report import make_report
from grpokit.training import Trainer, fit

LOGS = Path(__file__).parents[1] / "fixtures" / "logs"
# a tiny model with a reward that is always 0: every group has zero variance (advantage collapse)
COLLAPSING_TINY_RUN = [
    "model.name=tiny",
    "rollout.prompts_per_step=2",
    "rollout.group_size=4",
    "rollout.max_new_tokens=4",
    "train.eval_every=0",
    "train.save_every=0",
    "data.eval_size=4",
    "reward.functions=[toy_rewards:always_zero]",
    "monitor.thresholds={advantage_collapse: {window: 2}}",
    f"train.seed={SEED}",
]
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(Path(__file__).parents[1])}


def doctor(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "grpokit.cli", "doctor", *args], capture_output=True, text=True, env=ENV, timeout=300
    )


def test_doctor_finds_advantage_collapse_in_a_real_trl_run() -> None:
    out = doctor(str(LOGS / "trl_constant_reward"))
    assert out.returncode == 1, out.stderr  # exit 1: a critical failure mode was found (0: none, 2: bad input)
    assert "advantage collapse" in out.stdout.lower()
    assert "dynamic sampling" in out.stdout.lower()
    assert "trl log" in out.stdout


def test_doctor_json_on_healthy_trl_run_lists_what_trl_does_not_log() -> None:
    out = doctor(str(LOGS / "trl_healthy"), "--json")
    diag = json.loads(out.stdout)
    assert diag["source"] == "trl" and diag["steps"] >= 5
    modes = {a["mode"] for a in diag["alerts"]}
    assert "advantage collapse" not in modes
    # TRL logs neither accuracy-split zero-variance groups nor correct/incorrect lengths: reported, not guessed
    assert "length_bias" in diag["not_measurable"] or "noisy_reward" in diag["not_measurable"]


def test_doctor_on_verl_console_log() -> None:
    diag = diagnose(LOGS / "verl_console.log")
    assert diag["source"] == "verl"
    # verl logs no zero-variance fraction; the score's min/max (varied here) stand in for it
    assert "advantage_collapse" not in diag["not_measurable"]
    assert "advantage collapse" not in {a["mode"] for a in diag["alerts"]}
    assert diag["last_values"]["entropy/token_mean"] < 0.5


@pytest.mark.trains
def test_doctor_and_report_on_a_grpokit_run(tmp_path: Path) -> None:
    overrides = [*COLLAPSING_TINY_RUN, "train.steps=3"]
    trainer = Trainer(build_config("grpo", overrides=overrides), tmp_path)
    fit(trainer, None, eval_before=False)
    live = [json.loads(x) for x in (tmp_path / "alerts.jsonl").read_text().splitlines()]
    assert [a["mode"] for a in live] == ["advantage collapse"]
    diag = diagnose(tmp_path, thresholds={"advantage_collapse": {"window": 2}})
    assert diag["source"] == "grpokit"
    assert diag["alerts"][0]["mode"] == "advantage collapse" and diag["alerts"][0]["step"] == 1
    page = make_report(tmp_path)
    text = page.read_text()
    assert "advantage collapse" in text and "data:image/png;base64," in text
    assert len(list(page.parent.glob("*.png"))) >= 5


def test_doctor_rejects_an_unknown_path(tmp_path: Path) -> None:
    out = doctor(str(tmp_path / "nothing-here"))
    assert out.returncode == 2 and "nothing-here" in out.stderr and "Traceback" not in out.stderr


@pytest.mark.trains
def test_autopilot_switches_on_dynamic_sampling_and_logs_before_after(tmp_path: Path) -> None:
    """Advantage collapse under GRPO (a reward that is 0 for most samples): the autopilot applies the recommended
    fix (dynamic sampling), and logs the intervention with its reason and the metrics before and after."""
    overrides = [
        *COLLAPSING_TINY_RUN,
        "train.steps=8",
        "train.autopilot=true",
        "algo.ds_shortfall=partial",
        "algo.max_gen_rounds=1",
    ]
    trainer = Trainer(build_config("grpo", overrides=overrides), tmp_path)
    assert trainer.cfg.algo.group_filter == "all"
    fit(trainer, None, eval_before=False)
    assert trainer.cfg.algo.group_filter == "dynamic_sampling"
    rows = [json.loads(x) for x in (tmp_path / "interventions.jsonl").read_text().splitlines()]
    inter = [r for r in rows if r["kind"] == "intervention"]
    assert inter[0]["action"] == "algo.group_filter=dynamic_sampling" and inter[0]["before"] == "all"
    assert inter[0]["after"] == "dynamic_sampling" and "advantage collapse" in inter[0]["reason"]
    assert "zv/frac" in inter[0]["metrics_before"]
    follow = [r for r in rows if r["kind"] == "followup"]
    assert follow and "metrics_after" in follow[0]
    # the report's timeline: the intervention with its cause and follow-up, marked I1 on the charts
    text = make_report(tmp_path).read_text()
    assert "<h2>Autopilot</h2>" in text and "algo.group_filter=dynamic_sampling (all -&gt; dynamic_sampling)" in text
    assert f"<td>I1</td><td>{inter[0]['step']}</td>" in text and "advantage collapse" in text
    assert f"step {follow[0]['after_step']}: " in text


def test_autopilot_respects_bounds(tmp_path: Path) -> None:
    from grpokit.training.autopilot import Autopilot, Bounds, Change

    overrides = ["model.name=tiny", "rollout.max_new_tokens=2", "train.steps=0", "algo.eps_high=0.38"]
    trainer = Trainer(build_config("dapo", overrides=overrides), tmp_path)
    pilot = Autopilot(trainer.cfg, Bounds(max_eps_high=0.4))
    change = pilot.change("algo.eps_high+=0.04")
    assert change == Change("algo.eps_high", 0.4, 0.38) and trainer.cfg.algo.eps_high == 0.38  # proposed only
    trainer.apply_changes([change])  # the one place a change reaches the run
    assert pilot.change("algo.eps_high+=0.04") is None  # already at the bound: nothing changes
    lr = trainer.cfg.train.lr
    change = pilot.change("train.lr*=0.5")
    assert change == Change("train.lr", lr * 0.5, lr)
    trainer.apply_changes([change])
    assert trainer.optimizer.param_groups[0]["lr"] == trainer.cfg.train.lr == lr * 0.5  # the mirror follows


# ------------------------------------------------------------------------------ issue 13: logs people have


def _grpokit_run(d: Path, rows: list[dict], **algo) -> Path:
    """A grpokit run directory as the trainer writes it: config.yaml (the dapo recipe, with `algo` overrides) and
    metrics.jsonl."""
    import yaml

    d.mkdir(parents=True)
    cfg = build_config("dapo", overrides=[f"algo.{k}={str(v).lower()}" for k, v in algo.items()]).to_dict()
    (d / "config.yaml").write_text(yaml.safe_dump(cfg))
    (d / "metrics.jsonl").write_text("".join(json.dumps({"step": i + 1, **r}) + "\n" for i, r in enumerate(rows)))
    return d


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage"
    garbage.mkdir()
    (garbage / "metrics.jsonl").write_text("this is not json\n{broken\n[1, 2]\n")
    tb = tmp_path / "tb"
    tb.mkdir()
    (tb / "events.out.tfevents.123.host.1.0").write_bytes(os.urandom(4096))
    binary = tmp_path / "weights.log"
    binary.write_bytes(b"\x00\x01" * 1000)
    no_metrics = tmp_path / "nometrics"
    no_metrics.mkdir()
    (no_metrics / "metrics.jsonl").write_text('{"step": 1, "note": "hello"}\n')
    for path in (garbage, tb, binary, no_metrics):
        out = doctor(str(path))
        assert out.returncode == 2, (path, out.stdout, out.stderr)
        assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr
        assert "No failure mode detected" not in out.stdout


def test_each_run_of_a_folder_gets_its_own_diagnosis_and_advice(tmp_path: Path) -> None:
    """Two runs under one folder, both collapsing: dynamic sampling is recommended only to the run without it."""
    collapse = [{"zv/acc_frac": 0.9, "zv/all_wrong": 0.9, "zv/all_correct": 0.0, "reward/mean": 0.05}] * 8
    _grpokit_run(tmp_path / "runs" / "with_ds", collapse, group_filter="dynamic_sampling")
    _grpokit_run(tmp_path / "runs" / "without_ds", collapse, group_filter="all")
    diags = {d["run"]: d for d in diagnose_all(tmp_path)}
    assert set(diags) == {"runs/with_ds", "runs/without_ds"}
    with_ds, without = diags["runs/with_ds"]["alerts"][0], diags["runs/without_ds"]["alerts"][0]
    assert with_ds["mode"] == without["mode"] == "advantage collapse"
    assert "algo.group_filter=dynamic_sampling" not in with_ds["fix"] and with_ds["actions"] == []
    assert "algo.group_filter=dynamic_sampling" in without["fix"]
    out = doctor(str(tmp_path), "--run", "without_ds")
    assert out.returncode == 1 and "runs/without_ds" in out.stdout and "with_ds]" not in out.stdout
    out = doctor(str(tmp_path), "--json")
    assert len(json.loads(out.stdout)["runs"]) == 2


def test_the_demo_scenario_current_advice_saturation_and_generation_cap(tmp_path: Path) -> None:
    """Issue 13's demo run (36 steps of dapo on add1): collapse onset at 63% but 99% at the end, 21 steps at the
    generation-round cap, 9 steps without an update, held-out accuracy 100% at the end."""
    rows = []
    for s in range(1, 37):
        zv = 0.63 if s <= 12 else 0.99
        row = {"zv/acc_frac": zv, "zv/all_correct": zv if s > 12 else 0.3, "zv/all_wrong": 0.0 if s > 12 else 0.33}
        row.update({"reward/accuracy": 0.6 if s <= 12 else 0.98, "reward/mean": 0.6, "entropy/token_mean": 0.3})
        row["sampling/rounds"] = 10.0 if s > 15 else 2.0
        if s > 27:
            row = {k: v for k, v in row.items() if k != "entropy/token_mean"} | {"train/skipped_update": 1.0}
        rows.append(row)
    rows[-1]["eval/accuracy"] = 1.0
    d = _grpokit_run(tmp_path / "demo", rows, group_filter="dynamic_sampling", max_gen_rounds=10)
    diag = diagnose(d)
    collapse = next(a for a in diag["alerts"] if a["detector"] == "advantage_collapse")
    # a warning while the zero-variance groups were mixed; read as the task learned once they are all-correct
    assert collapse["step"] == 1 and collapse["fired_at"] == 5 and collapse["current"]["step"] == 36
    assert collapse["current"]["evidence"]["zero_variance_frac"] == 0.99
    assert (collapse["mode"], collapse["severity"]) == ("convergence", "info")
    assert collapse["escalations"] == [
        {"step": 15, "mode": "convergence", "from_mode": "advantage collapse"},
        {"step": 15, "from": "warning", "to": "info"},
    ]
    assert (
        "algo.group_filter=dynamic_sampling" not in collapse["fix"] and "monitor.stop_when_learned" in collapse["fix"]
    )
    kinds = {f["kind"]: f for f in diag["findings"]}
    assert kinds["generation_cap"]["hit"] == 21 and "21 of 36 steps" in kinds["generation_cap"]["message"]
    assert kinds["no_update"]["no_update"] == 9 and "9 of 36" in kinds["no_update"]["message"]
    assert any(a["mode"] == "converged / saturated" for a in diag["alerts"])
    # the collapse is the task learned (all-correct groups): the verdict says so first, not "failing"
    assert diag["verdict"] == "converged / saturated"
    assert all(a["severity"] == "info" for a in diag["alerts"])
    text = render(diag)
    assert text.splitlines()[1] == "  verdict: converged / saturated: " + VERDICT_MEANING["converged / saturated"]
    assert "now (step 36)" in text and "99%" in text and "eased: warning -> info at step 15" in text
    assert "became: convergence at step 15" in text and "CRITICAL" not in text.split("\n1. ")[1]
    assert doctor(str(d)).returncode == 0
    html = make_report(d).read_text()  # the report leads with the same verdict, in the colour of good news
    verdict = "<p class='verdict good'><b>verdict: converged / saturated: the task is learned"
    assert verdict in html and html.index(verdict) < html.index("<h2>Summary</h2>")
    assert "CRITICAL" not in html and "INFO convergence" in html


def test_a_logged_collapse_the_saturation_explains_is_information(tmp_path: Path) -> None:
    """A log whose collapse was raised critical (all-correct groups share, but no 'learned' reading in the log, as
    in a log written before it existed) is read again by the doctor: explained by saturation, shown as info,
    with the severity it was logged at, and the verdict leads."""
    rows = [
        {"zv/acc_frac": 0.9, "zv/all_correct": 0.45, "zv/all_wrong": 0.2, "reward/accuracy": 0.97} for _ in range(12)
    ]
    d = _grpokit_run(tmp_path / "sat", rows)
    diag = diagnose(d)
    collapse = next(a for a in diag["alerts"] if a["detector"] == "advantage_collapse")
    assert (collapse["mode"], collapse["severity_logged"], collapse["severity"]) == (
        "advantage collapse",
        "critical",
        "info",
    )
    assert diag["verdict"] == "converged / saturated"
    text = render(diag)
    assert "explained by: converged / saturated: the zero-variance groups are all-correct (logged as critical)" in text
    assert doctor(str(d)).returncode == 0


def test_a_run_that_never_trained_is_critical(tmp_path: Path) -> None:
    rows = [{"zv/frac": 1.0, "reward/mean": 0.0, "train/skipped_update": 1.0}] * 3
    d = _grpokit_run(tmp_path / "never", rows)
    diag = diagnose(d)
    assert diag["verdict"] == "never trained"
    assert any(f["kind"] == "never_trained" and "3 logged steps" in f["message"] for f in diag["findings"])
    assert any(f["kind"] == "too_few_steps" for f in diag["findings"])
    out = doctor(str(d))
    assert out.returncode == 1 and "never trained" in out.stdout


def test_entropy_advice_on_policy_offers_what_can_act(tmp_path: Path) -> None:
    """dapo with one optimizer step per batch: clip-higher cannot act; the entropy bonus can."""
    rows = [{"entropy/token_mean": 0.2 if i else 0.8, "reward/accuracy": 0.3, "reward/mean": 0.3} for i in range(61)]
    diag = diagnose(_grpokit_run(tmp_path / "low_entropy", rows))
    a = next(a for a in diag["alerts"] if a["mode"] == "entropy collapse")
    assert "clip-higher cannot act" in a["fix"] and not any("eps_high" in x for x in a["actions"])
    assert a["actions"] == ["algo.entropy_coef+=0.001"]


def test_doctor_on_a_bare_tensorboard_folder_knows_the_run_had_dynamic_sampling(tmp_path: Path) -> None:
    """Issue 13: doctor on a grpokit run's `tb/` folder recommended algo.dynamic_sampling=true to a dapo run (the
    folder carried no config). The config now travels inside the events."""
    from grpokit.run.writer import RunWriter as Writer

    w = Writer(tmp_path / "run")
    w.write_config(build_config("dapo").to_dict())
    for s in range(1, 9):
        w.log(s, {"zv/acc_frac": 0.9, "zv/all_wrong": 0.9, "zv/all_correct": 0.0, "reward/mean": 0.05})
    w.close()
    diag = diagnose(tmp_path / "run" / "tb")
    a = next(a for a in diag["alerts"] if a["mode"] == "advantage collapse")
    assert diag["source"] == "tensorboard" and diag["context"]["dynamic_sampling"] is True
    assert "dynamic sampling is on" in a["fix"] and a["actions"] == []


def test_doctor_never_raises_on_mangled_logs(tmp_path: Path, capsys) -> None:
    """Truncated, corrupted and odd versions of real logs: the doctor answers (exit 0/1) or refuses in one line
    (exit 2); it never raises."""
    import random

    from grpokit.monitor.doctor import doctor_main

    rng = random.Random(7)
    sources = [
        LOGS / "real" / "trl_unsloth_tsc_grpo_first_50_steps" / "docker_run.log",
        LOGS / "real" / "verl_grpo_gui_cursor_2_steps" / "verl_demo.log",
        LOGS / "trl_healthy" / "trainer_state.json",
    ]
    cases = 0
    for src in sources:
        data = src.read_bytes()
        for i in range(12):
            cut = data[: rng.randint(0, len(data))]
            if i % 3 == 1:  # flip random bytes
                b = bytearray(cut)
                for _ in range(min(len(b), 50)):
                    b[rng.randrange(len(b))] = rng.randrange(256)
                cut = bytes(b)
            elif i % 3 == 2:  # duplicate and shuffle lines
                lines = cut.splitlines(keepends=True)
                rng.shuffle(lines)
                cut = b"".join(lines + lines[: len(lines) // 3])
            f = tmp_path / f"{cases}_{src.name}"
            f.write_bytes(cut)
            code = doctor_main(str(f))
            err = capsys.readouterr().err
            assert code in (0, 1, 2), (f, code)
            if code == 2:
                assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
            cases += 1
    assert cases == 36


def test_advice_names_the_knob_of_the_trainer_that_wrote_the_log(tmp_path: Path) -> None:
    """A verl console log (its printed config says 4 mini-batches per batch, symmetric clip 0.2, no entropy bonus)
    whose entropy falls to 0.2 nats after its first step with a 30% score: the advice names verl's settings."""
    lines = [
        "(TaskRunner pid=1) {'actor_rollout_ref': {'actor': {'clip_ratio': 0.2,",
        "(TaskRunner pid=1)                                  'clip_ratio_high': 0.2,",
        "(TaskRunner pid=1)                                  'clip_ratio_low': 0.2,",
        "(TaskRunner pid=1)                                  'entropy_coeff': 0,",
        "(TaskRunner pid=1)                                  'ppo_epochs': 1,",
        "(TaskRunner pid=1)                                  'ppo_mini_batch_size': 64,",
        "(TaskRunner pid=1)  'data': {'train_batch_size': 256}}",
    ]
    lines += [
        f"(TaskRunner pid=1) step:{s} - actor/entropy:{0.8 if s == 1 else 0.2} - critic/score/mean:0.3 - "
        "critic/score/max:1.0 - "
        f"critic/score/min:0.0 - actor/pg_clipfrac:0.01"
        for s in range(1, 61)
    ]
    f = tmp_path / "verl.log"
    f.write_text("\n".join(lines) + "\n")
    diag = diagnose(f)
    assert diag["context"]["mini_batches"] == 4 and diag["context"]["eps_high"] == 0.2
    a = next(a for a in diag["alerts"] if a["mode"] == "entropy collapse")
    assert "clip-higher (algo.eps_high=0.28)" in a["fix"]  # off-policy (4 mini-batches), symmetric clip: it can act
    assert a["in_verl"]["algo.eps_high"] == "actor_rollout_ref.actor.clip_ratio_high"
    assert a["in_verl"]["algo.entropy_coef"] == "actor_rollout_ref.actor.entropy_coeff"
    assert "in verl: algo.eps_high -> actor_rollout_ref.actor.clip_ratio_high" in render(diag)


def test_doctor_on_an_openrlhf_console_names_openrlhf_arguments(tmp_path: Path) -> None:
    """An OpenRLHF console (the arguments it prints, then a `Global step N: {...}` line per step) whose responses hit
    the generation limit in half the samples: a truncation alert whose fix names OpenRLHF's own arguments."""
    lines = [
        "Namespace(max_epochs=1, rollout_batch_size=32, n_samples_per_prompt=8, train_batch_size=64, "
        "eps_clip_low_high=[0.2, 0.28], advantage_estimator='group_norm', dynamic_filtering=False)"
    ]
    lines += [
        f"(PPOTrainer pid=7) INFO 03-09 15:00:42 ppo_trainer.py:1179] ✨ Global step {s}: {{'policy_loss': 0.01, "
        f"'kl': 0.0, 'reward': 0.4, 'response_length': 1900.0, 'response_clip_ratio': 0.5, 'ppo_clip_ratio': 0.02}}"
        for s in range(1, 9)
    ]
    f = tmp_path / "openrlhf.out"
    f.write_text("\n".join(lines) + "\n")
    diag = diagnose(f)
    assert diag["source"] == "openrlhf-console"
    assert diag["context"] == {
        "trainer": "openrlhf",
        "epochs": 1,
        "mini_batches": 4,
        "eps_low": 0.2,
        "eps_high": 0.28,
        "dynamic_sampling": False,
        "recipe": "group_norm",
    }
    a = next(a for a in diag["alerts"] if a["mode"] == "truncation")
    assert a["evidence"]["truncation_rate"] == 0.5
    assert a["in_openrlhf"]["algo.soft_overlong"].startswith("--reward.overlong_buffer_len")
    assert a["in_openrlhf"]["rollout.max_new_tokens"] == "--rollout.max_new_tokens (before 2026-04: --generate_max_len)"
    assert "in openrlhf: algo.soft_overlong -> --reward.overlong_buffer_len" in render(diag)


def test_a_console_step_with_zero_loss_and_zero_reward_never_trained(tmp_path: Path) -> None:
    """NeMo-RL's console prints no gradient norm and no zero-variance fraction
    (real/nemo_rl_grpo_gemma3_27b_zero_reward: "Loss: 0.0000", "Avg Reward: 0.0000" over 1,024 samples): a loss and a
    mean reward both exactly 0 is no sample rewarded, every advantage 0, no update. A non-zero loss, or a reward, is
    a step that trained."""

    def nemo(loss: str, reward: str) -> Path:
        lines = [
            "========================= Step 1/10 =========================",
            "▶ Preparing batch...",
            "📊 Training Results:",
            f"  • Loss: {loss}",
            "  • Generation KL Error: 0.0004",
            f"  • Avg Reward: {reward}",
            "  • Mean Generation Length: 155.7715",
        ]
        f = tmp_path / f"nemo_{loss}_{reward}.log"
        f.write_text("\n".join(lines) + "\n", encoding="utf-8")
        return f

    diag = diagnose(nemo("0.0000", "0.0000"))
    assert diag["source"] == "nemo-rl" and diag["verdict"] == "never trained"
    msg = next(f["message"] for f in diag["findings"] if f["kind"] == "never_trained")
    assert "loss and mean reward both exactly 0" in msg
    for loss, reward in (("0.0123", "0.0000"), ("0.0000", "0.2500")):
        assert diagnose(nemo(loss, reward))["verdict"] != "never trained", (loss, reward)
