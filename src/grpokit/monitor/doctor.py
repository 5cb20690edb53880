"""`grpokit doctor PATH`: diagnose a finished or running training from its logs alone.

Reads the logs people have (`readers.py`: grpokit runs, TRL output directories and console logs, verl console /
JSONL logs, W&B exports, TensorBoard event directories; a folder holding several runs is diagnosed run by run, or
`--run NAME` picks one), replays every detector over the logged training steps and returns a ranked diagnosis:
what is wrong, since when, its current value, the evidence, what to change (only changes the run does not already
have and that can act in its configuration). Besides the detectors' alerts, the diagnosis states facts about the
log itself: a run that never trained, updates that did not happen, a log too short to judge a failure mode, a
sparse logging interval, generation rounds at their cap. Signals the log lacks are listed as not measurable.

Exit status of `doctor_main`: 0 nothing critical, 1 a critical failure mode or a run that never trained,
2 the input cannot be read as a training log (one line on stderr, never a traceback).
"""

from __future__ import annotations

import json
import math
import os
import re
import statistics
import sys
from pathlib import Path
from typing import Any

from .detectors import SEVERITY_RANK, Monitor, rank
from .readers import RunLog, read_runs

HEADLINE = (
    "reward/mean",
    "reward/accuracy",
    "entropy/token_mean",
    "zv/frac",
    "kl_ref/k3",
    "length/mean",
    "length/truncation_rate",
    "eval/accuracy",
)

# signals that only an RL run logs (a log with none of them is supervised fine-tuning, or not a training log)
RL_SIGNALS = (
    "reward/",
    "zv/",
    "kl_ref/",
    "entropy/",
    "actor/clipfrac",
    "actor/pg_loss",
    "actor/kl_loss",
    "actor/ppo_kl",
    "mismatch/",
    "length/",
    "critic/",
)


#: grpokit config keys named in fixes -> the same knob in the trainer that wrote the log (TRL: GRPOConfig fields,
#: checked against TRL 1.13's; verl: config paths, checked against its printed config and docs/algo/dapo.md;
#: OpenRLHF: `train_ppo_ray` arguments).
#: A key with no equivalent says so.
TRAINER_KNOBS: dict[str, dict[str, str]] = {
    "trl": {
        "algo.eps_high": "epsilon_high",
        "algo.entropy_coef": "entropy_coef (recent TRL; older GRPOTrainer has no entropy bonus)",
        "algo.soft_overlong": "mask_truncated_completions=True",
        "algo.overlong_filter": "mask_truncated_completions=True",
        "algo.kl_coef": "beta",
        "algo.reference": "sync_ref_model=True (ref_model_mixup_alpha, ref_model_sync_steps)",
        "algo.dynamic_sampling": "none in GRPOTrainer (raise num_generations, or filter prompts)",
        "algo.loss_agg": "loss_type ('dapo' or 'dr_grpo')",
        "algo.is_correction": "vllm_importance_sampling_correction=True",
        "train.lr": "learning_rate",
        "rollout.max_new_tokens": "max_completion_length",
    },
    "verl": {
        "algo.eps_high": "actor_rollout_ref.actor.clip_ratio_high",
        "algo.entropy_coef": "actor_rollout_ref.actor.entropy_coeff",
        "algo.dynamic_sampling": "algorithm.filter_groups.enable=True (DAPO recipe)",
        "algo.soft_overlong": "reward_model.overlong_buffer.enable=True (DAPO recipe)",
        "algo.kl_controller": "algorithm.kl_ctrl.type=adaptive",
        "algo.kl_coef": "actor_rollout_ref.actor.kl_loss_coef (or algorithm.kl_ctrl.kl_coef)",
        "algo.kl_placement": "actor_rollout_ref.actor.use_kl_loss=True, algorithm.use_kl_in_reward=False",
        "algo.loss_agg": "actor_rollout_ref.actor.loss_agg_mode",
        "train.lr": "actor_rollout_ref.actor.optim.lr",
        "rollout.max_new_tokens": "data.max_response_length",
    },
    # OpenRLHF's `train_ppo_ray` arguments, checked against its CLI at commit 3c3be62 (2026-08); they were renamed
    # into groups on 2026-04-19 (commit ed62d0e), and the older flat names are given too
    "openrlhf": {
        "algo.eps_high": "--actor.eps_clip_low_high LOW HIGH (before 2026-04: --eps_clip_low_high)",
        "algo.entropy_coef": "--actor.entropy_coef (before 2026-04: --entropy_loss_coef)",
        "algo.dynamic_sampling": "--algo.dynamic_filtering_enable with --algo.dynamic_filtering_range "
        "(before 2026-04: --dynamic_filtering)",
        "algo.soft_overlong": "--reward.overlong_buffer_len with --reward.overlong_penalty_factor "
        "(before 2026-04: --overlong_buffer_len)",
        "algo.kl_controller": "--algo.kl.target (adaptive KL; before 2026-04: --kl_target)",
        "algo.kl_coef": "--algo.kl.init_coef (before 2026-04: --init_kl_coef)",
        "algo.kl_placement": "--algo.kl.use_loss (before 2026-04: --use_kl_loss)",
        "algo.is_correction": "--algo.advantage.is_correction_enable (before 2026-04: --enable_vllm_is_correction)",
        "train.lr": "--actor.adam.lr (before 2026-04: --actor_learning_rate)",
        "rollout.max_new_tokens": "--rollout.max_new_tokens (before 2026-04: --generate_max_len)",
    },
}
_KEY = re.compile(r"\b(?:algo|train|rollout)\.[a-z_]+")


def _equivalents(alert: dict[str, Any], flavor: str | None) -> dict[str, str]:
    knobs = TRAINER_KNOBS.get(flavor or "")
    if not knobs:
        return {}
    keys = dict.fromkeys(_KEY.findall(alert.get("fix", "") + " " + " ".join(alert.get("actions", []))))
    return {k: knobs[k] for k in keys if k in knobs}


def _finite(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v) if math.isfinite(float(v)) else None


def _last(rows: list[dict[str, Any]], key: str) -> float | None:
    for r in reversed(rows):
        v = _finite(r.get(key))
        if v is not None:
            return v
    return None


def _present(row: dict[str, Any]) -> dict[str, Any]:
    """A row as the detectors see it in a replay: NaN means "not logged at this step" (readers fill gaps with NaN;
    grpokit writes NaN as null), so it is dropped."""
    return {k: v for k, v in row.items() if not (isinstance(v, float) and math.isnan(v))}


def _is_training_row(row: dict[str, Any]) -> bool:
    """A row with any logged signal other than held-out evaluation and timing (an eval-only row is not a step)."""
    return any(k != "step" and not k.startswith(("eval/", "time/", "perf/")) for k in row)


def _no_update(row: dict[str, Any]) -> str | None:
    """Why this step did not update the policy, if the row shows it."""
    if (_finite(row.get("train/skipped_update")) or 0) >= 1:
        return "update skipped"
    for k in ("zv/acc_frac", "zv/frac", "zv/sample_frac"):
        v = _finite(row.get(k))
        if v is not None:
            if v >= 1 - 1e-9:
                return "every group had equal rewards, so every advantage was 0"
            break
    g, loss = _finite(row.get("train/grad_norm")), _finite(row.get("actor/loss"))
    if g == 0.0 and (loss is None or loss == 0.0):
        return "zero gradient"
    return None


def _finding(kind: str, severity: str, message: str, **extra: Any) -> dict[str, Any]:
    return {"kind": kind, "severity": severity, "message": message, **extra}


def diagnose_log(log: RunLog, thresholds: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """Replay the detectors over one run's rows; returns a JSON-able diagnosis. A grpokit run's own
    `monitor.thresholds` apply unless `thresholds` is given."""
    if thresholds is None:
        mon_cfg = log.config.get("monitor") if isinstance(log.config.get("monitor"), dict) else {}
        thresholds = mon_cfg.get("thresholds") or None
    ctx = dict(log.context)
    mon = Monitor(ctx, thresholds)
    rows = [p for r in log.rows if _is_training_row(p := _present(r))]
    steps = [int(r["step"]) for r in rows]
    findings: list[dict[str, Any]] = []
    diag: dict[str, Any] = {
        "path": str(log.path),
        "run": log.name,
        "source": log.source,
        "steps": len(rows),
        "first_step": steps[0] if steps else None,
        "last_step": steps[-1] if steps else None,
        "context": ctx,
        "notes": list(log.notes),
        "findings": findings,
        "alerts": [],
        "active": [],
        "not_measurable": {},
        "last_values": {k: v for k in HEADLINE if (v := _last(log.rows, k)) is not None},
    }
    if not rows and log.rows:
        findings.append(
            _finding(
                "not_rl",
                "info",
                "not an RL run: its rows hold none of the signals grpokit maps (the log's own names: "
                + ", ".join(sorted(log.raw_names)[:8])
                + "); nothing to diagnose",
            )
        )
        diag["verdict"] = "not an RL run"
        return diag
    if not rows:
        findings.append(
            _finding(
                "no_steps",
                "critical",
                "no training step was logged: the run stopped before its first step"
                + (" (see the error below)" if any("error" in n for n in log.notes) else ""),
            )
        )
        diag["verdict"] = "never reached a training step"
        return diag
    is_rl = any(k.startswith(RL_SIGNALS) for k in log.available)
    if not is_rl:
        findings.append(
            _finding(
                "not_rl",
                "info",
                "not an RL run: these rows hold only "
                + ", ".join(sorted(log.available) or ["unmapped metrics"])
                + " (supervised fine-tuning, or a trainer whose names grpokit does not map); nothing to diagnose",
            )
        )
        diag["verdict"] = "not an RL run"
        return diag

    for r in rows:
        mon.observe(int(r["step"]), r)
    alerts = rank(mon.alerts)
    diag["alerts"] = [a.to_dict() for a in alerts]
    for a in diag["alerts"]:
        if eq := _equivalents(a, log.flavor):
            a["in_" + str(log.flavor)] = eq
    _explain_by_saturation(diag["alerts"])
    diag["active"] = mon.active()
    diag["not_measurable"] = mon.not_measurable(log.available)

    # --- facts about the log itself
    diffs = [b - a for a, b in zip(steps, steps[1:]) if b > a]
    interval = int(statistics.median(diffs)) if diffs else 1
    span = steps[-1] - steps[0] + interval if steps else 0
    diag["logging_interval"] = interval
    if interval > 1:
        findings.append(
            _finding(
                "logging_interval",
                "info",
                f"logging interval is {interval} steps: detection latency is at least {interval} steps",
                interval=interval,
            )
        )
    reasons = [why for r in rows if (why := _no_update(r))]
    if reasons:
        k, n = len(reasons), len(rows)
        common = max(set(reasons), key=reasons.count)
        if k == n:
            findings.append(
                _finding(
                    "never_trained",
                    "critical",
                    f"this run never trained: no update happened in any of its {n} logged steps ({common})",
                    no_update=k,
                    of=n,
                )
            )
        else:
            findings.append(
                _finding(
                    "no_update",
                    "warning" if k / n >= 0.5 else "info",
                    f"no update happened in {k} of {n} logged steps (mostly: {common})",
                    no_update=k,
                    of=n,
                )
            )
    cap = ctx.get("max_gen_rounds")
    rounds = [_finite(r.get("sampling/rounds")) for r in rows]
    if isinstance(cap, (int, float)) and cap > 1 and any(v is not None for v in rounds):
        hit = sum(1 for v in rounds if v is not None and v >= cap)
        if hit:
            findings.append(
                _finding(
                    "generation_cap",
                    "warning" if hit / len(rows) >= 0.5 else "info",
                    f"{hit} of {len(rows)} steps hit the generation-round cap (algo.max_gen_rounds={int(cap)}): "
                    "dynamic sampling could not fill the batch with mixed groups",
                    hit=hit,
                    of=len(rows),
                )
            )
    fired = {a.detector for a in alerts}
    for d in mon.detectors:
        if d.name in diag["not_measurable"] or d.name in fired:
            continue
        if span < d.min_steps:
            findings.append(
                _finding(
                    "too_few_steps",
                    "info",
                    f"too few steps to judge {d.mode} (needs {d.min_steps} steps, the log covers {span})",
                    detector=d.name,
                    needs=d.min_steps,
                    covers=span,
                )
            )
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


def _verdict(diag: dict[str, Any]) -> str:
    kinds = {f["kind"] for f in diag["findings"]}
    if "never_trained" in kinds:
        return "never trained"
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
    if diag["alerts"]:
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


def _fmt(v: Any) -> str:
    return f"{v:.3g}" if isinstance(v, float) else str(v)


def render(diag: dict[str, Any]) -> str:
    """A short, ranked, human-readable diagnosis of one run."""
    name = f" [{diag['run']}]" if diag.get("run") else ""
    span = ""
    if diag.get("first_step") is not None:
        every = diag.get("logging_interval") or 1
        span = f", steps {diag['first_step']}..{diag['last_step']}" + (f" every {every}" if every > 1 else "")
    out = [f"{diag['path']}{name}: {diag['source']} log, {diag['steps']} steps{span}"]
    for note in diag.get("notes", []):
        out.append(f"  note: {note}")
    if diag["last_values"]:
        out.append("  now: " + ", ".join(f"{k} {v:.3g}" for k, v in diag["last_values"].items()))
    out.append(f"  verdict: {diag.get('verdict', '')}")
    for f in sorted(diag.get("findings", []), key=lambda f: SEVERITY_RANK.get(f["severity"], 9)):
        out.append(f"  - {f['severity'].upper()} {f['message']}")
    if not diag["alerts"] and diag.get("verdict") not in ("never trained", "not an RL run"):
        out.append("No failure mode detected." if diag["steps"] else "")
    for i, a in enumerate(diag["alerts"], 1):
        if a["mode"] in diag["active"] and a.get("cleared_at") is None:
            state = " (still active)"
        elif a.get("cleared_at") is not None:
            state = f" (cleared at step {a['cleared_at']})"
        else:
            state = ""
        head = f"{i}. {a['severity'].upper()} {a['mode']}{state}: since step {a['step']}"
        out.append(f"{head} (confirmed at step {a['fired_at']})")
        out.append(f"   what: {a['message']}")
        out.append("   evidence: " + ", ".join(f"{k}={_fmt(v)}" for k, v in a["evidence"].items()))
        cur = a.get("current")
        if cur and cur.get("step") != a["fired_at"]:
            out.append(f"   now (step {cur['step']}): {cur['message']}")
        for e in a.get("escalations", []):
            if "to" in e:
                out.append(f"   escalated: {e['from']} -> {e['to']} at step {e['step']}")
            else:
                out.append(f"   became: {e['mode']} at step {e['step']}")
        if a.get("explained_by"):
            out.append(f"   explained by: {a['explained_by']}")
        out.append(f"   change: {a['fix']}")
        for trainer in TRAINER_KNOBS:
            if eq := a.get(f"in_{trainer}"):
                out.append(
                    f"   in {'TRL' if trainer == 'trl' else trainer}: "
                    + "; ".join(f"{k} -> {v}" for k, v in eq.items())
                )
    if diag["not_measurable"]:
        out.append("Not measurable from this log (signals it does not record):")
        for det, miss in diag["not_measurable"].items():
            out.append(f"  - {det}: needs {', '.join(miss)}")
    return "\n".join(line for line in out if line != "")


def _exit_code(diags: list[dict[str, Any]]) -> int:
    for d in diags:
        if any(a["severity"] == "critical" and not a.get("explained_by") for a in d["alerts"]):
            return 1
        if any(f["severity"] == "critical" for f in d.get("findings", [])):
            return 1
    return 0


def doctor_main(path: str, as_json: bool = False, run: str | None = None) -> int:
    """Print the diagnosis of every run under `path` (or the one named `run`); see the module docstring for the
    exit status. Unreadable input is one line on stderr (GRPOKIT_DEBUG=1 shows the traceback)."""
    try:
        diags = diagnose_all(path, run=run)
    except (ValueError, OSError, UnicodeDecodeError) as e:
        if os.environ.get("GRPOKIT_DEBUG"):
            raise
        print(f"error: {e}", file=sys.stderr)
        return 2
    except Exception as e:  # noqa: BLE001 - a corrupt file of a supported kind must not print a traceback
        if os.environ.get("GRPOKIT_DEBUG"):
            raise
        print(f"error: {path}: cannot read it as a training log ({type(e).__name__}: {e})", file=sys.stderr)
        return 2
    if as_json:
        payload: Any = diags[0] if len(diags) == 1 else {"path": str(path), "runs": diags}
        print(json.dumps(payload, indent=1, default=str))
    else:
        if len(diags) > 1:
            print(f"{path}: {len(diags)} runs, each diagnosed on its own (pick one with --run NAME)\n")
        print("\n\n".join(render(d) for d in diags))
    return _exit_code(diags)
