"""`train.report_to`: a real tiny-model run logs to TensorBoard, W&B (offline) and MLflow (file store in the run
directory), a real alert reaches each of them as text, a resumed run continues the same tracker runs, and a
tracker whose library is missing is one error naming the pip install. trackio writes its local SQLite store
in the run directory (`make setup` installs the `trackers` extra, so all three run in `make test`)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from tiny_config import tiny_overrides

from grpokit.config import ConfigError, build_config
from grpokit.run.trackers import TrackerError
from grpokit.run.writer import RunWriter
from grpokit.training import Trainer, fit

FAST = tiny_overrides(
    "model.precision=fp32",
    "rollout.max_new_tokens=4",
    "train.save_every=3",
    # a constant reward: advantage collapse fires at step 2 (two rows of zero-variance groups) -- a real alert
    "reward.functions=[toy_rewards:always_zero]",
    "monitor.thresholds={advantage_collapse: {window: 3}}",
)


def run(run_dir: Path, steps: int, report_to: str, resume: bool = False) -> Trainer:
    cfg = build_config("grpo", overrides=FAST + [f"train.steps={steps}", f"train.report_to={report_to}"])
    trainer = Trainer(cfg, run_dir)
    if resume:
        assert trainer.restore() == 3
    fit(trainer, None, eval_before=False)
    return trainer


def _mlflow_run(run_dir: Path) -> Path:
    runs = [p.parent for p in (run_dir / "mlruns").glob("*/*/meta.yaml")]
    assert len(runs) == 1, runs  # one MLflow run, continued by the resume
    return runs[0]


def test_wandb_mlflow_tensorboard_get_metrics_config_and_alerts(tmp_path: Path, monkeypatch) -> None:
    pytest.importorskip("wandb")
    pytest.importorskip("mlflow")
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    run(tmp_path, 3, "[tensorboard,wandb,mlflow]")
    run(tmp_path, 4, "[tensorboard,wandb,mlflow]", resume=True)
    alerts = [json.loads(x) for x in (tmp_path / "alerts.jsonl").read_text().splitlines()]
    assert [a["detector"] for a in alerts] == ["advantage_collapse"] and alerts[0]["fired_at"] == 2

    # MLflow: metrics per step, the config as params, the alert as a text artifact and a tag
    ml = _mlflow_run(tmp_path)
    rows = [ln.split() for ln in (ml / "metrics" / "reward" / "mean").read_text().splitlines()]
    assert sorted({int(r[2]) for r in rows}) == [1, 2, 3, 4] and all(float(r[1]) == 0.0 for r in rows)
    assert (ml / "params" / "algo.kl_coef").read_text().strip() == "0.04"
    text = next((ml / "artifacts" / "alerts").glob("step_000002_advantage_collapse.txt")).read_text()
    assert "advantage_collapse at step 2" in text and alerts[0]["message"] in text and "fix:" in text
    assert (ml / "tags" / "alert.advantage_collapse").read_text().startswith("step 2:")
    points = (ml / "metrics" / "alerts" / "advantage_collapse").read_text().splitlines()
    level = {"warning": 1.0, "critical": 2.0}[alerts[0]["severity"]]
    assert [(float(p.split()[1]), int(p.split()[2])) for p in points] == [(level, 2)]

    # W&B offline: one run (its id comes from the run directory), metrics and the alert text in it
    wb = list((tmp_path / "wandb").glob("offline-run-*"))
    assert len(wb) == 2 and len({p.name.rsplit("-", 1)[1] for p in wb}) == 1  # two sessions, one W&B run id
    data = b"".join(f.read_bytes() for p in wb for f in p.glob("run-*.wandb"))
    assert b"reward/mean" in data and b"alerts/advantage_collapse" in data and b"algo" in data
    html = [f.read_text() for p in wb for f in p.rglob("*.html")]
    assert any(alerts[0]["message"][:40] in h for h in html)

    # TensorBoard: the alert as a text summary beside the scalars
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    ea = EventAccumulator(str(tmp_path / "tb"), size_guidance={"tensors": 0})
    ea.Reload()
    tags = ea.Tags()["tensors"]
    assert "alerts/advantage_collapse/text_summary" in tags
    body = ea.Tensors("alerts/advantage_collapse/text_summary")[0].tensor_proto.string_val[0].decode()
    assert "advantage_collapse at step 2" in body


def test_report_to_none_writes_no_tensorboard(tmp_path: Path) -> None:
    log = RunWriter(tmp_path, report_to=[])
    log.log(1, {"reward/mean": 0.5})
    log.close()
    assert not (tmp_path / "tb").exists() and (tmp_path / "metrics.jsonl").exists()


@pytest.mark.parametrize("name", ["wandb", "mlflow", "trackio"])
def test_missing_tracker_library_names_the_pip_install(name: str, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, name, None)  # import fails as it does where the library is not installed
    with pytest.raises(TrackerError, match=rf"pip install 'grpokit\[trackers\]' \(or pip install {name}"):
        RunWriter(tmp_path, report_to=["tensorboard", name])
    assert not (tmp_path / "metrics.jsonl").exists()


def test_unknown_tracker_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"train.report_to=\['comet'\] is invalid: use a list of tensorboard"):
        build_config("grpo", overrides=["train.report_to=[comet]"])


def test_missing_tracker_on_the_command_line(tmp_path: Path) -> None:
    try:
        import trackio  # noqa: F401

        pytest.skip("trackio is installed here")
    except ImportError:
        pass
    out = subprocess.run(
        [sys.executable, "-m", "grpokit.cli", "train", "--model", "tiny", "--steps", "1"]
        + ["--output-dir", str(tmp_path / "run"), "--set", "train.report_to=[trackio]"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 2, out.stderr
    assert "pip install 'grpokit[trackers]' (or pip install trackio)" in out.stderr and "Traceback" not in out.stderr
    assert not (tmp_path / "run" / "metrics.jsonl").exists()


def test_trackio_gets_config_metrics_and_alerts_in_its_local_store(tmp_path: Path, monkeypatch) -> None:
    """trackio writes a SQLite store in <run>/trackio (TRACKIO_DIR is read when trackio is imported, so this runs
    in a fresh process); the alert arrives as a trackio alert with its level and step."""
    pytest.importorskip("trackio")
    import sqlite3

    script = (
        "import sys; sys.path.insert(0, {!r})\n"
        "from pathlib import Path\n"
        "from grpokit.config import build_config\n"
        "from grpokit.training import Trainer, fit\n"
        "cfg = build_config('grpo', overrides={!r})\n"
        "fit(Trainer(cfg, Path({!r})), None, eval_before=False)\n"
    ).format(str(Path(__file__).parents[1]), FAST + ["train.steps=3", "train.report_to=[trackio]"], str(tmp_path))
    env = {k: v for k, v in __import__("os").environ.items() if k != "TRACKIO_DIR"}
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    db = sqlite3.connect(tmp_path / "trackio" / "grpokit.db")
    steps = sorted(r[0] for r in db.execute("select step from metrics"))
    assert steps[-1] == 3 and set(steps) >= {1, 2, 3}
    row = json.loads(db.execute("select metrics from metrics where step = 3").fetchone()[0])
    assert row["reward/mean"] == 0.0
    ((title, text, level, step),) = db.execute("select title, text, level, step from alerts").fetchall()
    assert title == "grpokit: advantage_collapse" and step == 2 and level in ("warning", "warn", "error")
    assert "advantage_collapse at step 2" in text and "fix:" in text
    assert db.execute("select count(*) from configs").fetchone()[0] == 1
