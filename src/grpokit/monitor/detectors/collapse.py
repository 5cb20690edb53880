"""Collapse of the learning signal: zero-variance groups (advantage collapse, §17.1) and token entropy (§17.2,
§17.7)."""

from __future__ import annotations

import math
import statistics
from typing import Any

from ... import metric_names as mn
from .base import Alert, Detector, Windowed, register
from .context import on_policy_run, unknown_config_note
from .rows import RewardRange, StepWindow, accuracy_now, finite_at, number_at, task_learned

NEARLY_ALL = 0.95  # a zero-variance share at which a group filter has (almost) nothing left to keep


@register
class AdvantageCollapse(Windowed):
    """Zero-variance groups (§17.1): mean over `window` steps >= `threshold` (critical at `critical`).
    Uses the accuracy-based fraction when logged (what dynamic sampling filters), else the reward-based one.
    Two logged rows in a row at `critical` or above alert at once (a collapse onset is named on its second row, not
    after the window fills), except as the task learned, which needs the window.
    The mean is over the last `window` steps and at least the last `min_rows` (2) logged rows: a log written every
    `window` steps or less often fills the window with one row, and one row is a moment, not a sustained state
    (TRL/Unsloth's Chaos-Economy run, two generations per prompt, logged every 5 steps: 0.6 at step 175 between
    0.0 and 0.2).
    When at least `learned` of the zero-variance groups are all-correct (the split logged as zv/all_correct and
    zv/all_wrong), the zero variance is the task learned: mode "convergence", severity info, advice to stop."""

    name, mode = "advantage_collapse", "advantage collapse"
    threshold, critical, window, learned, min_rows = 0.5, 0.8, 5, 0.8, 2
    keys = (mn.ZV_ACC_FRAC, mn.ZV_FRAC, mn.ZV_SAMPLE_FRAC)
    requires = ((*keys, mn.ADV_MAX, mn.REWARD_MAX),)

    def __init__(self, context: dict[str, Any] | None = None, **params: Any) -> None:
        super().__init__(context, **params)
        self.split = StepWindow(self.window)
        self.recent_rows: list[tuple[int, float]] = []  # the last `min_rows` logged (step, fraction)

    def mean(self) -> float:
        """The zero-variance fraction over the window, or over the last `min_rows` logged rows when the window
        holds fewer."""
        if len(self.values) >= self.min_rows:
            return super().mean()
        if len(self.recent_rows) < self.min_rows:
            return math.nan
        return statistics.fmean(v for _, v in self.recent_rows[-int(self.min_rows) :])

    def _remember(self) -> None:
        step, v = self.values.items[-1]
        if self.recent_rows and self.recent_rows[-1][0] >= step:
            if self.recent_rows[-1][0] > step:  # a restart: the rows before it are another run's
                self.recent_rows.clear()
            else:
                self.recent_rows.pop()
        self.recent_rows.append((step, v))
        del self.recent_rows[: -int(self.min_rows)]

    def check(self, step: int, m: dict[str, Any]) -> tuple[bool, Alert | None]:
        key = self.push(step, m)
        if key is None:
            key = self._push_range(step, m)
        if key is None:
            return self.active, None
        self._remember()
        self.split.add(step, (finite_at(m, mn.ZV_ALL_CORRECT), finite_at(m, mn.ZV_ALL_WRONG)))
        windowed = self.full() and self.mean() >= self.threshold
        recent = [v for _, v in self.recent_rows]
        severe = len(recent) >= self.min_rows and min(recent) >= self.critical  # two rows in a row, each >= 0.8
        if not (windowed or severe):
            return False, None
        zv = self.mean() if windowed else statistics.fmean(recent)
        span = f"the last {self.window} steps" if windowed else f"the last {len(recent)} logged rows"
        ev: dict[str, Any] = {"zero_variance_frac": round(zv, 3), "signal": key, "window_steps": self.window}
        c = [x for x, _ in self.split.values() if math.isfinite(x)]
        w = [x for _, x in self.split.values() if math.isfinite(x)]
        if c and w:
            ev["all_correct_frac"] = round(statistics.fmean(c), 3)
            ev["all_wrong_frac"] = round(statistics.fmean(w), 3)
        ev["wasted_compute"] = f"~{zv:.0%} of sampled groups give no gradient"
        fix, actions = self._fix(ev)
        sev = "critical" if zv >= self.critical else "warning"
        if task_learned(ev, self.learned) and not self._cold():  # cold: all-correct may be one answer repeated
            if not windowed:
                return False, None  # a task is learned over a full window, not two rows
            return True, self.new_alert(
                step,
                "info",
                f"{zv:.0%} of groups have zero variance over {span} and "
                f"{ev['learned_share']:.0%} of those are all-correct: the model solves these prompts (the task is "
                "learned), not a collapse",
                ev,
                "the task is learned for this model: stop here (monitor.stop_when_learned=true stops a run by "
                "itself), or train on harder prompts (grpokit preflight filters always-solved ones)",
                onset=self.values.first_step(),
                mode="convergence",
            )
        if key == RANGE_SIGNAL:
            return True, self.new_alert(
                step,
                sev,
                f"every advantage was exactly 0 (min = max = 0) at {zv:.0%} of {span}",
                ev,
                fix,
                actions,
                onset=self.values.first_step(),
            )
        what = "accuracy" if key == mn.ZV_ACC_FRAC else "reward"
        return True, self.new_alert(
            step,
            sev,
            f"{zv:.0%} of groups have zero {what} variance over {span}",
            ev,
            fix,
            actions,
            onset=self.values.first_step(),
        )

    def _cold(self) -> bool:
        """The run samples colder than 1: all-correct groups there may be one answer repeated, not the task learned
        (so they are not read as convergence), and sampling at 1 is the first fix."""
        temp = self.context.get("temperature")
        return isinstance(temp, (int, float)) and temp < 1.0

    def _fix(self, ev: dict[str, Any]) -> tuple[str, list[str]]:
        """What to change, for the data the zero-variance groups point to, and the autopilot's actions."""
        if "all_wrong_frac" not in ev:
            data = (
                "prompts the model solves sometimes (this log does not say whether groups are all-right or all-wrong)"
            )
        elif ev["all_wrong_frac"] >= ev["all_correct_frac"]:
            data = "easier prompts (the model fails every sample)"
        else:
            data = "harder prompts (the model always succeeds)"
        # a sampler colder than 1 gives a group the same answer: sampling at 1 is the fix that acts first
        temp = self.context.get("temperature")
        first = f"sample at temperature 1 (rollout.temperature is {temp}: a cold sampler repeats one answer); "
        first, warm = (first, ["rollout.temperature=1.0"]) if self._cold() else ("", [])
        if self.context.get("dynamic_sampling") or self.context.get("group_filter") == "gpg":
            # GPG's filter resamples degenerate groups too: switching it for DAPO's would change the algorithm
            name = "dynamic sampling" if self.context.get("dynamic_sampling") else "GPG's group filter"
            fix = (
                f"{first}{name} is on and pays for this with extra generation rounds: a data mix with "
                f"{data} (grpokit preflight filters them), or a larger group size G"
            )
            return fix, warm
        # a filter keeps the groups with signal; with (almost) none it draws algo.max_gen_rounds and stops the run
        # (every dapo recipe on a model that fails every sample), so the data comes first there
        ds, mix = "DAPO dynamic sampling (algo.group_filter=dynamic_sampling)", f"a data mix with {data}"
        fix = first + (
            f"{mix} (grpokit preflight filters them), or a larger group size G: nearly every group has no signal, so "
            f"{ds} alone would find almost none to keep; with the data fixed it drops the rest"
            if ev["zero_variance_frac"] >= NEARLY_ALL
            else f"{ds} to drop degenerate groups; {mix} (grpokit preflight filters them); a larger group size G"
        )
        fix += unknown_config_note(self.context)
        # switched on mid-run, a filter that may not fill a batch must not end the run: short batches train instead
        partial = ["algo.ds_shortfall=partial"] if self.context.get("ds_shortfall") == "error" else []
        return fix, [*warm, *partial, "algo.group_filter=dynamic_sampling"]

    def _push_range(self, step: int, m: dict[str, Any]) -> str | None:
        """Without a zero-variance fraction: 1 for a step whose advantages are all exactly 0 (min = max = 0) or whose
        rewards are all equal (min = max), else 0 — a lower bound of the zero-variance fraction (a step with some
        varied groups says nothing of the others), so the rule can only under-report."""
        lo, hi = finite_at(m, mn.ADV_MIN), finite_at(m, mn.ADV_MAX)
        if math.isfinite(lo) and math.isfinite(hi):
            self.values.add(step, 1.0 if abs(lo) < 1e-8 and abs(hi) < 1e-8 else 0.0)
            return RANGE_SIGNAL
        lo, hi = finite_at(m, mn.REWARD_MIN), finite_at(m, mn.REWARD_MAX)
        if math.isfinite(lo) and math.isfinite(hi):
            self.values.add(step, 1.0 if hi - lo < 1e-8 else 0.0)
            return RANGE_SIGNAL
        return None


RANGE_SIGNAL = "adv/min=max"  # the zero-variance signal derived from the range of the step's advantages or rewards


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
    `ceiling`. A log that starts after an earlier collapse is judged the same way (it cannot show the fall)."""

    name, mode = "entropy_collapse", "entropy collapse"
    h_star, patience, rel_frac, baseline_steps, ceiling, acc_window = 0.5, 50, 0.1, 10, 0.9, 10
    # learning judged over the last `trend_window` steps: still learning when the reward's later half beats its
    # earlier half by `min_gain` and the latest zero-variance fraction is under `zv_stalled`
    trend_window, min_gain, zv_stalled = 20, 0.01, 0.5
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
        self.rewards = StepWindow(self.trend_window)
        self.zv_now = math.nan

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
        trend, tev = self._learning()
        ev.update(tev)
        fix, actions = self._fix(fell=tev.get("reward_later", 0.0) < tev.get("reward_earlier", 0.0) - self.min_gain)
        msg = f"token entropy {h:.3f} has been {why} for {n} steps"
        if trend == "learning":
            return self.new_alert(
                step,
                "info",
                msg + f", but reward is still rising ({tev['reward_earlier']:.3g} -> {tev['reward_later']:.3g}): "
                "low entropy, still learning: watch",
                ev,
                "nothing yet; if reward stops rising while entropy stays low, " + fix,
                onset=step - n + 1,
                mode="low entropy",
            )
        if trend == "stalled":
            msg += " and learning has stalled"
        return self.new_alert(step, "critical", msg, ev, fix, actions, onset=step - n + 1)

    def _learning(self) -> tuple[str, dict[str, Any]]:
        """'stalled', 'learning' or 'unknown' (no reward in the log), with the numbers that say so."""
        ev: dict[str, Any] = {}
        if math.isfinite(self.zv_now):
            ev["zero_variance_frac"] = round(self.zv_now, 3)
            if self.zv_now >= self.zv_stalled:
                return "stalled", ev  # the group's answers no longer differ: no learning signal is left
        r = self.rewards.values()
        if len(r) < 4:
            return "unknown", ev
        half = len(r) // 2
        early, late = statistics.fmean(r[:half]), statistics.fmean(r[half:])
        ev["reward_earlier"], ev["reward_later"] = round(early, 4), round(late, 4)
        return ("learning" if late > early + self.min_gain else "stalled"), ev

    def check(self, step: int, m: dict[str, Any]) -> tuple[bool, Alert | None]:
        self.range.update(m)
        reward = finite_at(m, mn.REWARD_MEAN)
        if math.isfinite(reward):
            self.rewards.add(step, reward)
        for k in (mn.ZV_ACC_FRAC, mn.ZV_FRAC, mn.ZV_SAMPLE_FRAC):
            if math.isfinite(finite_at(m, k)):
                self.zv_now = finite_at(m, k)
                break
        key, acc = accuracy_now(m, self.range.zero_one)
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
