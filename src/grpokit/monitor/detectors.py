"""Failure-mode detectors over the per-step signals of spec §17 (canonical metric names, see `signals.py`).

Each detector is one small class with documented, configurable thresholds. Fed one metrics row per step, it
returns an `Alert` when its failure mode starts (with the step it started at, the numbers that show it, a
severity and the fix named after the seed technique that addresses it), and stays quiet while the mode persists;
the alert it returned keeps the mode's *current* value (`Alert.current`) and escalates its severity while the mode
lasts, and records when it cleared. A detector whose inputs a log lacks reports them as not measurable; nothing is
guessed.

Robustness rules every detector follows (a property test feeds them random and degenerate series):

- windows and patience are in **training steps**, not rows: a log written every 10 steps fills a 5-step window
  with one row (see `StepWindow`);
- a row lacking a signal (or holding NaN / inf / a non-number there) neither counts nor crashes;
- relative rules ("grew 3x", "10x its median") also need an absolute floor, and their evidence states the
  absolute values;
- a fix is only offered when the run does not already use it and it can act in the run's configuration
  (`context`: the recipe's switches; empty when the log carries no config, and then the fix says so).
"""

from __future__ import annotations

import math
import statistics
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

SEVERITY_RANK = {"critical": 0, "warning": 1, "info": 2}


@dataclass
class Alert:
    """A failure mode that started at `step` (onset) and was confirmed at `fired_at`.

    While the mode lasts, `current` holds the latest step's message and evidence, `escalations` every severity
    change, and `cleared_at` the step it cleared (None while active)."""

    mode: str
    detector: str
    step: int
    fired_at: int
    severity: str
    message: str
    evidence: dict[str, Any]
    fix: str
    actions: list[str] = field(default_factory=list)  # config changes autopilot may apply (key=value)
    current: dict[str, Any] | None = None
    escalations: list[dict[str, Any]] = field(default_factory=list)
    cleared_at: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _num(m: dict[str, Any], key: str) -> float:
    v = m.get(key)
    if isinstance(v, bool):
        return float(v)
    try:
        f = float(v)
    except (TypeError, ValueError, OverflowError):
        return math.nan
    return f


def _finite(m: dict[str, Any], key: str) -> float:
    """The value if it is a finite number, else NaN (inf counts as not logged for trend rules)."""
    f = _num(m, key)
    return f if math.isfinite(f) else math.nan


def _first(m: dict[str, Any], keys: Iterable[str]) -> tuple[str | None, float]:
    for k in keys:
        v = _num(m, k)
        if math.isfinite(v):
            return k, v
    return None, math.nan


def _slope(ys: list[float]) -> float:
    n = len(ys)
    if n < 2:
        return 0.0
    xm, ym = (n - 1) / 2, sum(ys) / n
    den = sum((i - xm) ** 2 for i in range(n))
    return sum((i - xm) * (y - ym) for i, y in enumerate(ys)) / den


def _r(x: float, nd: int = 4) -> float | None:
    return round(x, nd) if isinstance(x, (int, float)) and math.isfinite(x) else None


class StepWindow:
    """The rows of the last `size` training steps, whatever the logging interval.

    A row stands for the steps since the previous row (`interval`, the latest step difference), so the window is
    full once the rows it holds cover `size` steps: `size` rows when every step is logged, one row when the log is
    written every `size` steps or less often. A step that goes backwards (a restart) empties the window; a
    repeated step replaces its row."""

    def __init__(self, size: int) -> None:
        self.size = max(int(size), 1)
        self.items: deque[tuple[int, Any]] = deque()
        self.interval = 1

    def add(self, step: int, item: Any) -> None:
        if self.items:
            last = self.items[-1][0]
            if step == last:
                self.items[-1] = (step, item)
                return
            if step < last:
                self.items.clear()
                self.interval = 1
            else:
                self.interval = step - last
        self.items.append((step, item))
        while self.items and self.items[0][0] <= step - self.size:
            self.items.popleft()

    def full(self) -> bool:
        return bool(self.items) and self.items[-1][0] - self.items[0][0] + self.interval >= self.size

    def values(self) -> list[Any]:
        return [x for _, x in self.items]

    def first_step(self) -> int:
        return self.items[0][0]

    def __len__(self) -> int:
        return len(self.items)


class Detector:
    """Base: `observe(step, metrics)` -> Alert | None. Subclasses implement `check`."""

    name = "detector"
    mode = "unknown"
    requires: tuple[tuple[str, ...], ...] = ()  # each inner tuple: alternatives, one of which must be logged

    def __init__(self, context: dict[str, Any] | None = None, **params: Any) -> None:
        self.context = context or {}
        for k, v in params.items():
            attr = getattr(type(self), k, None)
            if not hasattr(self, k) or k.startswith("_") or callable(attr) or isinstance(attr, property):
                raise ValueError(f"detector {self.name} has no threshold {k!r}")
            setattr(self, k, v)
        self.active = False
        self.onset: int | None = None
        self.alert: Alert | None = None  # the alert of the current (or last) episode

    @property
    def min_steps(self) -> int:
        """Training steps a log must cover before this detector can judge (used for "too few steps")."""
        return int(getattr(self, "window", 1))

    def missing(self, available: set[str]) -> list[str]:
        """Required signals absent from a log (each entry lists its alternatives)."""
        return [" or ".join(alts) for alts in self.requires if not any(a in available for a in alts)]

    def check(self, step: int, m: dict[str, Any]) -> tuple[bool, Alert | None]:
        """Return (condition holds now, alert describing it now)."""
        raise NotImplementedError

    cooldown = 10  # steps after a mode clears before the same detector may alert again (no alert spam)

    def observe(self, step: int, m: dict[str, Any]) -> Alert | None:
        holds, alert = self.check(step, m)
        if holds and not self.active:
            self.active = True
            last = getattr(self, "_cleared_at", None)
            if last is not None and step - last <= self.cooldown and self.alert is not None:
                self.alert.cleared_at = None  # the same episode came back: keep updating its alert, silently
                if alert is not None:
                    self._update(step, alert)
                return None
            self.onset = step
            if alert is not None:
                alert.current = {"step": step, "message": alert.message, "evidence": dict(alert.evidence)}
                self.alert = alert
            return alert
        if holds and self.active and alert is not None and self.alert is not None:
            self._update(step, alert)
        if not holds and self.active:
            self.active = False
            self._cleared_at = step
            if self.alert is not None:
                self.alert.cleared_at = step
        return None

    def _update(self, step: int, new: Alert) -> None:
        """The mode persists: record its current value; escalate (never de-escalate) its severity."""
        a = self.alert
        assert a is not None
        a.current = {"step": step, "message": new.message, "evidence": dict(new.evidence)}
        if new.mode != a.mode:
            a.escalations.append({"step": step, "mode": new.mode, "from_mode": a.mode})
            a.mode = new.mode
        if SEVERITY_RANK.get(new.severity, 9) < SEVERITY_RANK.get(a.severity, 9):
            a.escalations.append({"step": step, "from": a.severity, "to": new.severity})
            a.severity = new.severity
            self.escalated_at = step
        a.fix, a.actions = new.fix, list(new.actions)


class Windowed(Detector):
    """Keeps the last `window` training steps of one signal (the first available of `keys`)."""

    window = 5
    keys: tuple[str, ...] = ()

    def __init__(self, context: dict[str, Any] | None = None, **params: Any) -> None:
        super().__init__(context, **params)
        self.values = StepWindow(self.window)

    def push(self, step: int, m: dict[str, Any]) -> str | None:
        key, v = _first(m, self.keys)
        if key is not None:
            self.values.add(step, v)
        return key

    def full(self) -> bool:
        return self.values.full()

    def mean(self) -> float:
        vals = self.values.values()
        return statistics.fmean(vals) if vals else math.nan

    def vals(self) -> list[float]:
        return self.values.values()


DETECTORS: dict[str, type[Detector]] = {}


def register(cls: type[Detector]) -> type[Detector]:
    DETECTORS[cls.name] = cls
    return cls


def _unknown_config_note(ctx: dict[str, Any]) -> str:
    return "" if ctx else " (this log carries no config: skip whichever of these the run already uses)"


def _on_policy(ctx: dict[str, Any]) -> bool | None:
    """True when each batch is used for exactly one optimizer step (the PPO ratio is 1: nothing can clip);
    None when the log does not say."""
    if not ctx or ("epochs" not in ctx and "mini_batches" not in ctx):
        return None
    try:
        return int(ctx.get("epochs") or 1) * int(ctx.get("mini_batches") or 1) == 1 and not ctx.get("off_policy")
    except (TypeError, ValueError):
        return None


def accuracy_now(m: dict[str, Any], reward_is_accuracy: bool = False) -> tuple[str | None, float]:
    """The best accuracy signal in a row: train accuracy, held-out accuracy, or (when the caller knows the reward is
    a 0/1 score) the mean reward."""
    keys = ["reward/accuracy", "eval/accuracy"] + (["reward/mean"] if reward_is_accuracy else [])
    return _first(m, keys)


class _RewardRange:
    """Tracks whether a log's reward has stayed within [0, 1] (per-step min/max when logged): then its mean is
    an accuracy (verl's `critic/score` with a 0/1 verifier)."""

    def __init__(self) -> None:
        self.lo, self.hi, self.seen = math.inf, -math.inf, False

    def update(self, m: dict[str, Any]) -> None:
        lo, hi = _finite(m, "reward/min"), _finite(m, "reward/max")
        if math.isfinite(lo) and math.isfinite(hi):
            self.lo, self.hi, self.seen = min(self.lo, lo), max(self.hi, hi), True

    @property
    def zero_one(self) -> bool:
        return self.seen and self.lo >= 0.0 and self.hi <= 1.0 and self.hi > self.lo


@register
class AdvantageCollapse(Windowed):
    """Zero-variance groups (§17.1): mean over `window` steps >= `threshold` (critical at `critical`).
    Uses the accuracy-based fraction when logged (what dynamic sampling filters), else the reward-based one."""

    name, mode = "advantage_collapse", "advantage collapse"
    threshold, critical, window = 0.5, 0.8, 5
    keys = ("zv/acc_frac", "zv/frac", "zv/sample_frac")
    requires = (keys,)

    def __init__(self, context: dict[str, Any] | None = None, **params: Any) -> None:
        super().__init__(context, **params)
        self.split = StepWindow(self.window)

    def check(self, step: int, m: dict[str, Any]) -> tuple[bool, Alert | None]:
        key = self.push(step, m)
        if key is None:
            return self.active, None
        self.split.add(step, (_finite(m, "zv/all_correct"), _finite(m, "zv/all_wrong")))
        if not self.full() or self.mean() < self.threshold:
            return False, None
        zv = self.mean()
        ev: dict[str, Any] = {"zero_variance_frac": round(zv, 3), "signal": key, "window_steps": self.window}
        c = [x for x, _ in self.split.values() if math.isfinite(x)]
        w = [x for _, x in self.split.values() if math.isfinite(x)]
        if c and w:
            ev["all_correct_frac"] = round(statistics.fmean(c), 3)
            ev["all_wrong_frac"] = round(statistics.fmean(w), 3)
        ev["wasted_compute"] = f"~{zv:.0%} of sampled groups give no gradient"
        if "all_wrong_frac" not in ev:
            data = (
                "prompts the model solves sometimes (this log does not say whether groups are all-right or all-wrong)"
            )
        elif ev["all_wrong_frac"] >= ev["all_correct_frac"]:
            data = "easier prompts (the model fails every sample)"
        else:
            data = "harder prompts (the model always succeeds)"
        ds = self.context.get("dynamic_sampling")
        if ds:
            fix = (
                f"dynamic sampling is on and pays for this with extra generation rounds: a data mix with {data} "
                "(grpokit preflight filters them), or a larger group size G"
            )
        else:
            fix = (
                f"DAPO dynamic sampling (algo.dynamic_sampling=true) to drop degenerate groups; a data mix with "
                f"{data} (grpokit preflight filters them); a larger group size G" + _unknown_config_note(self.context)
            )
        actions = [] if ds else ["algo.dynamic_sampling=true"]
        sev = "critical" if zv >= self.critical else "warning"
        what = "accuracy" if key == "zv/acc_frac" else "reward"
        return True, Alert(
            self.mode,
            self.name,
            self.values.first_step(),
            step,
            sev,
            f"{zv:.0%} of groups have zero {what} variance over the last {self.window} steps",
            ev,
            fix,
            actions,
        )


@register
class EntropyCollapse(Detector):
    """§17.7: mean token entropy strictly below `h_star` nats for more than `patience` consecutive training steps
    (NaN resets the counter and raises an 'entropy metric missing' alert; a row without the signal, such as a skipped
    update, neither counts nor resets: the steps it covers still count); relative variant: below `rel_frac` x the
    mean of the first `baseline_steps` logged values for more than `patience` steps. While accuracy (train or
    held-out accuracy, or a 0/1 reward; the mean of the last `acc_window` steps) is at or above `ceiling`, low
    entropy is reported as convergence, not collapse: on a task with one right answer a policy that is right
    almost always has no reason to spread its probability."""

    name, mode = "entropy_collapse", "entropy collapse"
    h_star, patience, rel_frac, baseline_steps, ceiling, acc_window = 0.5, 50, 0.1, 10, 0.9, 10
    requires = (("entropy/token_mean",),)

    def __init__(self, context: dict[str, Any] | None = None, **params: Any) -> None:
        super().__init__(context, **params)
        self.count = self.rel_count = 0
        self.since: int | None = None
        self.rel_since: int | None = None
        self.baseline: list[float] = []
        self.missing_reported = False
        self.acc = StepWindow(self.acc_window)  # (signal, accuracy) of recent steps; their mean is compared
        self.range = _RewardRange()

    @property
    def min_steps(self) -> int:
        return int(self.patience) + 1

    def _accuracy(self) -> tuple[str | None, float]:
        vals = self.acc.values()
        if not vals:
            return None, math.nan
        return vals[-1][0], statistics.fmean(v for _, v in vals)

    def _fix(self) -> tuple[str, list[str]]:
        ctx = self.context
        parts: list[str] = []
        actions: list[str] = []
        on_policy = _on_policy(ctx)
        eps_high, eps_low = ctx.get("eps_high"), ctx.get("eps_low")
        if on_policy:
            parts.append(
                "(clip-higher cannot act here: each batch is used once, epochs x mini-batches = 1, so the ratio "
                "is 1 and nothing clips)"
            )
        elif isinstance(eps_high, (int, float)) and isinstance(eps_low, (int, float)) and eps_high > eps_low:
            parts.append(f"clip-higher is on (eps_high={eps_high}): raise it further (algo.eps_high+=0.04)")
            actions.append("algo.eps_high+=0.04")
        else:
            parts.append("clip-higher (algo.eps_high=0.28)")
            actions.append("algo.eps_high+=0.04")
        coef = ctx.get("entropy_coef")
        if isinstance(coef, (int, float)) and coef > 0:
            parts.append(f"a larger entropy bonus (algo.entropy_coef is {coef})")
        else:
            parts.append("an entropy bonus (algo.entropy_coef)")
        actions.append("algo.entropy_coef+=0.001")
        parts.append("a higher sampling temperature")
        if ctx.get("policy_loss") not in ("clip_cov", "kl_cov"):
            parts.append("Clip-Cov / KL-Cov for long runs")
        if on_policy:
            parts = parts[1:] + parts[:1]  # what can act first, the note last
        return ", ".join(parts) + _unknown_config_note(ctx), actions

    def check(self, step: int, m: dict[str, Any]) -> tuple[bool, Alert | None]:
        self.range.update(m)
        key, acc = accuracy_now(m, self.range.zero_one)
        if key is not None:
            self.acc.add(step, (key, acc))
        if "entropy/token_mean" not in m:
            return self.active, None
        h = _num(m, "entropy/token_mean")
        if not math.isfinite(h):
            self.count = self.rel_count = 0
            self.since = self.rel_since = None
            return False, None
        if len(self.baseline) < self.baseline_steps:
            self.baseline.append(h)
        if h < self.h_star:
            self.since = step if self.since is None else self.since
            self.count = step - self.since + 1
        else:
            self.since, self.count = None, 0
        base = statistics.fmean(self.baseline) if self.baseline else math.nan
        rel = len(self.baseline) >= self.baseline_steps and h < self.rel_frac * base
        if rel:
            self.rel_since = step if self.rel_since is None else self.rel_since
            self.rel_count = step - self.rel_since + 1
        else:
            self.rel_since, self.rel_count = None, 0
        if self.count <= self.patience and self.rel_count <= self.patience:
            return False, None
        absolute = self.count > self.patience
        n = self.count if absolute else self.rel_count
        ev: dict[str, Any] = {
            "entropy": round(h, 4),
            "steps_below": n,
            "threshold": self.h_star if absolute else round(self.rel_frac * base, 4),
            "initial_entropy": round(base, 4),
        }
        why = f"below {self.h_star} nats" if absolute else f"below {self.rel_frac:.0%} of its initial {base:.2f}"
        acc_key, acc_v = self._accuracy()
        if acc_key is not None and acc_v >= self.ceiling:
            ev["accuracy"] = round(acc_v, 3)
            ev["accuracy_signal"] = acc_key
            return True, Alert(
                "convergence",
                self.name,
                step - n + 1,
                step,
                "info",
                f"token entropy {h:.3f} has been {why} for {n} steps with accuracy at {acc_v:.0%}: the policy has "
                "converged on answers it gets right (one right answer per prompt), not collapsed",
                ev,
                "the task is solved for this model: stop here, or train on harder data (grpokit preflight filters "
                "always-solved prompts); if the task needs diverse answers, treat it as entropy collapse",
                [],
            )
        fix, actions = self._fix()
        return True, Alert(
            self.mode,
            self.name,
            step - n + 1,
            step,
            "critical",
            f"token entropy {h:.3f} has been {why} for {n} steps",
            ev,
            fix,
            actions,
        )

    def observe(self, step: int, m: dict[str, Any]) -> Alert | None:
        alert = super().observe(step, m)
        if "entropy/token_mean" in m and not math.isfinite(_num(m, "entropy/token_mean")) and not self.missing_reported:
            self.missing_reported = True  # §17.7: a NaN entropy resets the counter and is reported once
            return Alert(
                "entropy metric missing",
                self.name,
                step,
                step,
                "warning",
                f"token entropy is {m['entropy/token_mean']} at step {step}: the collapse counter was reset",
                {"entropy/token_mean": str(m["entropy/token_mean"])},
                "check the training forward logs entropy (empty response masks give NaN)",
                [],
            )
        return alert


@register
class KLDrift(Windowed):
    """KL to the reference (§17.3): above `kl_max`, or growing without bound (slope > 0 over `window` steps, the
    last value > `growth` x the first (the first floored at `kl_floor`) and above the absolute floor `min_kl`: a KL
    going 0.006 -> 0.03 is not drift). Opposite failure: with a KL penalty on, the penalty term exceeds the
    policy-gradient term while reward stalls (slope <= 0) for `window` steps."""

    name, mode = "kl_drift", "KL drift"
    kl_max, growth, kl_floor, min_kl, window = 0.5, 3.0, 0.01, 0.1, 10
    keys = ("kl_ref/k3", "kl_ref/k1", "actor/kl_loss")
    requires = (keys,)

    def __init__(self, context: dict[str, Any] | None = None, **params: Any) -> None:
        super().__init__(context, **params)
        self.rewards = StepWindow(self.window)
        self.dominates = StepWindow(self.window)

    def check(self, step: int, m: dict[str, Any]) -> tuple[bool, Alert | None]:
        key = self.push(step, m)
        r = _finite(m, "reward/mean")
        if math.isfinite(r):
            self.rewards.add(step, r)
        coef, kl_loss, pg = _finite(m, "kl/coef"), _finite(m, "actor/kl_loss"), _finite(m, "actor/pg_loss")
        # the policy-gradient term's scale: mean |advantage| when logged (the value of a group-normalised surrogate
        # is ~0 on-policy whatever its gradient), else |pg loss|
        pg_scale = _finite(m, "adv/abs_mean")
        if not math.isfinite(pg_scale):
            pg_scale = abs(pg)
        if math.isfinite(coef) and math.isfinite(kl_loss) and math.isfinite(pg_scale):
            self.dominates.add(step, coef * kl_loss > pg_scale and coef > 0)
        if key is None:
            return self.active, None
        vals = self.vals()
        last = vals[-1]
        fix = (
            "decoupled KL (no KL in the reward; algo.kl_placement=loss), an adaptive coefficient "
            "(algo.kl_controller=adaptive), an EMA reference (algo.reference=ema)"
        )
        actions = [] if self.context.get("kl_controller") == "adaptive" else ["algo.kl_controller=adaptive"]
        if last > self.kl_max:
            return True, Alert(
                self.mode,
                self.name,
                step,
                step,
                "critical",
                f"KL to the reference {last:.3f} exceeds {self.kl_max}",
                {"kl": round(last, 4), "signal": key},
                fix,
                actions,
            )
        if (
            self.full()
            and len(vals) >= 2
            and _slope(vals) > 0
            and last > self.growth * max(vals[0], self.kl_floor)
            and last > max(self.kl_floor, self.min_kl)
        ):
            return True, Alert(
                self.mode,
                self.name,
                self.values.first_step(),
                step,
                "warning",
                f"KL to the reference grew from {vals[0]:.4g} to {last:.4g} "
                f"({last / max(vals[0], self.kl_floor):.1f}x) in {step - self.values.first_step() + 1} steps",
                {"kl_first": round(vals[0], 5), "kl_last": round(last, 5), "signal": key},
                fix,
                actions,
            )
        dom = self.dominates.values()
        if (
            self.dominates.full()
            and dom
            and all(dom)
            and self.rewards.full()
            and len(self.rewards) >= 2
            and _slope(self.rewards.values()) <= 0
        ):
            return True, Alert(
                self.mode,
                self.name,
                self.dominates.first_step(),
                step,
                "warning",
                "the KL penalty outweighs the policy gradient and reward has stalled",
                {"kl_coef": coef, "kl_loss": _r(kl_loss, 5), "pg_scale": _r(pg_scale, 5)},
                "lower the KL coefficient or use an adaptive controller (algo.kl_controller=adaptive)",
                ["algo.kl_coef*=0.5"],
            )
        return False, None


@register
class LengthBias(Windowed):
    """Incorrect responses longer than correct ones by `ratio` and still growing over `window` steps (the 1/|o|
    length bias of §4), or length collapse: mean length below `collapse_frac` of its first-steps level while
    accuracy has not improved (VC-PPO's symptom)."""

    name, mode = "length_bias", "length bias"
    ratio, window, collapse_frac = 1.3, 10, 0.3
    keys = ("length/incorrect_mean",)
    requires = (("length/incorrect_mean", "length/mean"),)

    def __init__(self, context: dict[str, Any] | None = None, **params: Any) -> None:
        super().__init__(context, **params)
        self.first_len: list[float] = []
        self.first_acc: list[float] = []
        self.ratios = StepWindow(self.window)

    def check(self, step: int, m: dict[str, Any]) -> tuple[bool, Alert | None]:
        self.push(step, m)
        inc, cor = _finite(m, "length/incorrect_mean"), _finite(m, "length/correct_mean")
        if math.isfinite(inc) or math.isfinite(cor):
            self.ratios.add(step, inc / cor if math.isfinite(inc) and math.isfinite(cor) and cor > 0 else math.nan)
        rs = self.ratios.values()
        sustained = self.ratios.full() and bool(rs) and all(r > self.ratio for r in rs)
        mean, acc = _finite(m, "length/mean"), _finite(m, "reward/accuracy")
        fix = (
            "token-level aggregation (algo.loss_agg=token-mean), Dr. GRPO normalisation "
            "(algo.loss_agg=constant-norm, algo.adv_scale=none), overlong shaping (algo.soft_overlong=true)"
        )
        if (
            self.full()
            and sustained
            and math.isfinite(inc)
            and math.isfinite(cor)
            and cor > 0
            and _slope(self.vals()) > 0
        ):
            return True, Alert(
                self.mode,
                self.name,
                self.values.first_step(),
                step,
                "warning",
                f"incorrect responses ({inc:.0f} tokens) are {inc / cor:.1f}x longer than correct "
                f"ones ({cor:.0f}) and growing",
                {"incorrect_len": round(inc, 1), "correct_len": round(cor, 1)},
                fix,
                ["algo.loss_agg=token-mean"],
            )
        if math.isfinite(mean):
            if len(self.first_len) < 5:
                self.first_len.append(mean)
                if math.isfinite(acc):
                    self.first_acc.append(acc)
            elif mean < self.collapse_frac * statistics.fmean(self.first_len):
                base_acc = statistics.fmean(self.first_acc) if self.first_acc else math.nan
                if math.isfinite(acc) and math.isfinite(base_acc) and acc <= base_acc:
                    return True, Alert(
                        "length collapse",
                        self.name,
                        step,
                        step,
                        "warning",
                        f"mean length fell to {mean:.0f} from {statistics.fmean(self.first_len):.0f} "
                        "tokens without any accuracy gain",
                        {"length": round(mean, 1), "accuracy": round(acc, 3), "initial_accuracy": round(base_acc, 3)},
                        "value pretraining and decoupled GAE for PPO (VC-PPO); a lower learning rate",
                        [],
                    )
        return False, None


@register
class Truncation(Windowed):
    """Share of responses cut at the maximum length: window mean >= `threshold` and not falling."""

    name, mode = "truncation", "truncation"
    threshold, window = 0.2, 5
    keys = ("length/truncation_rate",)
    requires = (keys,)

    def check(self, step: int, m: dict[str, Any]) -> tuple[bool, Alert | None]:
        if self.push(step, m) is None or not self.full():
            return self.active, None
        vals = self.vals()
        if self.mean() >= self.threshold and vals[-1] >= vals[0]:
            fix = (
                "overlong filtering (algo.overlong_filter=true) or soft overlong punishment "
                "(algo.soft_overlong=true), or a larger rollout.max_new_tokens"
            )
            actions = [] if self.context.get("soft_overlong") else ["algo.soft_overlong=true"]
            return True, Alert(
                self.mode,
                self.name,
                self.values.first_step(),
                step,
                "warning",
                f"{self.mean():.0%} of responses hit the length limit",
                {"truncation_rate": round(self.mean(), 3), "now": round(vals[-1], 3)},
                fix,
                actions,
            )
        return False, None


@register
class ShortBatch(Windowed):
    """Dynamic sampling with the opt-in `algo.ds_shortfall=partial` trained on short batches (`sampling/short_batch`)
    in at least `threshold` of the last `window` steps: the filter could not find enough groups with varying
    accuracy in `algo.max_gen_rounds` rounds, so those updates see fewer groups than the recipe asks for. grpokit
    logs `sampling/short_batch` = 0 on full batches and on runs without dynamic sampling."""

    name, mode = "short_batch", "short batches"
    threshold, window = 0.5, 5
    requires = (("sampling/short_batch",),)

    def check(self, step: int, m: dict[str, Any]) -> tuple[bool, Alert | None]:
        short = _num(m, "sampling/short_batch")
        if not math.isfinite(short) or self.context.get("dynamic_sampling") is False:
            return self.active, None
        self.values.add(step, 1.0 if short > 0 else 0.0)
        if not self.full() or self.mean() < self.threshold:
            return False, None
        solved, failed = _num(m, "zv/all_correct"), _num(m, "zv/all_wrong")
        cause = (
            "the model solves nearly every prompt: the task is learned — stop, or train on harder data"
            if math.isfinite(solved) and (not math.isfinite(failed) or solved >= failed)
            else "the model fails nearly every prompt: filter the data to prompts it sometimes solves"
        )
        return True, Alert(
            self.mode,
            self.name,
            self.values.first_step(),
            step,
            "warning",
            f"{self.mean():.0%} of the last {len(self.vals())} steps trained on a short batch "
            "(dynamic sampling could not fill it within algo.max_gen_rounds)",
            {
                "short_frac": round(self.mean(), 3),
                "all_correct_frac": solved if math.isfinite(solved) else None,
                "all_wrong_frac": failed if math.isfinite(failed) else None,
                "batch_size_now": _num(m, "train/batch_size") if math.isfinite(_num(m, "train/batch_size")) else None,
            },
            f"{cause} (grpokit preflight shows pass rates per prompt); or raise algo.max_gen_rounds / "
            "algo.ds_oversample",
            [],
        )


@register
class ClippingAnomaly(Windowed):
    """Updates mostly clipped (clip fraction mean > `high` over `window` steps), or clip-high never active for
    `window` steps under clip-higher with off-policy updates. Not for the losses in `CLIPS_BY_DESIGN`: GSPO and
    GSPO-token clip a sequence-level ratio with eps ~3e-4 (most tokens clip by design), and CISPO's "clipped"
    tokens keep their gradient (only the importance weight is capped, detached), so nothing is thrown away."""

    name, mode = "clipping", "clipping anomaly"
    high, window = 0.3, 20
    CLIPS_BY_DESIGN = frozenset({"gspo", "gspo_token", "cispo"})
    keys = ("actor/clipfrac_high",)
    requires = (("actor/clipfrac_high", "actor/clipfrac", "actor/clipfrac_low"),)

    def __init__(self, context: dict[str, Any] | None = None, **params: Any) -> None:
        super().__init__(context, **params)
        self.totals = StepWindow(self.window)

    def check(self, step: int, m: dict[str, Any]) -> tuple[bool, Alert | None]:
        self.push(step, m)
        tot = _finite(m, "actor/clipfrac")
        if not math.isfinite(tot):
            parts = [
                v for v in (_finite(m, "actor/clipfrac_high"), _finite(m, "actor/clipfrac_low")) if math.isfinite(v)
            ]
            if not parts:
                return self.active, None
            tot = sum(parts)
        self.totals.add(step, tot)
        if not self.totals.full():
            return self.active, None
        ctx = self.context
        mean = statistics.fmean(self.totals.values())
        if ctx.get("policy_loss") not in self.CLIPS_BY_DESIGN and mean > self.high:
            return True, Alert(
                self.mode,
                self.name,
                self.totals.first_step(),
                step,
                "warning",
                f"{mean:.0%} of tokens are clipped: most of each update is thrown away",
                {"clip_frac": round(mean, 3)},
                "a lower learning rate (train.lr) or fewer epochs per batch",
                ["train.lr*=0.5"],
            )
        off_policy = _on_policy(ctx) is False
        clip_higher = isinstance(ctx.get("eps_high"), (int, float)) and ctx["eps_high"] > (ctx.get("eps_low") or 0)
        highs = self.vals()
        if off_policy and clip_higher and self.full() and highs and max(highs) == 0.0:
            return True, Alert(
                self.mode,
                self.name,
                self.values.first_step(),
                step,
                "info",
                f"clip-higher is configured but the high clip never fired in {self.window} steps",
                {"eps_high": ctx.get("eps_high")},
                "eps_high may be larger than the ratios reached; that is harmless, or raise train.lr",
                [],
            )
        return False, None


@register
class SamplerMismatch(Windowed):
    """§17.6 out of range: mismatch KL (k3) window mean > `kl_max`, or share of tokens with rho > C above
    `frac_max`, or max |logp_learner - logp_sampler| above `abs_max`."""

    name, mode = "sampler_mismatch", "sampler/learner mismatch"
    kl_max, frac_max, abs_max, window = 1e-3, 0.01, 2.0, 3
    keys = ("mismatch/kl_k3",)
    requires = (("mismatch/kl_k3", "mismatch/frac_high", "mismatch/abs_diff_max"),)

    def check(self, step: int, m: dict[str, Any]) -> tuple[bool, Alert | None]:
        key = self.push(step, m)
        frac, amax = _finite(m, "mismatch/frac_high"), _finite(m, "mismatch/abs_diff_max")
        if key is None and not math.isfinite(frac) and not math.isfinite(amax):
            return self.active, None
        bad = (
            (self.full() and self.mean() > self.kl_max)
            or (math.isfinite(frac) and frac > self.frac_max)
            or (math.isfinite(amax) and amax > self.abs_max)
        )
        if not bad:
            return False, None
        ev = {
            "mismatch_kl": _r(self.mean(), 6) if len(self.values) else None,
            "frac_rho_above_C": frac if math.isfinite(frac) else None,
            "abs_logp_diff_max": amax if math.isfinite(amax) else None,
        }
        actions = [] if self.context.get("is_correction") else ["algo.is_correction=token_truncate"]
        return True, Alert(
            self.mode,
            self.name,
            step,
            step,
            "warning",
            "the sampler's log-probs disagree with the learner's (the update is off-policy)",
            ev,
            "truncated or masked importance sampling (algo.is_correction=token_truncate or "
            "sequence_mask); sample with the learner's temperature and precision",
            actions,
        )


@register
class NoisyReward(Windowed):
    """Identical completions scored differently within a step (a non-deterministic verifier), or reward that
    tracks length (|corr| > `corr_max`) much more than correctness over `window` steps, or tracks a non-correctness
    reward component such as `format` (`reward/corr/<name>`) more than correctness over `window` steps."""

    name, mode = "noisy_reward", "noisy or hackable reward"
    corr_max, window = 0.5, 5
    keys = ("reward/length_corr",)
    requires = (("reward/dup_inconsistency", "reward/length_corr"),)

    def __init__(self, context: dict[str, Any] | None = None, **params: Any) -> None:
        super().__init__(context, **params)
        self.components: dict[str, StepWindow] = {}
        # reward-correctness correlation at the same steps as the length correlation (0 where accuracy was constant
        # in the step: then only something else can have moved the reward)
        self.acc = StepWindow(self.window)

    def check(self, step: int, m: dict[str, Any]) -> tuple[bool, Alert | None]:
        if self.push(step, m) is not None:
            a = _finite(m, "reward/acc_corr")
            self.acc.add(step, a if math.isfinite(a) else 0.0)
        for key in [k for k in m if isinstance(k, str) and k.startswith("reward/corr/")]:
            v = _finite(m, key)
            if math.isfinite(v):
                self.components.setdefault(key, StepWindow(self.window)).add(step, v)
        dup = _finite(m, "reward/dup_inconsistency")
        fix = "audit the verifier (grpokit audit-reward): noisy rewards feed false signal into every group"
        if math.isfinite(dup) and dup > 0:
            return True, Alert(
                self.mode,
                self.name,
                step,
                step,
                "critical",
                f"{dup:.0%} of repeated completions got different rewards in the same step",
                {"dup_inconsistency": round(dup, 3)},
                fix,
                [],
            )
        acc_corr = _finite(m, "reward/acc_corr")
        acc_vals = self.acc.values()
        acc_mean = statistics.fmean(acc_vals) if acc_vals else math.nan
        if self.full() and abs(self.mean()) > self.corr_max:
            # compared over the same steps: a step with a single tiny group can correlate reward with length and
            # with correctness alike (both |r| = 1); that is not a length-tracking reward
            if not math.isfinite(acc_mean) or abs(acc_mean) < abs(self.mean()):
                return True, Alert(
                    self.mode,
                    self.name,
                    self.values.first_step(),
                    step,
                    "warning",
                    f"reward correlates with response length (r = {self.mean():.2f}) more than with correctness",
                    {"length_corr": round(self.mean(), 3), "acc_corr": _r(acc_corr, 3)},
                    fix,
                    [],
                )
        for key, win in self.components.items():
            vals = win.values()
            if not (win.full() and vals):
                continue
            c = statistics.fmean(vals)
            if abs(c) > self.corr_max and (not math.isfinite(acc_corr) or abs(acc_corr) < abs(c)):
                name = key.removeprefix("reward/corr/")
                return True, Alert(
                    self.mode,
                    self.name,
                    win.first_step(),
                    step,
                    "warning",
                    f"reward follows its '{name}' component (r = {c:.2f}) more than correctness",
                    {f"corr_{name}": round(c, 3), "acc_corr": _r(acc_corr, 3)},
                    fix + "; lower the weight of the non-correctness reward",
                    [],
                )
        return False, None


@register
class Numerical(Detector):
    """NaN/inf loss (`train/nonfinite_loss`), non-finite gradients (`train/nonfinite_grad`), or a gradient-norm spike
    above `spike` x the median of the previous `history` steps and above the absolute floor `grad_floor` (a norm
    going 0.01 -> 0.2 is no trouble; a log whose norms are mostly 0 has median 0 and is judged on the floor)."""

    name, mode = "numerical", "numerical trouble"
    spike, history, grad_floor = 10.0, 20, 1.0
    requires = (("train/grad_norm", "train/nonfinite_grad", "train/nonfinite_loss"),)

    def __init__(self, context: dict[str, Any] | None = None, **params: Any) -> None:
        super().__init__(context, **params)
        self.norms = StepWindow(self.history)

    @property
    def min_steps(self) -> int:
        return 6

    def check(self, step: int, m: dict[str, Any]) -> tuple[bool, Alert | None]:
        # logs store a NaN loss as null (indistinguishable from "not logged"), so the trainer flags it explicitly
        if _finite(m, "train/nonfinite_loss") > 0:
            return True, Alert(
                self.mode,
                self.name,
                step,
                step,
                "critical",
                "the loss is NaN or infinite",
                {"nonfinite_loss": 1},
                "lower the learning rate; check rewards for NaN",
                ["train.lr*=0.5"],
            )
        if _finite(m, "train/nonfinite_grad") > 0:
            return True, Alert(
                self.mode,
                self.name,
                step,
                step,
                "critical",
                "non-finite gradient (step skipped)",
                {"nonfinite_grad": 1},
                "lower the learning rate; use fp32",
                ["train.lr*=0.5"],
            )
        g = _num(m, "train/grad_norm")
        if g == math.inf:
            return True, Alert(
                self.mode,
                self.name,
                step,
                step,
                "critical",
                "the gradient norm is infinite",
                {"grad_norm": "inf"},
                "lower the learning rate; use fp32",
                ["train.lr*=0.5"],
            )
        if not math.isfinite(g):
            return (self.active, None) if "train/grad_norm" not in m else (False, None)
        prev = [v for v in self.norms.values() if math.isfinite(v)]
        self.norms.add(step, g)
        if len(prev) >= 5:
            med = statistics.median(prev)
            if g > self.grad_floor and g > self.spike * med:
                ratio = f"{g / med:.0f}x its recent median {med:.3g}" if med > 0 else "from a recent median of 0"
                return True, Alert(
                    self.mode,
                    self.name,
                    step,
                    step,
                    "warning",
                    f"gradient norm {g:.3g} is {ratio}",
                    {"grad_norm": g, "median": med},
                    "lower the learning rate (train.lr) or tighten train.max_grad_norm",
                    ["train.lr*=0.5"],
                )
        return False, None


@register
class Saturation(Windowed):
    """Converged / saturated: over `window` steps the train accuracy (or a reward known to be a 0/1 score) averages
    at or above `ceiling`, or the share of all-correct groups averages at or above `all_correct`, or the latest
    held-out accuracy is at or above `ceiling`. Not a failure of the
    algorithm: the data is too easy for the model now, and further steps mostly do nothing."""

    name, mode = "saturation", "converged / saturated"
    ceiling, all_correct, window, margin = 0.95, 0.8, 10, 0.05
    keys = ("zv/all_correct",)
    requires = (("reward/accuracy", "eval/accuracy", "zv/all_correct", "reward/min"),)

    def __init__(self, context: dict[str, Any] | None = None, **params: Any) -> None:
        super().__init__(context, **params)
        self.acc = StepWindow(self.window)
        self.range = _RewardRange()
        self.eval_acc: tuple[int, float] | None = None

    def check(self, step: int, m: dict[str, Any]) -> tuple[bool, Alert | None]:
        self.range.update(m)
        self.push(step, m)
        ev_acc = _finite(m, "eval/accuracy")
        if math.isfinite(ev_acc):
            self.eval_acc = (step, ev_acc)
        key, acc = _first(m, ["reward/accuracy"] + (["reward/mean"] if self.range.zero_one else []))
        if key is not None:
            self.acc.add(step, acc)
        if key is None and not self.vals():
            return self.active, None
        acc_vals, ac_vals = self.acc.values(), self.vals()
        acc_mean = statistics.fmean(acc_vals) if self.acc.full() and acc_vals else math.nan
        ac_mean = statistics.fmean(ac_vals) if self.full() and ac_vals else math.nan
        held_out = self.eval_acc[1] if self.eval_acc is not None else math.nan
        slack = self.margin if self.active else 0.0  # hysteresis: a saturated run stays so until clearly below
        at_ceiling = (
            (math.isfinite(acc_mean) and acc_mean >= self.ceiling - slack)
            or (math.isfinite(ac_mean) and ac_mean >= self.all_correct - slack)
            or (math.isfinite(held_out) and held_out >= self.ceiling - slack)
        )
        if not at_ceiling:
            return False, None
        ev: dict[str, Any] = {}
        if math.isfinite(acc_mean):
            ev["accuracy"] = round(acc_mean, 3)
            ev["accuracy_signal"] = key or "reward/accuracy"
        if math.isfinite(ac_mean):
            ev["all_correct_groups"] = round(ac_mean, 3)
        if self.eval_acc is not None:
            ev["held_out_accuracy"] = round(self.eval_acc[1], 3)
            ev["held_out_step"] = self.eval_acc[0]
        start = min(w.first_step() for w in (self.acc, self.values) if len(w))
        return True, Alert(
            self.mode,
            self.name,
            start,
            step,
            "info",
            "the model is at its accuracy ceiling on this data: "
            + "; ".join(
                part
                for part in (
                    f"{acc_mean:.0%} of training samples right over the last {self.window} steps"
                    if math.isfinite(acc_mean)
                    else "",
                    f"{ac_mean:.0%} of groups all-correct (no gradient)" if math.isfinite(ac_mean) else "",
                    f"held-out accuracy {held_out:.0%}" if math.isfinite(held_out) else "",
                )
                if part
            ),
            ev,
            "the task is solved for this model: stop training, or move to harder data (grpokit preflight filters "
            "always-solved prompts)",
            [],
        )


class Monitor:
    """Runs every registered detector on each step; collects alerts."""

    def __init__(
        self,
        context: dict[str, Any] | None = None,
        thresholds: dict[str, dict[str, Any]] | None = None,
        factories: dict[str, Callable[..., Detector]] | None = None,
    ) -> None:
        thresholds = thresholds or {}
        self.detectors = [cls(context, **thresholds.get(name, {})) for name, cls in (factories or DETECTORS).items()]
        self.alerts: list[Alert] = []
        self.escalated: list[Alert] = []  # alerts whose severity rose at the last observed step (for live display)

    def observe(self, step: int, metrics: dict[str, Any]) -> list[Alert]:
        """New alerts of this step (modes that just started). Alerts already raised are updated in place with the
        mode's current value; those that escalated at this step are in `self.escalated`."""
        new = [a for d in self.detectors if (a := d.observe(step, metrics)) is not None]
        self.alerts.extend(new)
        self.escalated = [
            d.alert for d in self.detectors if d.alert is not None and getattr(d, "escalated_at", None) == step
        ]
        return new

    def active(self) -> list[str]:
        return [d.mode for d in self.detectors if d.active]

    def not_measurable(self, available: set[str]) -> dict[str, list[str]]:
        return {d.name: miss for d in self.detectors if (miss := d.missing(available))}


def rank(alerts: list[Alert]) -> list[Alert]:
    """Most severe first, then earliest onset."""
    return sorted(alerts, key=lambda a: (SEVERITY_RANK.get(a.severity, 9), a.step))
