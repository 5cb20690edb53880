"""The run summary block at the top of `grpokit report`: model, recipe, key hyper-parameters, the precision and
device the run actually used (run.json), wall time, held-out accuracy start -> end, steps without an update."""

from __future__ import annotations

import statistics
from typing import Any

from ... import metric_names as M
from ..rundata import RunData, finite

# (config key, label): the settings an engineer compares first; absent keys are left out
KEY_HPARAMS: tuple[tuple[str, str], ...] = (
    ("rollout.group_size", "G"),
    ("rollout.prompts_per_step", "prompts/step"),
    ("rollout.max_new_tokens", "max_new_tokens"),
    ("rollout.temperature", "temperature"),
    ("algo.advantage", "advantage"),
    ("algo.policy_loss", "policy loss"),
    ("algo.loss_agg", "loss aggregation"),
    ("algo.eps_low", "eps_low"),
    ("algo.eps_high", "eps_high"),
    ("algo.kl_coef", "kl_coef"),
    ("algo.reference", "reference"),
    ("algo.entropy_coef", "entropy_coef"),
    ("algo.group_filter", "group filter"),
    ("algo.max_gen_rounds", "max_gen_rounds"),
    ("train.lr", "lr"),
    ("train.lr_schedule", "lr schedule"),
    ("train.max_grad_norm", "max_grad_norm"),
    ("train.ppo_epochs", "PPO epochs"),
    ("train.mini_batches", "mini-batches"),
    ("train.micro_batch_size", "micro-batch"),
    ("train.seed", "seed"),
)


def duration(seconds: float) -> str:
    """`3 h 02 min`, `12 min 05 s` or `41.3 s`."""
    s = int(round(seconds))
    if s >= 3600:
        return f"{s // 3600} h {s % 3600 // 60:02d} min"
    if s >= 60:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{seconds:.1f} s"


def _hparams(run: RunData) -> str:
    parts = [f"{label} {run.cfg(key)}" for key, label in KEY_HPARAMS if run.cfg(key) is not None]
    return ", ".join(parts) if parts else "not in this log"


def _precision_device(run: RunData) -> str:
    info = run.info
    prec, dev = info.get("precision"), info.get("device")
    if not prec and not dev:
        asked = run.cfg("model.precision")
        return "not recorded by this log" + (f" (config asked for {asked})" if asked else "")
    text = f"{prec or 'not recorded'} on {dev or 'a device not recorded'}"
    if info.get("precision_from") == "checkpoint":
        text += " (precision from the last checkpoint; the run predates run.json)"
    elif info.get("torch_threads"):
        text += f", {info['torch_threads']} torch threads"
    asked = run.cfg("model.precision")
    if asked and asked != prec:
        text += f" (config asked for {asked})"
    return text


def _wall_time(run: RunData) -> str:
    wall = finite(run.info.get("wall_s"))
    segments = run.info.get("segments") or []
    if wall is not None:
        extra = f" in {len(segments)} sessions (resumed)" if len(segments) > 1 else ""
        return duration(wall) + extra
    logged = (run.total(M.TIME_STEP) or 0.0) + (run.total(M.TIME_EVAL) or 0.0)
    if logged:
        return f"about {duration(logged)} (sum of logged step and eval times; no run.json)"
    return "not recorded by this log"


def _held_out(run: RunData) -> str:
    xs, ys = run.series(M.EVAL_ACCURACY)
    pts = [(int(x), y) for x, y in zip(xs, ys) if y == y]
    if not pts:
        return "not evaluated"
    (s0, a0), (s1, a1) = pts[0], pts[-1]
    if len(pts) == 1:
        return f"{a0:.1%} (step {s0}, one evaluation)"
    return f"{a0:.1%} (step {s0}) -> {a1:.1%} (step {s1}), {a1 - a0:+.1%}"


def _skipped(run: RunData) -> str:
    skipped, n = run.skipped_steps(), len(run.training_rows)
    if not skipped:
        return f"0 of {n}"
    listed = ", ".join(map(str, skipped[:12])) + (", ..." if len(skipped) > 12 else "")
    return f"{len(skipped)} of {n} (steps {listed}): every group had equal rewards, no gradient step"


def _median(run: RunData, key: str) -> float | None:
    vals = [v for r in run.training_rows if (v := finite(r.get(key))) is not None]
    return statistics.median(vals) if vals else None


def _throughput(run: RunData) -> str:
    sps, tps = _median(run, M.TIME_STEP), _median(run, M.PERF_TOKENS_PER_S)
    if sps is None:
        return "not logged"
    return f"median {sps:.1f} s/step" + (f", {tps:.0f} tokens/s" if tps is not None else "")


def _generated(run: RunData) -> str:
    toks, samples = run.total(M.PERF_GEN_TOKENS), run.total(M.REWARD_SAMPLED_N)
    if toks is None and samples is None:
        return "not logged"
    return ", ".join(
        p for p in (f"{samples:,.0f} samples" if samples else "", f"{toks:,.0f} tokens" if toks else "") if p
    )


def _alerts(alerts: list[dict[str, Any]]) -> str:
    if not alerts:
        return "none"
    counts: dict[str, int] = {}
    for a in alerts:
        counts[a.get("severity", "?")] = counts.get(a.get("severity", "?"), 0) + 1
    return ", ".join(f"{n} {sev}" for sev, n in counts.items()) + " (A1... on the charts)"


def summary_fields(run: RunData, alerts: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(label, value) rows of the summary block, in display order."""
    model = str(run.cfg("model.name", run.info.get("model", "not in this log")))
    if run.cfg("model.lora_r"):
        model += f" (LoRA r={run.cfg('model.lora_r')})"
    if run.info.get("parameters"):
        model += f", {run.info['parameters'] / 1e6:.0f}M parameters"
    planned = run.cfg("train.steps")
    steps = f"{len(run.training_rows)}" + (f" of {planned} planned" if planned is not None else "")
    return [
        ("model", model),
        ("recipe", f"{run.cfg('recipe', 'not in this log')} on task {run.cfg('data.task', '?')}"),
        ("key hyper-parameters", _hparams(run)),
        ("precision and device used", _precision_device(run)),
        ("wall time", _wall_time(run)),
        ("training steps", steps),
        ("held-out accuracy", _held_out(run)),
        ("steps without update", _skipped(run)),
        ("generated", _generated(run)),
        ("speed", _throughput(run)),
        ("alerts", _alerts(alerts)),
    ]
