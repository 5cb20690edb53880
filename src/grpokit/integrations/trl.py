"""grpokit's diagnosis live inside a TRL `GRPOTrainer`: one line to add, alerts while the run trains.

    from grpokit.integrations.trl import HealthCallback

    trainer = GRPOTrainer(..., callbacks=[HealthCallback(stop_on="critical")])

At each TRL log (`on_log`) the callback maps TRL's metric names to grpokit's (the doctor's own table), feeds the row
to grpokit's detectors at `state.global_step` (so their windows are in training steps whatever `logging_steps` is),
and for each alert that starts, escalates or clears it

* prints one block: what happened, the evidence, the fix in TRL's own `GRPOConfig` names (read from the run's
  config: `beta`, `epsilon`, `epsilon_high`, `loss_type`, `num_generations`, `scale_rewards`, PEFT or not, vLLM),
  and, where TRL logs completions (`log_completions=True`), a few of the latest completions as evidence;
* appends it to `<output_dir>/grpokit_alerts.jsonl` (never through a link planted there: `common/no_follow.py`);
* shows it where TRL's `report_to` trackers show runs: a `grpokit/alerts_active` scalar and the alert as text in
  TensorBoard, `wandb.alert` + the run summary in W&B, a tag and a text artifact in MLflow;
* posts it to `notify` (a Slack/Discord incoming webhook URL; `grpokit.monitor.notify`);
* with `stop_on="critical"` (or `"warning"`), asks the Trainer to save a checkpoint and stop cleanly (a forecast,
  a warning about a failure still ahead, never stops the run);
* with `autopilot=True`, applies the alert's actions TRL can take mid-run (learning rate, `beta`, sampling
  temperature, `epsilon_high`, `entropy_coef`; `grpokit.integrations.trl_autopilot`) and refuses the others in one
  line each, logging every one to `<output_dir>/grpokit_interventions.jsonl`. `actions={"kl_drift":
  ["algo.kl_coef*=2"]}` replaces a detector's own actions (most name switches TRL reads only when it is built).

Forecasts (`grpokit.monitor.detectors.forecast`) are detectors like the others: they print as a forecast block with
their trend. A row whose `state.global_step` is not a step number is skipped, counted and said once."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from ..common.no_follow import PlantedLink, append_text
from ..common.safe_text import safe_text
from ..monitor.detectors import DETECTORS, SEVERITY_RANK, Alert, Monitor
from ..monitor.detectors.forecast import Trend
from ..monitor.doctor.knobs import equivalents
from ..monitor.notify import Notifier
from ..monitor.readers.canonical import canonical_row
from ..monitor.readers.values import step_number
from ..training.autopilot import Bounds, truncate_rows_after
from .step_watchdog import StepWatchdog
from .trl_autopilot import TrlAutopilot, check_actions, find_trainer

STOP_LEVELS = ("critical", "warning")


def trl_context(args: Any, model: Any = None) -> dict[str, Any]:
    """What grpokit's detectors need to know about a TRL run, from its `GRPOConfig` (and the model, for PEFT)."""
    get = lambda name, default=None: getattr(args, name, default)  # noqa: E731
    eps = float(get("epsilon", 0.2))
    eps_high = get("epsilon_high")
    grad_acc = int(get("gradient_accumulation_steps", 1) or 1)
    steps_per_gen = int(get("steps_per_generation", None) or grad_acc)
    use_vllm = bool(get("use_vllm", False))
    return {
        "flavor": "trl",
        "dynamic_sampling": False,
        "policy_loss": "ppo_clip",
        "eps_low": eps,
        "eps_high": float(eps_high) if eps_high is not None else eps,
        "epochs": int(get("num_iterations", 1) or 1),
        "mini_batches": max(1, steps_per_gen // grad_acc),
        "is_correction": "token_truncate" if use_vllm and get("vllm_importance_sampling_correction", False) else None,
        "entropy_coef": float(get("entropy_coef", 0.0) or 0.0) if hasattr(args, "entropy_coef") else 0.0,
        "temperature": float(get("temperature", 1.0)),
        "kl_coef": float(get("beta", 0.0)),
        "loss_type": get("loss_type"),
        "num_generations": get("num_generations"),
        "scale_rewards": get("scale_rewards"),
        "peft": bool(model is not None and hasattr(model, "peft_config")),
        "use_vllm": use_vllm,
        "vllm_mode": get("vllm_mode") if use_vllm else None,
        "soft_overlong": bool(get("mask_truncated_completions", False)),
        "recipe": f"trl GRPOTrainer (loss_type={get('loss_type')})",
    }


def latest_completions(output_dir: str | Path, n: int = 3) -> list[dict[str, Any]]:
    """The last `n` completions TRL wrote (`log_completions=True`: `completions/completions_<step>.parquet`)."""
    files = sorted(Path(output_dir).glob("completions/completions_*.parquet"))
    if not files:
        return []
    try:
        import pandas as pd

        df = pd.read_parquet(files[-1])
    except Exception:  # noqa: BLE001 - evidence is optional; a file being written is skipped
        return []
    keep = [c for c in ("step", "completion", "advantage") if c in df.columns]
    rows = df[keep].tail(n).to_dict("records")
    for r in rows:
        c = r.get("completion")
        r["completion"] = str(c if isinstance(c, str) else c)[:300]
    return rows


def is_forecast(alert: dict[str, Any]) -> bool:
    """A forecast's alert: a failure ahead, fitted as a trend (`grpokit.monitor.detectors.forecast`)."""
    name = alert.get("detector")
    cls = DETECTORS.get(name) if name in DETECTORS else None  # the step watchdog's stall is no registered detector
    return isinstance(cls, type) and issubclass(cls, Trend)


def trend_line(ev: dict[str, Any]) -> str:
    """A forecast's evidence in words: the fitted line, its window and fit, where it is now and when it crosses."""
    first, last = ev.get("fit_window", ["?", "?"])
    return (
        f"  trend: {ev.get('signal')} slope {ev.get('slope_per_step')}/step fitted over steps {first}-{last}, "
        f"R^2 {ev.get('r2')}, now {ev.get('now')}, threshold {ev.get('threshold')}, horizon ~{ev.get('horizon_steps')} "
        "steps"
    )


def block(alert: dict[str, Any], event: str) -> str:
    """The printed text of one alert event, with TRL's names for the fix."""
    sev = alert["severity"].upper() if alert["severity"] == "critical" else alert["severity"]
    if event == "cleared":
        return f"[grpokit] {alert['mode']} cleared at step {alert['cleared_at']}"
    if is_forecast(alert):
        lines = [f"[grpokit] FORECAST ({sev}): {alert['mode']} (step {alert['fired_at']})", f"  {alert['message']}"]
        lines.append(trend_line(alert["evidence"]))
    else:
        lines = [f"[grpokit] {sev}: {alert['mode']} (step {alert['step']}, confirmed at {alert['fired_at']})"]
        lines.append(f"  {alert['message']}")
        lines.append("  evidence: " + ", ".join(f"{k}={v}" for k, v in alert["evidence"].items()))
    lines.append(f"  fix: {alert['fix']}")
    if alert.get("in_trl"):
        lines.append("  in TRL: " + "; ".join(f"{k} -> {v}" for k, v in alert["in_trl"].items()))
    for c in alert.get("completions", []):
        lines.append(f"  sample (step {c.get('step')}): {c.get('completion')!r}")
    return "\n".join(lines)


def intervention_block(step: int, alert: dict[str, Any], rows: list[dict[str, Any]]) -> str:
    """The printed text of the autopilot's answer to one alert: one line per action, applied or refused."""
    lines = [f"[grpokit] autopilot at step {step}, on {alert['mode']} ({alert['severity']}):"]
    for r in rows:
        if r["kind"] == "intervention":
            lines.append(f"  applied {r['action']}: {r['trl']} {r['before']:g} -> {r['after']:g} ({r['note']})")
        else:
            lines.append(f"  refused {r['action']}: {r['why']}; for the next run, in GRPOConfig: {r['next_run']}")
    return "\n".join(lines)


class HealthCallback(TrainerCallback):
    """grpokit's detectors on a TRL `GRPOTrainer`'s logged metrics, live. See the module docstring.

    `autopilot=True` needs the trainer: it is found when training begins (the trainer that calls this callback),
    or given by `health.bind(trainer)`. `bounds` (`grpokit.training.autopilot.Bounds`) limits what it changes."""

    def __init__(
        self,
        stop_on: str | None = None,
        notify: str | None = None,
        thresholds: dict[str, dict[str, Any]] | None = None,
        out: Any = None,
        autopilot: bool = False,
        actions: dict[str, list[str]] | None = None,
        bounds: Bounds | None = None,
    ) -> None:
        if stop_on is not None and stop_on not in STOP_LEVELS:
            raise ValueError(f"HealthCallback(stop_on={stop_on!r}): use one of {STOP_LEVELS} or None")
        if actions and not autopilot:
            raise ValueError("HealthCallback(actions=...) without autopilot=True: nothing would apply them; add it")
        check_actions(actions or {}, DETECTORS)
        self.autopilot_on, self.actions, self.bounds = autopilot, dict(actions or {}), bounds
        self.autopilot: TrlAutopilot | None = None
        self.trainer: Any = None
        self.interventions: list[dict[str, Any]] = []
        self.stop_on = stop_on
        self.notifier = Notifier(notify) if notify else None
        self.thresholds = thresholds or {}
        self.out = out if out is not None else sys.stdout
        self.monitor: Monitor | None = None
        self.context: dict[str, Any] = {}
        self.events: list[tuple[str, dict[str, Any]]] = []  # (event, alert dict) in the order they happened
        self.stopped_at: int | None = None
        self._state: dict[int, tuple[str, int | None]] = {}
        self.main = True  # the world's main process (prints, writes files, posts)
        self.watchdog: StepWatchdog | None = None  # a stall: no on_step_end within k x the median step time
        self.skipped_rows = 0  # log rows whose state.global_step was not a step number
        self.refused_links: set[str] = set()  # output files found to be links grpokit did not make

    # ------------------------------------------------------------------------------------- Trainer events

    def bind(self, trainer: Any) -> HealthCallback:
        """The trainer the autopilot changes (found by itself when training begins); returns the callback."""
        self.trainer = trainer
        if self.autopilot is not None:
            self.autopilot.trainer = trainer
        return self

    def on_train_begin(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
        self.context = trl_context(args, model)
        self.monitor = Monitor(self.context, self.thresholds)
        self.output_dir = Path(args.output_dir)
        self.main = bool(getattr(state, "is_world_process_zero", True))
        if self.autopilot_on:
            self.autopilot = TrlAutopilot(args, self.bounds, self.actions)
            self.autopilot.trainer = self.trainer if self.trainer is not None else find_trainer(self)
            self.autopilot.see(kwargs.get("optimizer"), kwargs.get("lr_scheduler"))
            if int(getattr(state, "global_step", 0) or 0) > 0:  # transformers has loaded the checkpoint by now
                self._resume(int(state.global_step))
        self.report_to = list(getattr(args, "report_to", None) or [])
        # beside TRL's own TensorBoard run (transformers: $TENSORBOARD_LOGGING_DIR, else <output_dir>/runs/<stamp>)
        tb_root = os.getenv("TENSORBOARD_LOGGING_DIR") or os.path.join(args.output_dir, "runs")
        self.logging_dir = os.path.join(tb_root, "grpokit")
        self.watchdog = StepWatchdog(lambda a: self._emit("stall", a, a["step"])).start()

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        step = step_number(getattr(state, "global_step", None))
        if self.watchdog is not None and step is not None:
            self.watchdog.step_end(step)

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        # Every process judges the same rows (TRL logs metrics gathered over all of them) and so changes its own
        # optimizer and trainer alike, and stops at the same step; only the main one prints, writes and posts.
        if self.monitor is None or not logs:
            return
        step = step_number(getattr(state, "global_step", None))
        if step is None:  # not a step number: the row is skipped, counted, and said once
            self.skipped_rows += 1
            if self.skipped_rows == 1:
                bad = safe_text(repr(getattr(state, "global_step", None)), limit=80)
                print(f"[grpokit] a log row with state.global_step={bad} is skipped (not a step)", file=self.out)
            return
        if self.watchdog is not None:  # TRL logs no phase inside a step: the next one's generation, reward or update
            self.watchdog.saw(f"the log of step {step} (then step {step + 1} began)")
        if any(k.startswith("eval_") for k in logs) or "train_runtime" in logs:
            return  # evaluation and end-of-training summaries are not training steps
        self.main = bool(getattr(state, "is_world_process_zero", True))
        self.monitor.observe(step, canonical_row("trl", step, logs))
        changed = self._changes()
        for event, alert in changed:
            self._emit(event, alert, step)
        if self.notifier is not None and changed and self.main:
            self.notifier.update(self.monitor.alerts)
        if self.autopilot is not None:
            self.autopilot.see(kwargs.get("optimizer"), kwargs.get("lr_scheduler"))
            for alert in [a for e, a in changed if e == "onset"]:
                self._intervene(step, alert)
        worst = [a for e, a in changed if e != "cleared" and self._stops(a["severity"]) and not is_forecast(a)]
        if worst and self.stopped_at is None:
            self.stopped_at = step
            control.should_save = True
            control.should_training_stop = True
            if not self.main:
                return
            print(
                f"[grpokit] stopping at step {step} on {worst[0]['severity']} {worst[0]['mode']} "
                f"(stop_on={self.stop_on!r}); a checkpoint is saved in {args.output_dir}",
                file=self.out,
                flush=True,
            )

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.watchdog is not None:
            self.watchdog.stop()
        if self.notifier is not None:
            self.notifier.close()

    # ------------------------------------------------------------------------------------------- helpers

    def _stops(self, severity: str) -> bool:
        return self.stop_on is not None and SEVERITY_RANK[severity] <= SEVERITY_RANK[self.stop_on]

    def _changes(self) -> list[tuple[str, dict[str, Any]]]:
        """(event, alert dict) for alerts that started, escalated or cleared since the last call."""
        assert self.monitor is not None
        out = []
        for alert in self.monitor.alerts:
            state = (alert.severity, alert.cleared_at)
            before = self._state.get(id(alert))
            if before == state:
                continue
            self._state[id(alert)] = state
            if before is None:
                event = "onset"
            elif alert.cleared_at is not None and before[1] is None:
                event = "cleared"
            else:
                event = "escalated"
            out.append((event, self._describe(alert)))
        return out

    def _describe(self, alert: Alert) -> dict[str, Any]:
        a = alert.to_dict()
        if eq := equivalents(a, "trl", self.context):
            a["in_trl"] = eq
        if self.main and (completions := latest_completions(self.output_dir)):
            a["completions"] = completions
        return a

    def _intervene(self, step: int, alert: dict[str, Any]) -> None:
        """The autopilot's answer to an alert that just started: applied and refused actions, printed and logged;
        the detectors' context then holds the values now in force."""
        assert self.autopilot is not None
        rows = self.autopilot.react(step, alert)
        self.interventions.extend(rows)
        if rows and self.main:
            block_text = intervention_block(step, alert, rows)
            print(safe_text(block_text, limit=None, multiline=True), file=self.out, flush=True)
            self._append("grpokit_interventions.jsonl", "".join(json.dumps(r, default=str) + "\n" for r in rows))
        self._mirror(rows)

    def _mirror(self, rows: list[dict[str, Any]]) -> None:
        """The detectors' context (`trl_context` names) holds the values the interventions put in force."""
        mirrors = {
            "algo.kl_coef": "kl_coef",
            "rollout.temperature": "temperature",
            "algo.eps_high": "eps_high",
            "algo.entropy_coef": "entropy_coef",
        }
        for r in rows:
            if r["kind"] == "intervention" and r["key"] in mirrors:
                self.context[mirrors[r["key"]]] = r["after"]

    def _resume(self, step: int) -> None:
        """A run resumed at `step`: the interventions logged after it are dropped (those steps run again), the
        ones before it are made again (`TrlAutopilot.restore`) and count against the budget."""
        assert self.autopilot is not None
        path = self.output_dir / "grpokit_interventions.jsonl"
        if not path.exists():
            return
        if self.main:
            truncate_rows_after(path, step)
        rows = []
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                r = json.loads(line)
            except json.JSONDecodeError:
                continue  # a torn last line
            if r.get("kind") == "intervention" and int(r.get("step", 0)) <= step:
                rows.append(r)
        done = self.autopilot.restore(rows)
        self.interventions.extend(rows)
        self._mirror(rows)
        if self.main and rows:
            said = ", ".join(done) if done else "the learning rate is in the checkpoint"
            print(
                f"[grpokit] autopilot resumed at step {step}: {len(rows)} earlier intervention(s); {said}",
                file=self.out,
                flush=True,
            )

    def _emit(self, event: str, alert: dict[str, Any], step: int) -> None:
        self.events.append((event, alert))
        if not self.main:
            return
        print(safe_text(block(alert, event), limit=None, multiline=True), file=self.out, flush=True)  # TRL's text
        self.output_dir.mkdir(parents=True, exist_ok=True)
        self._append("grpokit_alerts.jsonl", json.dumps({"event": event, "at_step": step, **alert}, default=str) + "\n")
        self._to_trackers(event, alert, step)

    def _append(self, name: str, text: str) -> None:
        """Append to output_dir/name, never through a link planted there (said once, nothing written)."""
        try:
            append_text(self.output_dir / name, text)
        except PlantedLink as e:
            if name not in self.refused_links:
                self.refused_links.add(name)
                print(f"[grpokit] {safe_text(str(e), limit=300)}", file=self.out, flush=True)

    def _to_trackers(self, event: str, alert: dict[str, Any], step: int) -> None:
        """Where TRL's `report_to` trackers show the run: TensorBoard, W&B, MLflow (each only when in use)."""
        assert self.monitor is not None
        text = block(alert, event)
        active = float(len(self.monitor.active()))
        if "tensorboard" in self.report_to and self.logging_dir:
            from torch.utils.tensorboard import SummaryWriter

            with SummaryWriter(log_dir=str(self.logging_dir)) as w:
                w.add_scalar("grpokit/alerts_active", active, step)
                w.add_text(f"grpokit/{alert['detector']}", text.replace("\n", "  \n"), step)
        if "wandb" in self.report_to:
            try:
                import wandb

                if wandb.run is not None:
                    wandb.run.summary[f"grpokit/{alert['detector']}"] = f"{event}: {alert['message']}"
                    if event != "cleared":
                        level = wandb.AlertLevel.ERROR if alert["severity"] == "critical" else wandb.AlertLevel.WARN
                        wandb.alert(title=f"grpokit: {alert['mode']}", text=text, level=level)
            except Exception:  # noqa: BLE001 - a tracker hiccup must not stop training
                pass
        if "mlflow" in self.report_to:
            try:
                import mlflow

                if mlflow.active_run() is not None:
                    mlflow.set_tag(f"grpokit.{alert['detector']}", f"{event}: {alert['severity']}")
                    mlflow.log_text(text, f"grpokit/alert_{step:06d}_{alert['detector']}.txt")
            except Exception:  # noqa: BLE001
                pass
