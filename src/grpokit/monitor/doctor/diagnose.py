"""Diagnosing a run: replay every detector over its logged training steps, add the facts about the log, mark
alerts the run's saturation explains, and give a verdict."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ... import metric_names as mn
from ...run.directory import run_end
from ..detectors import SEVERITY_RANK, Monitor, rank
from ..detectors.system_memory import oom_findings
from ..detectors.system_time import TIME_VERDICTS
from ..readers import RunLog, read_runs
from ..readers.episodes import run_episode_examples
from . import facts
from .knobs import equivalents

HEADLINE = (
    mn.REWARD_MEAN,
    mn.REWARD_ACCURACY,
    mn.ENTROPY_TOKEN_MEAN,
    mn.ZV_FRAC,
    mn.KL_REF_K3,
    mn.LENGTH_MEAN,
    mn.LENGTH_TRUNCATION_RATE,
    mn.EVAL_ACCURACY,
)


def _new_diagnosis(log: RunLog, rows: list[dict[str, Any]], ctx: dict[str, Any]) -> dict[str, Any]:
    steps = [int(r["step"]) for r in rows]
    return {
        "path": str(log.path),
        "run": log.name,
        "source": log.source,
        "steps": len(rows),
        "first_step": steps[0] if steps else None,
        "last_step": steps[-1] if steps else None,
        "context": ctx,
        "notes": list(log.notes),
        "findings": [],
        "alerts": [],
        "active": [],
        "not_measurable": {},
        "last_values": {k: v for k in HEADLINE if (v := facts.last_value(log.rows, k)) is not None},
        "outcome": _outcome(log),
    }


def _outcome(log: RunLog) -> dict[str, Any] | None:
    """How a grpokit run ended (completed, interrupted, diverged, error with its message), from its run directory."""
    if log.source != "grpokit":
        return None
    return run_end(log.path if log.path.is_dir() else log.path.parent)


def _episode_context(log: RunLog) -> dict[str, Any]:
    """`episode_examples` for the detectors' evidence: excerpts of failing episodes from a grpokit run's
    completions.jsonl (agent mode); empty for other logs, runs without episodes and an unreadable file."""
    if log.source != "grpokit":
        return {}
    try:
        examples = run_episode_examples(log.path if log.path.is_dir() else log.path.parent)
    except (OSError, UnicodeDecodeError):
        return {}
    return {"episode_examples": examples} if examples else {}


def _replay(mon: Monitor, rows: list[dict[str, Any]], log: RunLog, diag: dict[str, Any]) -> set[str]:
    """Feed every row to the detectors; fill the diagnosis' alerts (with the trainer's own knobs), active modes and
    unmeasurable detectors. Returns the names of the detectors that fired."""
    for r in rows:
        mon.observe(int(r["step"]), r)
    alerts = rank(mon.alerts)
    diag["alerts"] = [a.to_dict() for a in alerts]
    for a in diag["alerts"]:
        if eq := equivalents(a, log.flavor, log.context):
            a["in_" + str(log.flavor)] = eq
    _explain_by_saturation(diag["alerts"])
    diag["alerts"] = ranked(diag["alerts"])
    diag["active"] = mon.active()
    diag["not_measurable"] = mon.not_measurable(log.available)
    return {a.detector for a in alerts}


def diagnose_log(log: RunLog, thresholds: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """Replay the detectors over one run's rows; returns a JSON-able diagnosis. A grpokit run's own
    `monitor.thresholds` apply unless `thresholds` is given."""
    if thresholds is None:
        mon_cfg = log.config.get("monitor") if isinstance(log.config.get("monitor"), dict) else {}
        thresholds = mon_cfg.get("thresholds") or None
    ctx = dict(log.context)
    mon = Monitor({**ctx, **_episode_context(log)}, thresholds)
    rows = [p for r in log.rows if facts.is_training_row(p := facts.present(r))]
    diag = _new_diagnosis(log, rows, ctx)
    findings: list[dict[str, Any]] = diag["findings"]
    stop = facts.not_diagnosable(log, rows)
    if stop is not None:
        findings.append(stop[0])
        diag["verdict"] = stop[1]
        return diag
    fired = _replay(mon, rows, log, diag)
    interval, span = facts.logging_interval([int(r["step"]) for r in rows])
    diag["logging_interval"] = interval
    findings.extend(facts.interval_findings(interval))
    findings.extend(facts.no_update_findings(rows))
    findings.extend(facts.generation_cap_findings(rows, ctx.get("max_gen_rounds")))
    findings.extend(oom_findings(log.notes, rows))  # an OOM at the log's end, with the memory arithmetic
    skip = set(diag["not_measurable"]) | fired
    findings.extend(facts.too_few_steps_findings(mon.detectors, skip, span, log.available))
    diag["not_applicable"] = facts.not_applicable(mon.detectors, log.available)
    diag["verdict"] = _verdict(diag)
    return diag


def _explain_by_saturation(alerts: list[dict[str, Any]]) -> None:
    """Advantage collapse whose zero-variance groups are mostly all-correct, while the run is saturated, is the
    saturation itself (the model solves the prompts), not a failure of the algorithm: mark it so."""
    saturated = any(
        a["mode"] in ("converged / saturated", "convergence") and a.get("cleared_at") is None for a in alerts
    )
    if not saturated:
        return
    for a in alerts:
        if a["mode"] != "advantage collapse" or a.get("cleared_at") is not None:
            continue
        ev = (a.get("current") or {}).get("evidence") or a["evidence"]
        right, wrong = ev.get("all_correct_frac"), ev.get("all_wrong_frac")
        if isinstance(right, (int, float)) and isinstance(wrong, (int, float)) and right > wrong:
            a["explained_by"] = "converged / saturated: the zero-variance groups are all-correct"
            a["severity_logged"], a["severity"] = a["severity"], "info"  # information, not a failure


VERDICT_MEANING = {
    "never trained": "no update changed the model: see the first finding",
    "failing": "a critical failure mode is active at the end: the first alert says what and what to change",
    "converged / saturated": "the task is learned for this model: stop here, or train on harder data",
    "warnings": "training works, with warnings worth a look",
    "ended in error": "the run stopped on an error, not on a training failure mode: see the `ended` line",
}


def verdict_line(diag: dict[str, Any]) -> str:
    """The verdict and what it means, in one line (the first thing the doctor and the report say)."""
    verdict = diag.get("verdict", "")
    meaning = VERDICT_MEANING.get(verdict)
    return f"{verdict}: {meaning}" if meaning else verdict


def ranked(alerts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Alerts in reading order: failures first (most severe, then earliest), information last."""
    return sorted(alerts, key=lambda a: (SEVERITY_RANK.get(a["severity"], 9), a["step"]))


def _verdict(diag: dict[str, Any]) -> str:
    kinds = {f["kind"] for f in diag["findings"]}
    if "never_trained" in kinds:
        return "never trained"
    if (diag.get("outcome") or {}).get("status") == "error":
        return "ended in error"
    sev = [
        a["severity"]
        for a in diag["alerts"]
        if (a["mode"] in diag["active"] or a.get("cleared_at") is None) and not a.get("explained_by")
    ]
    modes = {a["mode"] for a in diag["alerts"]}
    if "critical" in sev:
        return "failing"
    if modes & {"converged / saturated", "convergence"}:
        return "converged / saturated"
    if "warning" in sev:
        return "warnings"
    if any(a["mode"] not in TIME_VERDICTS for a in diag["alerts"]):  # where the time goes is no failure mode
        return "no failure mode active at the end (earlier alerts cleared)"
    if any(f["kind"] == "too_few_steps" for f in diag["findings"]):
        return "no failure mode detected so far; the log is too short to judge some modes"
    return "no failure mode detected"


def diagnose_all(
    path: str | Path, thresholds: dict[str, dict[str, Any]] | None = None, run: str | None = None
) -> list[dict[str, Any]]:
    """One diagnosis per run under a path (never merged)."""
    diags = []
    for log in read_runs(path, run):
        if not log.rows and log.source in ("grpokit", "trl", "wandb", "tensorboard"):
            raise ValueError(f"{log.path}: no training step in this log (no row with a step and a metric)")
        diags.append(diagnose_log(log, thresholds))
    return diags


def diagnose(path: str | Path, thresholds: dict[str, dict[str, Any]] | None = None, run: str | None = None) -> dict:
    """The diagnosis of the one run at a path (ValueError naming the runs if the path holds several)."""
    diags = diagnose_all(path, thresholds, run)
    if len(diags) > 1:
        names = ", ".join(repr(d["run"]) for d in diags)
        raise ValueError(f"{path} holds {len(diags)} runs ({names}): pick one with --run NAME")
    return diags[0]
