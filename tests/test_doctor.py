"""`grpokit doctor` and `grpokit report` on real logs: TRL runs (committed fixtures with the script that made
them), a verl-format console log, and grpokit run directories; autopilot on a real tiny run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from grpokit.config import build_config
from grpokit.monitor.doctor import diagnose
from grpokit.monitor.report import make_report
from grpokit.trainer import Trainer, fit

LOGS = Path(__file__).parent / "fixtures" / "logs"
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
]
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(Path(__file__).parent)}


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
    assert "advantage_collapse" in diag["not_measurable"]  # verl logs no zero-variance fraction
    assert diag["last_values"]["entropy/token_mean"] < 0.5


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
    assert trainer.cfg.algo.dynamic_sampling is False
    fit(trainer, None, eval_before=False)
    assert trainer.cfg.algo.dynamic_sampling is True
    rows = [json.loads(x) for x in (tmp_path / "interventions.jsonl").read_text().splitlines()]
    inter = [r for r in rows if r["kind"] == "intervention"]
    assert inter[0]["action"] == "algo.dynamic_sampling=true" and inter[0]["before"] is False
    assert inter[0]["after"] is True and "advantage collapse" in inter[0]["reason"]
    assert "zv/frac" in inter[0]["metrics_before"]
    follow = [r for r in rows if r["kind"] == "followup"]
    assert follow and "metrics_after" in follow[0]


def test_autopilot_respects_bounds(tmp_path: Path) -> None:
    from grpokit.monitor.autopilot import Autopilot, Bounds

    overrides = ["model.name=tiny", "rollout.max_new_tokens=2", "train.steps=0", "algo.eps_high=0.38"]
    trainer = Trainer(build_config("dapo", overrides=overrides), tmp_path)
    pilot = Autopilot(trainer, Bounds(max_eps_high=0.4))
    assert pilot.apply("algo.eps_high+=0.04") == (0.38, 0.4)
    assert pilot.apply("algo.eps_high+=0.04") is None  # already at the bound: nothing changes
    assert pilot.apply("train.lr*=0.5") == (trainer.cfg.train.lr * 2, trainer.cfg.train.lr)
    assert trainer.optimizer.param_groups[0]["lr"] == trainer.cfg.train.lr
