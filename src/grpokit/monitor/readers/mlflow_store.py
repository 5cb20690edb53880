"""MLflow tracking stores, read with MLflow's own client (`mlflow.tracking.MlflowClient`): a file store (`mlruns/`,
or one experiment or run folder of it) and an SQLite store (`mlflow.db`, MLflow 3's default backend).

Each run of the store is a run: `search_runs` over every experiment, each metric's points from
`get_metric_history` (`step` is the step the trainer gave `log_metric`: transformers' MLflow callback passes the
trainer's global step, and logs TRL's keys bare, `reward`, `reward_std`), the run's params as its config
(text turned back into values; grpokit's MLflow tracker logs its config as dotted params, `algo.eps_high`).

Bounds: mlflow-skinny >= 2.10 (the `trackers` extra's bound) has `search_experiments`, `search_runs` with
`page_token` and `get_metric_history`. MLflow 3 refuses a file store unless `MLFLOW_ALLOW_FILE_STORE=true`,
which this reader sets (as grpokit's own MLflow tracker does). An SQLite store needs SQLAlchemy and alembic
next to mlflow-skinny (skinny's own note: "To use SQL-based metadata storage, install sqlalchemy, alembic, and
sqlparse"; the full `mlflow` package has them); the database is read from a snapshot (`sqlite_snapshot`), since
MLflow's client upgrades an older database's schema in place when it opens it.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from .canonical import RawRows, Reader, Segment
from .tracker_common import (
    add_row,
    missing_client,
    param_value,
    sqlite_snapshot,
    sqlite_tables,
    store_segment,
    unflatten,
)

_MLFLOW_TABLES = {"experiments", "runs", "metrics", "params", "alembic_version"}
_MAX_RUNS = 10_000


def _meta(path: Path) -> str:
    try:
        return (path / "meta.yaml").read_text(encoding="utf-8", errors="replace")[:10_000]
    except OSError:
        return ""


def _file_store_root(path: Path) -> tuple[Path, str | None, str | None] | None:
    """(store root, experiment id, run id) of a file store, one of its experiment folders, or one run folder."""
    meta = _meta(path)
    if "run_id:" in meta and "experiment_id:" in meta:
        return path.parent.parent, path.parent.name, path.name
    if "experiment_id:" in meta and "artifact_location:" in meta:
        return path.parent, path.name, None
    if path.is_dir():
        for sub in sorted(path.iterdir())[:200]:
            m = _meta(sub) if sub.is_dir() else ""
            if "experiment_id:" in m and "artifact_location:" in m and "run_id:" not in m:
                return path, None, None
    return None


class MlflowReader(Reader):
    """An MLflow store: every run in it (one segment each, named `#<experiment>/<run name>` when there are
    several)."""

    name = "mlflow"

    def runs(self, path: Path) -> list[tuple[str, list[Path]]]:
        if path.is_file():
            return [("", [path])] if path.suffix == ".db" and _MLFLOW_TABLES <= (sqlite_tables(path) or set()) else []
        return [("", [path])] if path.is_dir() and _file_store_root(path) else []

    def read(self, files: list[Path]) -> list[Segment]:
        path = files[0]
        try:
            from mlflow.tracking import MlflowClient
        except ImportError:
            raise missing_client(f"{path} (an MLflow store)", "mlflow-skinny", "mlflow-skinny>=2.10") from None
        if path.is_file():
            try:
                import alembic  # noqa: F401
                import sqlalchemy  # noqa: F401
            except ImportError:
                raise ValueError(
                    f"{path} (an MLflow SQLite store): reading it needs SQLAlchemy and alembic next to "
                    "mlflow-skinny (pip install sqlalchemy alembic sqlparse, or pip install mlflow)"
                ) from None
            with tempfile.TemporaryDirectory(prefix="grpokit-mlflow-") as tmp:
                copy = Path(tmp) / "mlflow.db"
                sqlite_snapshot(path, copy, "an MLflow SQLite store")
                return _read_store(MlflowClient, f"sqlite:///{copy}", None, None, path)
        root, exp_id, run_id = _file_store_root(path) or (path, None, None)
        os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3: the file store is opt-in
        return _read_store(MlflowClient, root.resolve().as_uri(), exp_id, run_id, path)


def _read_store(client_cls: Any, uri: str, exp_id: str | None, run_id: str | None, path: Path) -> list[Segment]:
    from mlflow.entities import ViewType
    from mlflow.exceptions import MlflowException

    try:
        client = client_cls(tracking_uri=uri)
        exps = {e.experiment_id: e.name for e in client.search_experiments(view_type=ViewType.ACTIVE_ONLY)}
        ids = [exp_id] if exp_id else list(exps)
        runs: list[Any] = []
        token = None
        while ids and len(runs) < _MAX_RUNS:
            page = client.search_runs(ids, max_results=1000, page_token=token, order_by=["attributes.start_time ASC"])
            runs.extend(page)
            token = page.token
            if not token:
                break
        if run_id:
            runs = [r for r in runs if r.info.run_id == run_id]
        segs = []
        names = [f"{exps.get(r.info.experiment_id, r.info.experiment_id)}/{r.info.run_name}" for r in runs]
        for r, name in zip(runs, names):
            if names.count(name) > 1:
                name += f" ({r.info.run_id[:8]})"
            segs.append(_run_segment(client, r, name if len(runs) > 1 else "", path))
    except MlflowException as e:
        raise ValueError(f"{path}: MLflow cannot read this store ({str(e).splitlines()[0][:300]})") from None
    return segs


def _run_segment(client: Any, run: Any, name: str, path: Path) -> Segment:
    by_step: dict[int, dict[str, tuple[int, float]]] = {}
    for key in sorted(run.data.metrics):
        for m in client.get_metric_history(run.info.run_id, key):
            at = by_step.setdefault(int(m.step), {})
            if key not in at or m.timestamp >= at[key][0]:  # a step logged twice: the later value
                at[key] = (m.timestamp, float(m.value))
    rows: RawRows = {}
    for step in sorted(by_step):
        add_row(rows, step, {k: v for k, (_, v) in by_step[step].items()})
    cfg = unflatten({k: param_value(v) for k, v in run.data.params.items()})
    where = f"the MLflow run's params ({len(run.data.params)})"
    notes = [f"MLflow run {run.info.run_name} (id {run.info.run_id}, status {run.info.status})"]
    return store_segment(rows, cfg, f"#{name}" if name else "", notes, where)
