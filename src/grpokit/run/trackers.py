"""Experiment trackers named by `train.report_to`: tensorboard, wandb, mlflow, trackio, each a registered `Tracker`.

Each tracker is optional: its library is imported when a run names it, and a missing one is one error naming the
`pip install` that adds it. Every tracker receives the config (once), each logged row of numeric metrics at its
step, and every alert as text (detector, severity, message, fix) as well as a numeric `alerts/<detector>` point,
so an alert is seen where the curves are, not only in `alerts.jsonl`.

Offline by default where the library allows it:

* tensorboard: event files in `<run>/tb` (the config as text under `grpokit/config` and as hparams, in the run's
  own event file; a resumed run's config is already in its first event file and is not written again).
* wandb: `mode="offline"` into `<run>/wandb` unless `WANDB_MODE` is set (e.g. `online`); `wandb sync` uploads
  later. The W&B run id is derived from the run directory, so a resumed run continues the same W&B run.
* mlflow: a file store in `<run>/mlruns` unless `MLFLOW_TRACKING_URI` is set (MLflow 3 asks for
  `MLFLOW_ALLOW_FILE_STORE=true` to write one; grpokit sets it for its own store only). The run id is kept in
  `<run>/mlruns/grpokit_run_id`, so a resumed run continues it.
* trackio: local by default (its own SQLite store; a `space_id` is never set here).
"""

from __future__ import annotations

import hashlib
import importlib
import math
import os
import sys
from pathlib import Path
from typing import Any

from .. import metric_names as mn
from ..common.registry import Registry

PIP_NAMES = {"wandb": "wandb", "mlflow": "mlflow-skinny", "trackio": "trackio"}
PROJECT = os.environ.get("GRPOKIT_PROJECT", "grpokit")


class TrackerError(ValueError):
    """A tracker named in train.report_to that cannot be used."""


def _require(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ImportError:
        raise TrackerError(
            f"train.report_to names {name!r} but the {name} package is not installed: "
            f"pip install 'grpokit[trackers]' (or pip install {PIP_NAMES[name]}), or drop {name} from train.report_to"
        ) from None


def flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """A nested config as one level of dotted keys: {"algo": {"eps": 0.2}} -> {"algo.eps": 0.2}."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flatten(v, key + "."))
        else:
            out[key] = v
    return out


def alert_step(alert: dict[str, Any]) -> int:
    """The step an alert was raised at (`fired_at`; its onset `step` can be earlier)."""
    return int(alert.get("fired_at", alert.get("step", 0)) or 0)


def alert_text(alert: dict[str, Any]) -> str:
    """An alert as a few lines of text (Markdown-friendly)."""
    head = f"[{alert.get('severity', '?')}] {alert.get('detector', '?')} at step {alert_step(alert)}"
    if alert.get("step") is not None and alert.get("step") != alert_step(alert):
        head += f" (since step {alert['step']})"
    lines = [head]
    if alert.get("message"):
        lines.append(str(alert["message"]))
    if alert.get("fix"):
        lines.append(f"fix: {alert['fix']}")
    return "\n\n".join(lines)


def numeric(metrics: dict[str, Any]) -> dict[str, float]:
    """The finite numbers of a metrics row (trackers take no None/NaN/strings)."""
    out = {}
    for k, v in metrics.items():
        if isinstance(v, bool):
            v = float(v)
        if isinstance(v, (int, float)) and math.isfinite(float(v)):
            out[k] = float(v)
    return out


SEVERITY_LEVEL = {"info": 0, "warning": 1, "warn": 1, "critical": 2, "error": 2}


class Tracker:
    """One tracker backend: `start` (with the config), `log`, `alert`, `close`."""

    name = ""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.lib = _require(self.name)

    def start(self, config: dict[str, Any]) -> None:
        raise NotImplementedError

    def log(self, step: int, metrics: dict[str, float]) -> None:
        raise NotImplementedError

    def alert(self, step: int, alert: dict[str, Any]) -> None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError


TRACKERS = Registry("tracker")


@TRACKERS.register("tensorboard")
class TensorBoardTracker(Tracker):
    """TensorBoard event files in `<run>/tb`; tensorboard is a declared dependency, and without it nothing is
    written (a run does not stop for its default tracker)."""

    name = "tensorboard"

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.dir = run_dir / "tb"
        self.resumed = self.dir.is_dir() and any(self.dir.glob("events.out.tfevents.*"))
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:
            self.writer = None
        else:
            self.writer = SummaryWriter(str(self.dir))

    def start(self, config: dict[str, Any]) -> None:
        if self.writer is None or self.resumed:
            return
        import yaml
        from torch.utils.tensorboard.summary import hparams

        text = yaml.safe_dump(config, sort_keys=False)
        self.writer.add_text(mn.CONFIG_TEXT_TAG, "```yaml\n" + text + "```", 0)
        # hparams in the run's own event file (SummaryWriter.add_hparams would start a second event file in a
        # sub-folder: a second "run" to every reader)
        flat = {k: v if isinstance(v, (int, float, str, bool)) else str(v) for k, v in flatten(config).items()}
        for summary in hparams(flat, {}):
            self.writer._get_file_writer().add_summary(summary)
        self.writer.flush()

    def log(self, step: int, metrics: dict[str, float]) -> None:
        if self.writer is None:
            return
        for k, v in metrics.items():
            self.writer.add_scalar(k, v, step)
        self.writer.flush()

    def alert(self, step: int, alert: dict[str, Any]) -> None:
        if self.writer is None:
            return
        self.writer.add_text(mn.ALERTS_PREFIX + str(alert.get("detector", "alert")), alert_text(alert), step)
        self.writer.flush()

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


@TRACKERS.register("wandb")
class WandbTracker(Tracker):
    name = "wandb"

    def start(self, config: dict[str, Any]) -> None:
        run_id = hashlib.sha1(str(self.run_dir.resolve()).encode()).hexdigest()[:12]
        self.run = self.lib.init(
            project=PROJECT,
            name=self.run_dir.name,
            id=run_id,
            resume="allow",
            dir=str(self.run_dir),
            config=config,
            mode=os.environ.get("WANDB_MODE", "offline"),
        )

    def log(self, step: int, metrics: dict[str, float]) -> None:
        self.run.log(metrics, step=step)

    def alert(self, step: int, alert: dict[str, Any]) -> None:
        text = alert_text(alert)
        html = self.lib.Html(f"<pre>{text}</pre>")  # beside the numeric alerts/<detector> point
        self.run.log({f"alert_text/{alert.get('detector', 'alert')}": html}, step=step)
        if not self.run.offline:  # a W&B notification (e-mail / Slack) where the run is online
            level = self.lib.AlertLevel.ERROR if alert.get("severity") == "critical" else self.lib.AlertLevel.WARN
            self.run.alert(title=f"grpokit: {alert.get('detector')}", text=text, level=level)

    def close(self) -> None:
        self.run.finish()


@TRACKERS.register("mlflow")
class MlflowTracker(Tracker):
    name = "mlflow"

    def start(self, config: dict[str, Any]) -> None:
        store = self.run_dir / "mlruns"
        if not os.environ.get("MLFLOW_TRACKING_URI"):
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
            self.lib.set_tracking_uri(store.resolve().as_uri())
        self.lib.set_experiment(PROJECT)
        id_file = store / "grpokit_run_id"
        run_id = id_file.read_text().strip() if id_file.exists() else None
        self.run = self.lib.start_run(run_id=run_id, run_name=None if run_id else self.run_dir.name)
        if run_id is None:
            store.mkdir(parents=True, exist_ok=True)
            id_file.write_text(self.run.info.run_id)
            flat = {k: str(v)[:500] for k, v in flatten(config).items()}  # mlflow caps a param at 500 chars
            items = list(flat.items())
            for i in range(0, len(items), 100):  # mlflow takes at most 100 params per call
                self.lib.log_params(dict(items[i : i + 100]))

    def log(self, step: int, metrics: dict[str, float]) -> None:
        self.lib.log_metrics({_mlflow_key(k): v for k, v in metrics.items()}, step=step)

    def alert(self, step: int, alert: dict[str, Any]) -> None:
        detector = alert.get("detector", "alert")
        self.lib.log_text(alert_text(alert), f"alerts/step_{step:06d}_{detector}.txt")
        self.lib.set_tag(f"alert.{detector}", f"step {step}: {alert.get('message', '')}"[:5000])

    def close(self) -> None:
        self.lib.end_run()


def _mlflow_key(key: str) -> str:
    """MLflow metric names allow letters, digits, _ - . space / only."""
    return "".join(c if c.isalnum() or c in "_-. /" else "_" for c in key)


@TRACKERS.register("trackio")
class TrackioTracker(Tracker):
    """trackio's local store (SQLite) in `<run>/trackio` unless TRACKIO_DIR is set (read when trackio is imported)."""

    name = "trackio"

    def __init__(self, run_dir: Path) -> None:
        if "trackio" not in sys.modules:
            os.environ.setdefault("TRACKIO_DIR", str(run_dir / "trackio"))
        super().__init__(run_dir)

    def start(self, config: dict[str, Any]) -> None:
        self.lib.init(project=PROJECT, name=self.run_dir.name, config=config, resume="allow")

    def log(self, step: int, metrics: dict[str, float]) -> None:
        self.lib.log(metrics, step=step)

    def alert(self, step: int, alert: dict[str, Any]) -> None:
        send = getattr(self.lib, "alert", None)
        if send is None:  # older trackio: the alert stays a logged text/point
            return
        levels = getattr(self.lib, "AlertLevel", None)
        level = None
        if levels is not None:
            level = levels.ERROR if alert.get("severity") == "critical" else levels.WARN
        send(title=f"grpokit: {alert.get('detector')}", text=alert_text(alert), **({"level": level} if level else {}))

    def close(self) -> None:
        self.lib.finish()


class Trackers:
    """The trackers of one run (from `train.report_to`).

    Libraries are imported at construction, so a missing one stops the run before it starts. Each tracker starts
    with the config on the first `config()` (a new run) or on the first row (a resumed run: the config is read
    back from `config.yaml`)."""

    def __init__(self, names: list[str], run_dir: Path) -> None:
        unknown = [n for n in names if n not in TRACKERS]
        if unknown:
            raise TrackerError(f"train.report_to: unknown tracker(s) {unknown}; use any of {', '.join(TRACKERS)}")
        self.run_dir = run_dir
        self.items = [TRACKERS[n](run_dir) for n in dict.fromkeys(names) if n in TRACKERS]
        self.started = False

    def config(self, cfg: dict[str, Any]) -> None:
        if not self.started:
            for t in self.items:
                t.start(cfg)
            self.started = True

    def _ensure_started(self) -> None:
        if not self.started:
            import yaml

            path = self.run_dir / "config.yaml"
            self.config(yaml.safe_load(path.read_text()) if path.exists() else {})

    def log(self, step: int, metrics: dict[str, Any]) -> None:
        if not self.items:
            return
        self._ensure_started()
        values = numeric(metrics)
        for t in self.items:
            t.log(step, values)

    def alert(self, row: dict[str, Any]) -> None:
        """An alert as text (and a numeric point: 1 warning, 2 critical) in every tracker."""
        if not self.items:
            return
        self._ensure_started()
        step = alert_step(row)
        level = SEVERITY_LEVEL.get(str(row.get("severity", "warning")), 1)
        for t in self.items:
            t.log(step, {mn.ALERTS_PREFIX + str(row.get("detector", "alert")): float(level)})
            t.alert(step, row)

    def close(self) -> None:
        if self.started:
            for t in self.items:
                t.close()
        self.started = False
