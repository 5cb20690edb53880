"""`grpokit doctor` on the trackers' own stores, each built by the tracker's real client in a child process: W&B
run directories (`wandb.init(mode="offline")`), MLflow stores (mlflow-skinny's file store, an `mlflow.db`) and
trackio databases. No hand-made file stands in for a store."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from grpokit.monitor.doctor import doctor_main
from grpokit.monitor.readers import read_run, read_runs

STEPS = 32
COLLAPSE_FROM = 20  # every group's rewards are equal from here on


def _client(tmp: Path, script: str) -> None:
    """Run a script that writes a store with a tracker's own client (a child process: the trackers start services
    and patch logging)."""
    env = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true", "MLFLOW_ALLOW_FILE_STORE": "true"}
    env["TRACKIO_DIR"] = str(tmp / "trackio")
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)], cwd=tmp, env=env, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-3000:]


#: the keys TRL's GRPOTrainer logs (with transformers' `train/` prefix on W&B and trackio), groups collapsing
TRL_ROWS = f"""
def trl_row(s, prefix="train/"):
    zero = s >= {COLLAPSE_FROM}
    row = {{"reward": 0.0 if zero else 0.4 + 0.01 * s, "reward_std": 0.0 if zero else 0.3, "loss": 0.01,
           "frac_reward_zero_std": 1.0 if zero else 0.1, "completions/mean_length": 50.0 + s, "kl": 0.001 * s,
           "entropy": 0.5, "grad_norm": 0.0 if zero else 1.0, "learning_rate": 1e-6}}
    row = {{prefix + k: v for k, v in row.items()}}
    if prefix:
        row["train/global_step"] = s
    return row
"""


def _doctor(capsys, path: Path, *args: str) -> tuple[int, str]:
    code = doctor_main(str(path), *args)
    out = capsys.readouterr()
    return code, out.out + out.err


# ------------------------------------------------------------------------------------------------------ W&B


@pytest.fixture(scope="module")
def wandb_runs(tmp_path_factory) -> Path:
    """Two offline W&B runs: a TRL run whose groups collapse at step 20 (it logs `frac_reward_zero_std`), and one
    that logs only `reward_std` (TRL before May 2025)."""
    pytest.importorskip("wandb")
    tmp = tmp_path_factory.mktemp("wandb")
    _client(
        tmp,
        TRL_ROWS
        + f"""
import wandb
cfg = {{"temperature": 0.9, "num_iterations": 1, "epsilon": 0.2, "epsilon_high": 0.28,
        "steps_per_generation": 4, "gradient_accumulation_steps": 4, "max_completion_length": 256}}
run = wandb.init(mode="offline", dir=".", project="grpo", name="trl-frac", config=cfg)
for s in range(1, {STEPS + 1}):
    wandb.log(trl_row(s))
run.finish()
run = wandb.init(mode="offline", dir=".", project="grpo", name="trl-std-only")
for s in range(1, {STEPS + 1}):
    row = trl_row(s)
    del row["train/frac_reward_zero_std"]
    wandb.log(row)
run.finish()
""",
    )
    return tmp / "wandb"


def _wandb_dir(root: Path, name: str) -> Path:
    for d in sorted(root.glob("offline-run-*")):
        if name.encode() in b"".join(f.read_bytes() for f in d.glob("run-*.wandb")):
            return d
    raise AssertionError(f"no run {name} in {root}")


def test_wandb_folder_latest_run_and_run_dir_find_the_advantage_collapse(wandb_runs: Path, capsys) -> None:
    logs = read_runs(wandb_runs)
    assert len(logs) == 2 and {lg.source for lg in logs} == {"wandb-run"}  # latest-run is not read twice
    frac = _wandb_dir(wandb_runs, "trl-frac")
    for path in (wandb_runs / "latest-run", frac, next(frac.glob("run-*.wandb"))):
        log = read_run(path)
        assert log.flavor == "trl" and log.steps == list(range(1, STEPS + 1)) and log.source == "wandb-run"
    log = read_run(frac)
    assert any("name trl-frac" in n and "project grpo" in n for n in log.notes), log.notes
    assert log.context == {
        "temperature": 0.9,
        "max_new_tokens": 256,
        "eps_low": 0.2,
        "eps_high": 0.28,
        "epochs": 1,
        "mini_batches": 1,
    }
    assert {"reward/mean", "reward/std", "zv/frac", "entropy/token_mean", "kl_ref/k3"} <= log.available
    for path in (wandb_runs, frac):
        code, out = _doctor(capsys, path, False, None, True)
        assert code == 1 and "CRITICAL advantage collapse" in out, out
        assert "trl-frac" in out
    assert any("name trl-std-only" in n for n in read_run(wandb_runs / "latest-run").notes)  # the newer run


def test_wandb_reward_std_alone(wandb_runs: Path, capsys) -> None:
    """TRL before `frac_reward_zero_std` (May 2025) logs `reward_std` only: it is read as `reward/std`, and a 0 there
    is every group's rewards equal (the mean of the groups' stds, or the batch's std: 0 either way), so the
    zero-variance signal is measured from it (issue 47 item 5; it was "advantage_collapse: needs ...")."""
    log = read_run(_wandb_dir(wandb_runs, "trl-std-only"))
    assert "zv/frac" not in log.available and log.series("reward/std")[1][COLLAPSE_FROM - 1 :] == [0.0] * 13
    code, out = _doctor(capsys, _wandb_dir(wandb_runs, "trl-std-only"))
    assert code == 1 and "trl-std-only" in out and "CRITICAL advantage collapse" in out, out
    assert "reward std 0" in out and "advantage_collapse: needs" not in out, out


def test_wandb_grpokit_run_config_and_multi_block_records(tmp_path: Path) -> None:
    """grpokit's names and config through W&B (`train.report_to=[wandb]`): the config record is grpokit's config
    (a later `config.update` included); a 100 kB config value is one record over four 32 KiB blocks."""
    pytest.importorskip("wandb")
    _client(
        tmp_path,
        f"""
import wandb
cfg = {{"algo": {{"group_filter": "dynamic_sampling", "eps_high": 0.28}}, "recipe": "dapo", "note": "x" * 100000}}
run = wandb.init(mode="offline", dir=".", project="grpo", name="grpokit", config=cfg)
run.config.update({{"monitor": {{"stop_when_learned": True}}}})
for s in range(1, {STEPS + 1}):
    wandb.log({{"reward/mean": 0.5, "zv/frac": 1.0 if s >= {COLLAPSE_FROM} else 0.2, "entropy/token_mean": 0.4}},
              step=s)
run.finish()
""",
    )
    log = read_run(tmp_path / "wandb" / "latest-run")
    assert log.flavor == "grpokit" and log.steps == list(range(1, STEPS + 1))
    assert log.config["algo"] == {"group_filter": "dynamic_sampling", "eps_high": 0.28}
    assert log.config["monitor"] == {"stop_when_learned": True} and len(log.config["note"]) == 100000
    assert log.context["dynamic_sampling"] is True and log.context["recipe"] == "dapo"


def test_wandb_truncated_and_corrupt_files_give_the_rows_read_so_far(wandb_runs: Path, tmp_path: Path) -> None:
    """Every cut of a real `.wandb` file and a flipped byte in each of its chunks: the rows before the damage and a
    note, never a traceback."""
    import random

    from grpokit.monitor.readers.wandb_run import read_wandb_file

    src = next(_wandb_dir(wandb_runs, "trl-frac").glob("run-*.wandb"))
    data = src.read_bytes()
    full, _, _, notes = read_wandb_file(src)
    assert notes == [] and len(full) == STEPS
    rng = random.Random(3)
    f = tmp_path / "run-x.wandb"
    cuts = sorted({rng.randrange(len(data)) for _ in range(60)} | {0, 4, 7, 8, 13, 14, len(data) - 1})
    for cut in cuts:
        f.write_bytes(data[:cut])
        rows, _, _, notes = read_wandb_file(f)
        assert len(rows) <= STEPS and all(rows[s] == full[s] for s in rows), cut
        assert notes or cut in (4, 5, 6), cut  # a cut file has no exit record
    for _ in range(60):
        b = bytearray(data)
        at = rng.randrange(7, len(b))
        b[at] ^= 0xFF
        f.write_bytes(bytes(b))
        rows, _, _, notes = read_wandb_file(f)
        assert notes and all(rows[s] == full[s] for s in rows), at
    f.write_bytes(b"\0" * 100)
    assert read_wandb_file(f)[3] == ["run-x.wandb: not a W&B transaction log (no ':W&B' header)"]


def test_wandb_missing_is_one_line(wandb_runs: Path, monkeypatch, capsys) -> None:
    monkeypatch.setitem(sys.modules, "wandb.proto", None)
    monkeypatch.setitem(sys.modules, "wandb.proto.wandb_internal_pb2", None)
    code, out = _doctor(capsys, wandb_runs / "latest-run")
    assert code == 2 and len(out.strip().splitlines()) == 1 and "pip install 'wandb>=0.19'" in out, out


# --------------------------------------------------------------------------------------------------- MLflow

#: transformers' MLflow callback: TRL's keys bare, `step=state.global_step`, the training arguments as params
MLFLOW_RUNS = (
    TRL_ROWS
    + f"""
import mlflow
def trl_run(name):
    with mlflow.start_run(run_name=name):
        mlflow.log_params({{"temperature": 0.9, "epsilon": 0.2, "num_iterations": 2, "max_completion_length": 128}})
        for s in range(1, {STEPS + 1}):
            mlflow.log_metrics(trl_row(s, prefix=""), step=s)
def grpokit_run(name):
    with mlflow.start_run(run_name=name):  # grpokit's MLflow tracker: the config as dotted params
        mlflow.log_params({{"algo.group_filter": "dynamic_sampling", "algo.eps_high": "0.28", "recipe": "dapo",
                           "monitor.stop_when_learned": "True", "train.steps": "32"}})
        for s in range(1, {STEPS + 1}):
            mlflow.log_metrics({{"reward/mean": 0.5, "zv/frac": 1.0 if s >= {COLLAPSE_FROM} else 0.2}}, step=s)
mlflow.set_tracking_uri(URI)
mlflow.set_experiment("grpo")
trl_run("trl-run")
grpokit_run("grpokit-run")
"""
)


def _check_mlflow_store(store: Path, capsys) -> None:
    logs = {lg.name.split("#")[-1]: lg for lg in read_runs(store)}
    assert set(logs) == {"grpo/trl-run", "grpo/grpokit-run"} and {lg.source for lg in logs.values()} == {"mlflow"}
    trl = logs["grpo/trl-run"]
    assert trl.flavor == "trl" and trl.steps == list(range(1, STEPS + 1))
    assert {"reward/mean", "reward/std", "zv/frac", "kl_ref/k3", "length/mean"} <= trl.available
    assert trl.context == {"temperature": 0.9, "max_new_tokens": 128, "eps_low": 0.2, "eps_high": 0.2, "epochs": 2}
    gk = logs["grpo/grpokit-run"]
    assert gk.flavor == "grpokit" and gk.config["algo"] == {"group_filter": "dynamic_sampling", "eps_high": 0.28}
    assert gk.config["monitor"] == {"stop_when_learned": True} and gk.context["dynamic_sampling"] is True
    code, out = _doctor(capsys, store, False, "trl-run")
    assert code == 1 and "CRITICAL advantage collapse" in out and "grpo/trl-run" in out, out
    code, out = _doctor(capsys, store)
    assert code == 1 and out.count("advantage collapse") >= 2, out  # the summary table: both runs collapse


def test_mlflow_file_store(tmp_path: Path, capsys) -> None:
    pytest.importorskip("mlflow")
    _client(tmp_path, f"URI = {(tmp_path / 'mlruns').as_uri()!r}\n" + MLFLOW_RUNS)
    _check_mlflow_store(tmp_path / "mlruns", capsys)
    _check_mlflow_store(tmp_path, capsys)  # the folder holding mlruns/
    run_dir = next(p.parent for p in (tmp_path / "mlruns").glob("*/*/meta.yaml") if "trl-run" in p.read_text())
    log = read_run(run_dir)  # one run folder of the store
    assert log.flavor == "trl" and log.steps == list(range(1, STEPS + 1))


def test_mlflow_sqlite_store(tmp_path: Path, capsys) -> None:
    """MLflow 3's default backend, `mlflow.db` (mlflow-skinny reads it with SQLAlchemy and alembic installed); the
    database is not modified by reading it."""
    pytest.importorskip("mlflow")
    pytest.importorskip("sqlalchemy")
    pytest.importorskip("alembic")
    db = tmp_path / "mlflow.db"
    _client(tmp_path, f"URI = 'sqlite:///{db}'\n" + MLFLOW_RUNS)
    before = db.read_bytes()
    _check_mlflow_store(db, capsys)
    assert db.read_bytes() == before


def test_mlflow_sqlite_without_sqlalchemy_is_one_line(tmp_path: Path, monkeypatch, capsys) -> None:
    """A real mlflow.db read where mlflow-skinny has no SQLAlchemy: one line naming what to install."""
    pytest.importorskip("mlflow")
    pytest.importorskip("sqlalchemy")
    db = tmp_path / "mlflow.db"
    _client(tmp_path, f"URI = 'sqlite:///{db}'\n" + MLFLOW_RUNS)
    monkeypatch.setitem(sys.modules, "sqlalchemy", None)
    code, out = _doctor(capsys, db)
    assert code == 2 and len(out.strip().splitlines()) == 1 and "pip install sqlalchemy alembic" in out, out


# -------------------------------------------------------------------------------------------------- trackio


def test_trackio_database_and_folder(tmp_path: Path, capsys) -> None:
    """transformers' trackio callback logs TRL's keys with `train/` and `train/global_step`; a second run of the
    same project logs grpokit's names with trackio's own step; a NaN loss is trackio's "NaN"."""
    pytest.importorskip("trackio")
    _client(
        tmp_path,
        TRL_ROWS
        + f"""
import trackio
trackio.init(project="grpo", name="trl-run", config={{"temperature": 0.7, "epsilon": 0.2, "epsilon_high": 0.28}})
for s in range(1, {STEPS + 1}):
    row = trl_row(s)
    if s == 5:
        row["train/loss"] = float("nan")
    trackio.log(row)
trackio.finish()
trackio.init(project="grpo", name="grpokit-run", config={{"algo": {{"group_filter": "dynamic_sampling"}}}})
for s in range(1, 6):
    trackio.log({{"reward/mean": 0.5, "zv/frac": 0.1}}, step=s)
trackio.finish()
""",
    )
    folder = tmp_path / "trackio"
    for path in (folder, folder / "grpo.db"):
        logs = {lg.name.split("#")[-1]: lg for lg in read_runs(path)}
        assert set(logs) == {"trl-run", "grpokit-run"} and {lg.source for lg in logs.values()} == {"trackio"}
        trl = logs["trl-run"]
        assert trl.flavor == "trl" and trl.steps == list(range(1, STEPS + 1))
        assert trl.context == {"temperature": 0.7, "eps_low": 0.2, "eps_high": 0.28}
        assert trl.rows[4]["train/nonfinite_loss"] == 1.0  # the NaN loss is read as the trainer wrote it
        gk = logs["grpokit-run"]
        assert gk.flavor == "grpokit" and gk.steps == [1, 2, 3, 4, 5] and gk.context["dynamic_sampling"] is True
    code, out = _doctor(capsys, folder / "grpo.db", False, "trl-run")
    assert code == 1 and "CRITICAL advantage collapse" in out and "trl-run" in out, out


def test_trackio_database_locked_by_its_writer_is_one_line(tmp_path: Path, capsys) -> None:
    pytest.importorskip("trackio")
    _client(tmp_path, 'import trackio\ntrackio.init(project="p")\ntrackio.log({"reward/mean": 1.0})\ntrackio.finish()')
    import sqlite3

    db = tmp_path / "trackio" / "p.db"
    assert read_run(db).steps == [0]
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA locking_mode = EXCLUSIVE")
    conn.execute("BEGIN EXCLUSIVE")
    conn.execute("INSERT INTO project_metadata VALUES ('k', 'v')")
    try:
        code, out = _doctor(capsys, db)
    finally:
        conn.rollback()
        conn.close()
    assert code == 2 and len(out.strip().splitlines()) == 1 and "locked" in out, out
