"""Facts doctor states about a log itself, besides the detectors' alerts: a run that is not RL or never reached a
step, the logging interval, updates that did not happen, generation rounds at their cap, and failure modes the
log is too short to judge."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from typing import Any

from ... import metric_names as mn
from ..detectors import Detector
from ..readers import RunLog

# signals that only an RL run logs (a log with none of them is supervised fine-tuning, or not a training log)
RL_SIGNALS = (
    mn.REWARD_PREFIX,
    mn.ZV_PREFIX,
    mn.KL_REF_PREFIX,
    mn.ENTROPY_PREFIX,
    mn.ACTOR_CLIPFRAC,
    mn.ACTOR_PG_LOSS,
    mn.ACTOR_KL_LOSS,
    mn.ACTOR_PPO_KL,
    mn.MISMATCH_PREFIX,
    mn.LENGTH_PREFIX,
    mn.CRITIC_PREFIX,
    mn.TRAIN_SKIPPED_UPDATE,  # an update skipped by an RL trainer (grpokit; SkyRL's "Skipping training step")
)


def finite_at(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v) if math.isfinite(float(v)) else None


def last_value(rows: list[dict[str, Any]], key: str) -> float | None:
    for r in reversed(rows):
        v = finite_at(r.get(key))
        if v is not None:
            return v
    return None


def present(row: dict[str, Any]) -> dict[str, Any]:
    """A row as the detectors see it in a replay: NaN means "not logged at this step" (readers fill gaps with NaN;
    grpokit writes NaN as null), so it is dropped."""
    return {k: v for k, v in row.items() if not (isinstance(v, float) and math.isnan(v))}


def is_training_row(row: dict[str, Any]) -> bool:
    """A row with any logged signal other than held-out evaluation and timing (an eval-only row is not a step)."""
    return any(k != "step" and not k.startswith((mn.EVAL_PREFIX, mn.TIME_PREFIX, mn.PERF_PREFIX)) for k in row)


def _no_update(row: dict[str, Any]) -> str | None:
    """Why this step did not update the policy, if the row shows it: an update the trainer skipped, every group of
    equal rewards (zero-variance fraction 1), a zero gradient norm with a zero (or unlogged) loss, or, in a log
    without a gradient norm, a loss and a mean reward both exactly 0."""
    if (finite_at(row.get(mn.TRAIN_SKIPPED_UPDATE)) or 0) >= 1:
        return "update skipped"
    zv = next(
        (v for k in (mn.ZV_ACC_FRAC, mn.ZV_FRAC, mn.ZV_SAMPLE_FRAC) if (v := finite_at(row.get(k))) is not None), None
    )
    if zv is not None and zv >= 1 - 1e-9:
        return "every group had equal rewards, so every advantage was 0"
    g, loss = finite_at(row.get(mn.TRAIN_GRAD_NORM)), finite_at(row.get(mn.ACTOR_LOSS))
    if g == 0.0 and (loss is None or loss == 0.0):
        return "zero gradient"
    if g is None and zv is None and loss == 0.0 and finite_at(row.get(mn.REWARD_MEAN)) == 0.0:
        # a console that prints neither a gradient norm nor a zero-variance fraction (NeMo-RL's "Training Results"):
        # a mean reward of exactly 0 with a loss of exactly 0 is no sample rewarded, every advantage 0 (a GRPO loss
        # is not 0 to the printed digits while advantages differ)
        return "loss and mean reward both exactly 0: no sample was rewarded, so every advantage was 0"
    return None


def _finding(kind: str, severity: str, message: str, **extra: Any) -> dict[str, Any]:
    return {"kind": kind, "severity": severity, "message": message, **extra}


def not_diagnosable(log: RunLog, rows: list[dict[str, Any]]) -> tuple[dict[str, Any], str] | None:
    """(finding, verdict) when there is nothing to replay: no RL signal in any row, or no training step at all."""
    if not rows and log.rows:
        msg = (
            "not an RL run: its rows hold none of the signals grpokit maps (the log's own names: "
            + ", ".join(sorted(log.raw_names)[:8])
            + "); nothing to diagnose"
        )
        return _finding("not_rl", "info", msg), "not an RL run"
    if not rows:
        msg = "no training step was logged: the run stopped before its first step" + (
            " (see the error below)" if any("error" in n for n in log.notes) else ""
        )
        return _finding("no_steps", "critical", msg), "never reached a training step"
    if not any(k.startswith(RL_SIGNALS) for k in log.available):
        msg = (
            "not an RL run: these rows hold only "
            + ", ".join(sorted(log.available) or ["unmapped metrics"])
            + " (supervised fine-tuning, or a trainer whose names grpokit does not map); nothing to diagnose"
        )
        return _finding("not_rl", "info", msg), "not an RL run"
    return None


def logging_interval(steps: list[int]) -> tuple[int, int]:
    """(median step difference, training steps the log covers)."""
    diffs = [b - a for a, b in zip(steps, steps[1:]) if b > a]
    interval = int(statistics.median(diffs)) if diffs else 1
    span = steps[-1] - steps[0] + interval if steps else 0
    return interval, span


def interval_findings(interval: int) -> list[dict[str, Any]]:
    if interval <= 1:
        return []
    msg = f"logging interval is {interval} steps: detection latency is at least {interval} steps"
    return [_finding("logging_interval", "info", msg, interval=interval)]


def no_update_findings(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Steps whose row shows no update happened: all of them (never trained) or some."""
    reasons = [why for r in rows if (why := _no_update(r))]
    if not reasons:
        return []
    k, n = len(reasons), len(rows)
    common = max(set(reasons), key=reasons.count)
    if k == n:
        msg = f"this run never trained: no update happened in any of its {n} logged steps ({common})"
        return [_finding("never_trained", "critical", msg, no_update=k, of=n)]
    msg = f"no update happened in {k} of {n} logged steps (mostly: {common})"
    return [_finding("no_update", "warning" if k / n >= 0.5 else "info", msg, no_update=k, of=n)]


def generation_cap_findings(rows: list[dict[str, Any]], cap: Any) -> list[dict[str, Any]]:
    """Steps whose dynamic sampling used every generation round allowed (`algo.max_gen_rounds`)."""
    rounds = [finite_at(r.get(mn.SAMPLING_ROUNDS)) for r in rows]
    if not (isinstance(cap, (int, float)) and cap > 1 and any(v is not None for v in rounds)):
        return []
    hit = sum(1 for v in rounds if v is not None and v >= cap)
    if not hit:
        return []
    msg = (
        f"{hit} of {len(rows)} steps hit the generation-round cap (algo.max_gen_rounds={int(cap)}): "
        "dynamic sampling could not fill the batch with mixed groups"
    )
    return [_finding("generation_cap", "warning" if hit / len(rows) >= 0.5 else "info", msg, hit=hit, of=len(rows))]


def not_applicable(detectors: Iterable[Detector], available: set[str]) -> list[str]:
    """The modes of detectors that do not apply to this log at all (the multi-turn ones on a single-turn log)."""
    return [d.mode for d in detectors if not d.applies(available)]


def too_few_steps_findings(
    detectors: Iterable[Detector], skip: set[str], span: int, available: set[str]
) -> list[dict[str, Any]]:
    """Detectors (not in `skip`: not measurable, or fired; and applying to the log) whose rule needs more steps
    than the log covers. A detector that does not apply is not "too few steps": no length of log would let it judge."""
    out = []
    for d in detectors:
        if d.name in skip or span >= d.min_steps or not d.applies(available):
            continue
        msg = f"too few steps to judge {d.mode} (needs {d.min_steps} steps, the log covers {span})"
        extra = {"detector": d.name, "mode": d.mode, "needs": d.min_steps, "covers": span}
        out.append(_finding("too_few_steps", "info", msg, **extra))
    return out
