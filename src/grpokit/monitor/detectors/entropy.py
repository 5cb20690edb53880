"""Entropy collapse (§17.2, §17.7): token entropy below a floor, or far below its own start, for long, told apart from
a policy that converged on right answers or one that still improves."""

from __future__ import annotations

import math
import statistics
from typing import Any

from ... import metric_names as mn
from .base import Alert, Detector, register
from .context import on_policy_run, unknown_config_note
from .groups import GroupSplit, range_signal
from .progress import Progress
from .rows import RewardRange, StepWindow, accuracy_now, finite_at, number_at, task_learned


@register
class EntropyCollapse(Detector):
    """§17.7: mean token entropy strictly below `h_star` nats for more than `patience` consecutive training steps
    (NaN resets the counter and raises an 'entropy metric missing' alert; a row without the signal, such as a skipped
    update, neither counts nor resets: the steps it covers still count); relative variant: below `rel_frac` x the
    mean of the values of the first `baseline_steps` training steps for more than `patience` steps. While accuracy
    (train or held-out accuracy, or a 0/1 reward; the mean of the last `acc_window` steps) is at or above `ceiling`,
    low entropy is reported as convergence, not collapse: on a task with one right answer a policy that is right
    almost always has no reason to spread its probability.

    A collapse is a fall: the absolute rule calls entropy collapse (or "low entropy") only once the log has shown
    entropy at or above `h_star` at some earlier step. A log whose entropy is below `h_star` from its first logged
    step (a short structured-output task, a model tuned to answer in one format: e.g. TRL entropy 0.087 at step 1
    and 0.077 at step 100) shows no collapse during training; it is judged by the relative rule alone (a fall below
    `rel_frac` of its own initial level), and its low entropy is still reported as convergence when accuracy is at
    `ceiling`. A log that starts after an earlier collapse is judged the same way (it cannot show the fall).

    A run that still improves is not collapsing (`Progress`): while the reward's later half over `trend_window` steps
    beats its earlier half by `min_gain`, or the held-out accuracy is above its level when entropy fell (verl's PPO
    reference run on GSM8K: entropy 0.53 -> 0.05 as held-out accuracy rises to 0.58), low entropy is "low entropy"
    (info) with the numbers. Learning has stalled when the zero-variance fraction averages `zv_stalled` or more over
    `trend_window` steps and those groups are not mostly all-correct (`GroupSplit`: all-correct groups are a task
    learned, not a signal lost; one row is not enough: with one prompt per step each row's fraction is 0 or 1)."""

    name, mode = "entropy_collapse", "entropy collapse"
    h_star, patience, rel_frac, baseline_steps, ceiling, acc_window = 0.5, 50, 0.1, 10, 0.9, 10
    # learning judged over the last `trend_window` steps (and held-out accuracy since the fall); `learned`: the share
    # of all-correct zero-variance groups that makes them a task learned
    trend_window, min_gain, zv_stalled, learned = 20, 0.01, 0.5, 0.8
    requires = ((mn.ENTROPY_TOKEN_MEAN,),)

    def __init__(self, context: dict[str, Any] | None = None, **params: Any) -> None:
        super().__init__(context, **params)
        self.count = self.rel_count = 0
        self.since: int | None = None
        self.rel_since: int | None = None
        self.baseline: list[float] = []
        self.first_step: int | None = None  # the first logged step: the baseline covers `baseline_steps` from it
        self.missing_reported = False
        self.seen_high = False  # entropy was at or above h_star at some logged step (a later drop is a fall)
        self.acc = StepWindow(self.acc_window)  # (signal, accuracy) of recent steps; their mean is compared
        self.range = RewardRange()
        self.progress = Progress(self.trend_window, self.min_gain)
        self.zv = StepWindow(self.trend_window)
        self.split = GroupSplit(self.trend_window)

    @property
    def min_steps(self) -> int:
        return int(self.patience) + 1

    def _accuracy(self) -> tuple[str | None, float]:
        vals = self.acc.values()
        if not vals:
            return None, math.nan
        return vals[-1][0], statistics.fmean(v for _, v in vals)

    def _fix(self, fell: bool = False) -> tuple[str, list[str]]:
        """The fix and the autopilot's actions. Two causes come first where the run shows them: a sampler colder
        than 1 (its entropy is the tempered distribution's, docs/math.md §10: sample at 1), and a reward that fell
        while entropy fell (`fell`: the updates are too large for this model, so lower the learning rate)."""
        ctx = self.context
        parts: list[str] = []
        actions: list[str] = []
        temp = ctx.get("temperature")
        if isinstance(temp, (int, float)) and temp < 1.0:
            parts.append(f"sample at temperature 1 (rollout.temperature is {temp}: a cold sampler narrows entropy)")
            actions.append("rollout.temperature=1.0")
        if fell:
            parts.append("a lower learning rate (train.lr*=0.25: the reward fell as entropy fell)")
            actions.append("train.lr*=0.25")
        on_policy = on_policy_run(ctx)
        eps_high, eps_low = ctx.get("eps_high"), ctx.get("eps_low")
        note = ""
        if on_policy:
            note = (
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
        if "rollout.temperature=1.0" not in actions:
            parts.append("a higher sampling temperature")
        if ctx.get("policy_loss") not in ("clip_cov", "kl_cov"):
            parts.append("Clip-Cov / KL-Cov for long runs")
        parts += [note] if note else []  # what can act first, the note last
        return ", ".join(parts) + unknown_config_note(ctx), actions

    def _count(self, step: int, h: float) -> float:
        """Advance the absolute and relative below-threshold counters (in training steps); returns the baseline
        (mean of the values of the first `baseline_steps` training steps)."""
        if self.first_step is None:
            self.first_step = step
        # the baseline covers the first `baseline_steps` training steps (at least the first row), not rows: in a log
        # written every 10 steps, 10 rows would reach far past a collapse's onset
        in_baseline = not self.baseline or step < self.first_step + self.baseline_steps
        if in_baseline:
            self.baseline.append(h)
        if h >= self.h_star:
            self.seen_high = True
        if h < self.h_star:
            self.since = step if self.since is None else self.since
            self.count = step - self.since + 1
        else:
            self.since, self.count = None, 0
        base = statistics.fmean(self.baseline) if self.baseline else math.nan
        rel = not in_baseline and h < self.rel_frac * base
        if rel:
            self.rel_since = step if self.rel_since is None else self.rel_since
            self.rel_count = step - self.rel_since + 1
        else:
            self.rel_since, self.rel_count = None, 0
        return base

    def _alert(self, step: int, h: float, base: float, absolute: bool) -> Alert:
        """Entropy collapse (critical), or convergence (info) while accuracy is at its ceiling; `absolute`: by the
        absolute rule (else the relative one)."""
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
            return self.new_alert(
                step,
                "info",
                f"token entropy {h:.3f} has been {why} for {n} steps with accuracy at {acc_v:.0%}: the policy has "
                "converged on answers it gets right (one right answer per prompt), not collapsed",
                ev,
                "the task is solved for this model: stop here, or train on harder data (grpokit preflight filters "
                "always-solved prompts); if the task needs diverse answers, treat it as entropy collapse",
                onset=step - n + 1,
                mode="convergence",
            )
        trend, tev, because = self._learning(step - n + 1)
        ev.update(tev)
        fix, actions = self._fix(fell=self.progress.fell())
        msg = f"token entropy {h:.3f} has been {why} for {n} steps"
        if trend == "learning":
            return self.new_alert(
                step,
                "info",
                msg + f", but {because}: low entropy, still learning: watch",
                ev,
                "nothing yet; if reward stops rising while entropy stays low, " + fix,
                onset=step - n + 1,
                mode="low entropy",
            )
        if trend == "stalled":
            msg += " and learning has stalled"
        return self.new_alert(step, "critical", msg, ev, fix, actions, onset=step - n + 1)

    def _learning(self, since: int) -> tuple[str, dict[str, Any], str]:
        """'stalled', 'learning' or 'unknown' (no reward in the log), the numbers that say so, and why in words
        (for 'learning'); `since`: the step entropy fell below its bar."""
        ev: dict[str, Any] = {}
        zv = self.zv.values()
        if zv:
            ev["zero_variance_frac"] = round(statistics.fmean(zv), 3)
            self.split.evidence(ev)
            if ev["zero_variance_frac"] >= self.zv_stalled and not task_learned(ev, self.learned):
                return "stalled", ev, ""  # the group's answers no longer differ: no learning signal is left
        improving, pev, because = self.progress.improving(since)
        ev.update(pev)
        if improving:
            return "learning", ev, because
        return ("stalled" if "reward_later" in pev else "unknown"), ev, ""

    def check(self, step: int, m: dict[str, Any]) -> tuple[bool, Alert | None]:
        self.range.update(m)
        self.progress.add(step, m)
        key, acc = accuracy_now(m, self.range.zero_one)
        self._zero_variance(step, m, acc if key == mn.REWARD_ACCURACY or self.range.zero_one else math.nan)
        if key is not None:
            self.acc.add(step, (key, acc))
        if mn.ENTROPY_TOKEN_MEAN not in m:
            return self.active, None
        h = number_at(m, mn.ENTROPY_TOKEN_MEAN)
        if not math.isfinite(h):
            self.count = self.rel_count = 0
            self.since = self.rel_since = None
            return False, None
        base = self._count(step, h)
        low, relative = self.count > self.patience, self.rel_count > self.patience
        if relative or (low and self.seen_high):
            return True, self._alert(step, h, base, absolute=low and self.seen_high)
        acc_key, acc_v = self._accuracy()
        if low and acc_key is not None and acc_v >= self.ceiling:  # low from the start, at the accuracy ceiling
            return True, self._alert(step, h, base, absolute=True)
        return False, None

    def _zero_variance(self, step: int, m: dict[str, Any], acc: float) -> None:
        """The row's zero-variance fraction (or range signal) and the split of its groups, for `_learning`."""
        zv, whole = math.nan, False
        for k in (mn.ZV_ACC_FRAC, mn.ZV_FRAC, mn.ZV_SAMPLE_FRAC):
            if math.isfinite(zv := finite_at(m, k)):
                break
        if not math.isfinite(zv):
            zv = range_signal(m)
            whole = zv == 1.0
        if math.isfinite(zv):
            self.zv.add(step, zv)
            self.split.add(step, m, zv, whole, acc)

    def observe(self, step: int, m: dict[str, Any]) -> Alert | None:
        alert = super().observe(step, m)
        if (
            mn.ENTROPY_TOKEN_MEAN in m
            and not math.isfinite(number_at(m, mn.ENTROPY_TOKEN_MEAN))
            and not self.missing_reported
        ):
            self.missing_reported = True  # §17.7: a NaN entropy resets the counter and is reported once
            return self.new_alert(
                step,
                "warning",
                f"token entropy is {m[mn.ENTROPY_TOKEN_MEAN]} at step {step}: the collapse counter was reset",
                {mn.ENTROPY_TOKEN_MEAN: str(m[mn.ENTROPY_TOKEN_MEAN])},
                "check the training forward logs entropy (empty response masks give NaN)",
                mode="entropy metric missing",
            )
        return alert
