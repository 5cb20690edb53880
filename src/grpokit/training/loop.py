"""The training loop around `Trainer.train_step`: evaluation before, every `train.eval_every` steps and after;
value pretraining first when the recipe has a critic; detectors and alerts on every row before it is logged;
autopilot; checkpoints every `train.save_every` steps and at the end; the final model."""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

from .. import metric_names as mn
from ..models import precision_reason
from ..rewards.sandbox_report import sandbox_line
from .autopilot import write_rows
from .guard import RunGuard
from .trainer import StepResult, Trainer


def fit(trainer: Trainer, display: Any = None, *, eval_before: bool = True, eval_samples: int = 1) -> dict[str, Any]:
    """Run `train.steps` steps with periodic eval and checkpoints; returns a summary (eval before/after).

    The reward worker process is closed when the run ends, also when it ends with an error.
    """
    try:
        return _fit(trainer, display, eval_before=eval_before, eval_samples=eval_samples)
    finally:
        trainer.rewards.close()
        if trainer.log is not None:
            trainer.log.end_segment(trainer.step)
            trainer.log.close()


def _fit(trainer: Trainer, display: Any, *, eval_before: bool, eval_samples: int) -> dict[str, Any]:
    cfg = trainer.cfg
    log = trainer.log
    summary: dict[str, Any] = {"run_dir": str(trainer.run_dir)}
    if log is not None and trainer.step == 0:
        log.write_config(cfg.to_dict())
    sandbox = trainer.session.sandbox_report()
    if log is not None:
        log.start_segment(trainer.step, run_info(trainer, sandbox))
    if sandbox is not None and display:
        display.message(sandbox_line(sandbox))  # what confines the user's reward and tool code, and what cannot
    hook = getattr(display, "phase", None)
    trainer.on_phase = hook
    _pretrain_critic(trainer, display)
    if eval_before and trainer.step == 0:
        summary["eval_before"] = _evaluate(trainer, display, eval_samples, before=True)
    guard = RunGuard(trainer)  # divergence and SIGINT/SIGTERM checks of each step (grpokit.training.guard)
    while trainer.step < cfg.train.steps:
        result = trainer.train_step()
        metrics = result.metrics
        trainer.step += 1
        metrics.update(guard.health())
        if cfg.train.eval_every > 0 and trainer.step % cfg.train.eval_every == 0 and trainer.step < cfg.train.steps:
            if hook:
                hook("eval")
            metrics.update(trainer.evaluate(eval_samples))
        # detectors see the row before it is written, so the row carries the alerts active at this step
        new_alerts = trainer.monitor.observe(trainer.step, metrics)
        metrics["alerts/active"] = float(len(trainer.monitor.active()))
        _log_step(trainer, result)
        trainer.history.append(metrics)
        if display:
            display.step_done(trainer.step, metrics, trainer.monitor.active())
        escalated = [a for a in getattr(trainer.monitor, "escalated", []) if a not in new_alerts]
        for alert in [*new_alerts, *escalated]:  # an escalation is logged and shown again with its new severity
            if log is not None:
                log.alert(alert.to_dict())
            if display:
                display.alert(alert)
        _autopilot_react(trainer, display, new_alerts, metrics)
        guard.after_step(new_alerts)  # a divergence stops here, before a checkpoint of the dead model
        if cfg.train.save_every > 0 and trainer.step % cfg.train.save_every == 0:
            _save(trainer, display)
        guard.after_save()  # a SIGINT/SIGTERM during the step: checkpoint it and stop
        if _stop_when_learned(trainer, guard, display, summary):
            break
    if not (cfg.train.save_every > 0 and trainer.step % cfg.train.save_every == 0):
        _save(trainer, display)  # every step done, or stopped as learned
    summary["eval_after"] = _evaluate(trainer, display, eval_samples)
    summary["final_model"] = str(_save(trainer, display, final=True))
    return summary


def _evaluate(trainer: Trainer, display: Any, eval_samples: int, *, before: bool = False) -> dict[str, Any]:
    """The held-out evaluation before training (`before`, at step 0) or at the end: logged at its step, shown."""
    if display:
        display.phase("eval")
    ev = trainer.evaluate(eval_samples)
    if trainer.log is not None:
        trainer.log.log(trainer.step, ev)
    if display:
        display.evaluated(trainer.step, ev, before=before)
    return ev


def _save(trainer: Trainer, display: Any, *, final: bool = False) -> Path:
    """A checkpoint of this step (or, `final`, the final model), reported to the display with its time."""
    if display:
        display.phase("save final model" if final else "checkpoint")
    t0 = time.perf_counter()
    path = trainer.save_final() if final else trainer.save()
    if display:
        display.checkpoint(trainer.step, path, time.perf_counter() - t0, final=final)
    return path


def _stop_when_learned(trainer: Trainer, guard: RunGuard, display: Any, summary: dict[str, Any]) -> bool:
    """With `monitor.stop_when_learned`, an alert that reads the task as learned ends the run after this step."""
    learned = guard.learned()
    if learned is None:
        return False
    summary["stopped_learned"] = {"step": trainer.step, "mode": learned.mode, "message": learned.message}
    if display:
        display.message(f"stopping at step {trainer.step}: {learned.message} (monitor.stop_when_learned)")
    return True


def _log_step(trainer: Trainer, result: StepResult) -> None:
    """The step's metrics row, its reward failures and a few sampled completions."""
    log = trainer.log
    if log is None:
        return
    if result.reward_failures:
        log.samples(
            trainer.step,
            [{"reward_failure": f.__dict__ if hasattr(f, "__dict__") else str(f)} for f in result.reward_failures[:5]],
        )
    log.log(trainer.step, result.metrics)
    b = result.batch
    k = min(trainer.cfg.train.log_completions, len(b))
    log.samples(
        trainer.step,
        [
            {
                "prompt": trainer.train_examples[b.example_index[i]].prompt,
                "answer": trainer.train_examples[b.example_index[i]].answer,
                "text": b.texts[i],
                "reward": float(b.rewards[i]),
                "accuracy": float(b.accuracy[i]),
                "length": int(b.lengths[i]),
                "truncated": bool(b.truncated[i]),
                **({"episode": b.episodes[i]} if b.episodes is not None else {}),
            }
            for i in range(k)
        ],
    )


def run_info(trainer: Trainer, sandbox: dict[str, str] | None = None) -> dict[str, Any]:
    """What this run actually uses, for run.json: device, resolved precision, threads, library versions, and the
    reward sandbox where user code runs in a worker (its line and the mechanism of each limit)."""
    import torch
    import transformers

    from ..common.version import VERSION

    n_params = sum(p.numel() for p in trainer.model.parameters())
    versions = {"grpokit": VERSION, "torch": torch.__version__, "transformers": transformers.__version__}
    if trainer.cfg.rollout.engine == "vllm":
        import vllm

        versions["vllm"] = vllm.__version__
    return {
        "model": trainer.cfg.model.name,
        "engine": trainer.cfg.rollout.engine,
        "world_size": trainer.info.world,
        "device": str(trainer.device),
        "precision": trainer.precision.name,
        "precision_reason": precision_reason(trainer.cfg.model.precision, trainer.device),
        "parameters": n_params,
        "torch_threads": torch.get_num_threads(),
        "versions": versions,
        **({"sandbox": {"line": sandbox_line(sandbox), **sandbox}} if sandbox is not None else {}),
    }


def _autopilot_react(trainer: Trainer, display: Any, alerts: list[Any], metrics: dict[str, Any]) -> None:
    if trainer.autopilot is None:
        return
    rows, changes = trainer.autopilot.react(trainer.step, alerts, metrics)
    trainer.apply_changes(changes)  # the config, its runtime mirrors and the detectors' context
    if rows and trainer.log is not None:
        write_rows(trainer.run_dir / "interventions.jsonl", rows)
    for r in rows:
        if display and r["kind"] == "intervention":
            display.message(f"autopilot: {r['action']} ({r['before']} -> {r['after']}) because {r['reason']}")
        elif display and r["kind"] == "unable":
            display.message(f"autopilot: cannot act on {r['mode']}: {r['why']}; it would need: {r['needs']}")


def _pretrain_critic(trainer: Trainer, display: Any) -> None:
    """Value pretraining rows go to metrics.jsonl at step 0, with their own `critic_pretrain/*` names."""
    if trainer.step > 0 or trainer.critic is None or trainer.critic_cfg.pretrain_max_steps <= 0:
        return
    if getattr(display, "phase", None):
        display.phase("critic pretraining")
    rows = trainer.pretrain_critic()
    for row in rows:
        if trainer.log is not None:
            trainer.log.log(0, row)
    if display and rows:
        display.message(pretrain_note(rows, trainer.critic_cfg))


def pretrain_note(rows: list[dict[str, float]], cc: Any) -> str:
    """The line that ends value pretraining: batches, the last explained variance against the target, and, where it
    stopped at the cap short of the target, why and what to change. A NaN explained variance is undefined, not bad
    (algos.explained_variance: the returns barely varied); printed as "nan" it told the user nothing."""
    ev = rows[-1][mn.CRITIC_PRETRAIN_EXPLAINED_VARIANCE]
    head = f"value pretraining: {len(rows)} batches"
    if math.isfinite(ev) and ev >= cc.pretrain_ev:
        return f"{head}, explained variance {ev:.2f} (target {cc.pretrain_ev})"
    cap = f"stopped at critic.pretrain_max_steps={cc.pretrain_max_steps} short of the target {cc.pretrain_ev}"
    if not math.isfinite(ev):
        return (
            f"{head}, explained variance undefined on the last batch: its returns barely varied (every answer "
            f"equally right or wrong), so there was nothing to explain; {cap}. Prompts the model solves sometimes "
            "give the critic something to fit (grpokit preflight filters the others)"
        )
    return f"{head}, explained variance {ev:.2f}; {cap} (raise it, or lower critic.pretrain_ev)"
