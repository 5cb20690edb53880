"""The charts of `grpokit report`: what each one plots, its y axis with unit, its reference line, and the reason
a chart cannot move in this run (it is then drawn greyed, with the reason written on it).

A panel's `static` rule reads the run's config and rows; rules are registered per panel, never matched by name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ... import metric_names as M
from ..rundata import RunData, finite

PHASE_TIMES: tuple[tuple[str, str], ...] = (
    (M.TIME_GENERATE, "generate"),
    (M.TIME_PREFIX + "score", "score"),
    (M.TIME_PREFIX + "logprobs", "log-prob passes"),
    (M.TIME_PREFIX + "forward", "forward"),
    (M.TIME_PREFIX + "backward", "backward"),
    (M.TIME_PREFIX + "optimizer", "optimizer"),
    (M.TIME_PREFIX + "other", "other (step - phases)"),
    (M.TIME_EVAL, "held-out eval"),
)


@dataclass(frozen=True)
class Panel:
    """One chart: `series` are (metric, legend label); `kind` is line | stacked (bars stacked per step) | bars."""

    title: str
    ylabel: str
    series: tuple[tuple[str, str], ...]
    kind: str = "line"
    ref: Callable[[RunData], tuple[float, str] | None] | None = None
    static: Callable[[RunData], str | None] | None = None
    ylim: tuple[float | None, float | None] = (None, None)


def _all_zero(run: RunData, keys: tuple[str, ...]) -> bool:
    vals = [v for r in run.rows for k in keys if (v := finite(r.get(k))) is not None]
    return bool(vals) and all(abs(v) < 1e-12 for v in vals)


def clip_static(run: RunData) -> str | None:
    """One optimizer step per batch: the ratio pi/pi_old is exactly 1 at the only step, so nothing can clip."""
    keys = (M.ACTOR_CLIPFRAC_LOW, M.ACTOR_CLIPFRAC_HIGH, M.ACTOR_CLIPFRAC_DUAL, M.ACTOR_CLIPFRAC)
    epochs, minis = run.cfg("train.ppo_epochs", run.cfg("train.epochs")), run.cfg("train.mini_batches")
    if epochs == 1 and minis == 1 and (_all_zero(run, keys) or not any(k in r for r in run.rows for k in keys)):
        return (
            "cannot move: train.ppo_epochs=1 and train.mini_batches=1 give one optimizer step per batch, so the "
            "ratio pi/pi_old is exactly 1 on every token and nothing can clip (clipping acts from the 2nd "
            "mini-batch or epoch on)"
        )
    return None


def kl_static(run: RunData) -> str | None:
    ref, coef = run.cfg("algo.reference"), run.cfg("algo.kl_coef")
    if ref == "none" and not coef:
        return "cannot move: algo.reference=none and algo.kl_coef=0, so there is no reference policy to measure KL to"
    return None


def _group_filter(run: RunData) -> str | None:
    """The run's group filter (a run written before algo.group_filter existed: from algo.dynamic_sampling)."""
    old = run.cfg("algo.dynamic_sampling")
    return run.cfg("algo.group_filter", None if old is None else ("dynamic_sampling" if old else "all"))


def _filters_groups(run: RunData) -> bool:
    return _group_filter(run) in ("dynamic_sampling", "gpg")


def rounds_static(run: RunData) -> str | None:
    if _group_filter(run) == "all":
        return "cannot move: algo.group_filter=all, so every step generates exactly one round"
    return None


def entropy_ref(run: RunData) -> tuple[float, str]:
    return 0.5, "0.5 nats: collapse threshold"


def grad_clip_ref(run: RunData) -> tuple[float, str] | None:
    """The clip threshold, labelled with how many updates it actually clipped."""
    clip = finite(run.cfg("train.max_grad_norm"))
    if not clip:
        return None
    norms = [v for r in run.rows if (v := finite(r.get(M.TRAIN_GRAD_NORM))) is not None]
    over = sum(v > clip for v in norms)
    return clip, f"clip train.max_grad_norm={clip:g} (exceeded {over}/{len(norms)})"


def rounds_ref(run: RunData) -> tuple[float, str] | None:
    cap = finite(run.cfg("algo.max_gen_rounds"))
    return (cap, f"cap algo.max_gen_rounds={cap:g}") if cap and _filters_groups(run) else None


PANELS: tuple[Panel, ...] = (
    Panel(
        "Reward and accuracy",
        "reward / accuracy (fraction)",
        (
            (M.REWARD_MEAN, "reward (mean)"),
            (M.REWARD_ACCURACY, "train accuracy"),
            (M.EVAL_ACCURACY, "held-out accuracy"),
        ),
    ),
    Panel("Token entropy", "entropy (nats/token)", ((M.ENTROPY_TOKEN_MEAN, "token entropy"),), ref=entropy_ref),
    Panel(
        "KL to reference",
        "KL (nats/token)",
        (
            (M.KL_REF_K3, "k3 to reference"),
            (M.KL_REF_K1, "k1 to reference"),
            (M.ACTOR_KL_LOSS, "KL loss term"),
            (M.KL_INIT_K3, "k3 to initial model"),
        ),
        static=kl_static,
    ),
    Panel(
        "Zero-variance groups",
        "fraction of groups",
        ((M.ZV_ALL_CORRECT, "all correct"), (M.ZV_ALL_WRONG, "all wrong"), (M.ZV_FRAC, "equal reward (any)")),
        ylim=(0.0, 1.05),
    ),
    Panel(
        "Response length",
        "tokens per response",
        (
            (M.LENGTH_MEAN, "mean"),
            (M.LENGTH_CORRECT_MEAN, "correct responses"),
            (M.LENGTH_INCORRECT_MEAN, "incorrect responses"),
            (M.EVAL_LENGTH, "held-out mean"),
        ),
    ),
    Panel(
        "Clip fractions",
        "fraction of tokens clipped",
        (
            (M.ACTOR_CLIPFRAC_LOW, "low (1 - eps_low)"),
            (M.ACTOR_CLIPFRAC_HIGH, "high (1 + eps_high)"),
            (M.ACTOR_CLIPFRAC_DUAL, "dual clip"),
            (M.ACTOR_CLIPFRAC, "any"),
        ),
        static=clip_static,
    ),
    Panel(
        "Gradient norm vs its clip",
        "policy gradient L2 norm (before clipping)",
        ((M.TRAIN_GRAD_NORM, "gradient norm"),),
        ref=grad_clip_ref,
    ),
    Panel(
        "Generation rounds",
        "rounds per step",
        (
            (M.SAMPLING_ROUNDS, "generation rounds"),
            (M.SAMPLING_SHORT_BATCH, "short batch: not filled"),
        ),
        kind="bars",
        ref=rounds_ref,
        static=rounds_static,
        ylim=(0.0, None),
    ),
    Panel("Truncation rate", "fraction of responses", ((M.LENGTH_TRUNCATION_RATE, "truncated"),), ylim=(0.0, 1.05)),
    Panel("Time per phase", "seconds", PHASE_TIMES, kind="stacked"),
    Panel("Throughput", "tokens per second", ((M.PERF_TOKENS_PER_S, "prompt + response tokens/s"),)),
    Panel("Step time", "seconds per step", ((M.TIME_STEP, "s/step"),), ylim=(0.0, None)),
)


def add_derived(run: RunData) -> None:
    """`time/other`: the part of a step's wall time no phase timer covers (step minus the timed phases)."""
    phases = [k for k, _ in PHASE_TIMES if k not in (M.TIME_PREFIX + "other", M.TIME_EVAL)]
    for r in run.rows:
        total = finite(r.get(M.TIME_STEP))
        parts = [v for k in phases if (v := finite(r.get(k))) is not None]
        if total is not None and parts:
            r[M.TIME_PREFIX + "other"] = max(0.0, total - sum(parts))
