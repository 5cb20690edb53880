"""Failure-mode detectors over the per-step signals of spec §17 (canonical metric names, see `signals.py`).

Each detector is one small class with documented, configurable thresholds. Fed one metrics row per step, it
returns an `Alert` when its failure mode starts (with the step it started at, the numbers that show it, a
severity and the fix named after the seed technique that addresses it), and stays quiet while the mode persists.
A detector whose inputs a log lacks reports them as not measurable; nothing is guessed.
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
    """A failure mode that started at `step` (onset) and was confirmed at `fired_at`."""

    mode: str
    detector: str
    step: int
    fired_at: int
    severity: str
    message: str
    evidence: dict[str, Any]
    fix: str
    actions: list[str] = field(default_factory=list)  # config changes autopilot may apply (key=value)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _num(m: dict[str, Any], key: str) -> float:
    v = m.get(key)
    try:
        f = float(v)
    except (TypeError, ValueError):
        return math.nan
    return f


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


class Detector:
    """Base: `observe(step, metrics)` -> Alert | None. Subclasses implement `check`."""

    name = "detector"
    mode = "unknown"
    requires: tuple[tuple[str, ...], ...] = ()  # each inner tuple: alternatives, one of which must be logged

    def __init__(self, context: dict[str, Any] | None = None, **params: Any) -> None:
        self.context = context or {}
        for k, v in params.items():
            if not hasattr(self, k):
                raise ValueError(f"detector {self.name} has no threshold {k!r}")
            setattr(self, k, v)
        self.active = False
        self.onset: int | None = None

    def missing(self, available: set[str]) -> list[str]:
        """Required signals absent from a log (each entry lists its alternatives)."""
        return [" or ".join(alts) for alts in self.requires if not any(a in available for a in alts)]

    def check(self, step: int, m: dict[str, Any]) -> tuple[bool, Alert | None]:
        """Return (condition holds now, alert to emit if it just started)."""
        raise NotImplementedError

    cooldown = 10  # steps after a mode clears before the same detector may alert again (no alert spam)

    def observe(self, step: int, m: dict[str, Any]) -> Alert | None:
        holds, alert = self.check(step, m)
        if holds and not self.active:
            self.active = True
            last = getattr(self, "_cleared_at", None)
            if last is not None and step - last <= self.cooldown:
                return None
            return alert
        if not holds and self.active:
            self.active = False
            self._cleared_at = step
        return None


class Windowed(Detector):
    """Keeps the last `window` values of one signal (the first available of `keys`)."""

    window = 5
    keys: tuple[str, ...] = ()

    def __init__(self, context: dict[str, Any] | None = None, **params: Any) -> None:
        super().__init__(context, **params)
        self.values: deque[tuple[int, float]] = deque(maxlen=self.window)

    def push(self, step: int, m: dict[str, Any]) -> str | None:
        key, v = _first(m, self.keys)
        if key is not None:
            self.values.append((step, v))
        return key

    def full(self) -> bool:
        return len(self.values) == self.window

    def mean(self) -> float:
        return statistics.fmean(v for _, v in self.values)


DETECTORS: dict[str, type[Detector]] = {}


def register(cls: type[Detector]) -> type[Detector]:
    DETECTORS[cls.name] = cls
    return cls


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
        self.correct: deque[float] = deque(maxlen=self.window)
        self.wrong: deque[float] = deque(maxlen=self.window)

    def check(self, step: int, m: dict[str, Any]) -> tuple[bool, Alert | None]:
        key = self.push(step, m)
        if key is None:
            return self.active, None
        self.correct.append(_num(m, "zv/all_correct"))
        self.wrong.append(_num(m, "zv/all_wrong"))
        if not self.full() or self.mean() < self.threshold:
            return False, None
        zv = self.mean()
        ev: dict[str, Any] = {"zero_variance_frac": round(zv, 3), "signal": key, "window": self.window}
        c = [x for x in self.correct if math.isfinite(x)]
        w = [x for x in self.wrong if math.isfinite(x)]
        if c and w:
            ev["all_correct_frac"] = round(statistics.fmean(c), 3)
            ev["all_wrong_frac"] = round(statistics.fmean(w), 3)
        ev["wasted_compute"] = f"~{zv:.0%} of sampled groups give no gradient"
        hard = ev.get("all_wrong_frac", 0) >= ev.get("all_correct_frac", 0)
        data = "easier prompts (the model fails every sample)" if hard else "harder prompts (the model always succeeds)"
        if self.context.get("dynamic_sampling"):
            fix = (
                f"dynamic sampling is on and pays for this with extra generation rounds: a data mix with {data} "
                "(grpokit preflight filters them), or a larger group size G"
            )
        else:
            fix = (
                f"DAPO dynamic sampling (algo.dynamic_sampling=true) to drop degenerate groups; a data mix with "
                f"{data} (grpokit preflight filters them); a larger group size G"
            )
        actions = [] if self.context.get("dynamic_sampling") else ["algo.dynamic_sampling=true"]
        sev = "critical" if zv >= self.critical else "warning"
        return True, Alert(
            self.mode,
            self.name,
            self.values[0][0],
            step,
            sev,
            f"{zv:.0%} of groups have zero {'accuracy' if key == 'zv/acc_frac' else 'reward'} variance over the last "
            f"{self.window} steps",
            ev,
            fix,
            actions,
        )


@register
class EntropyCollapse(Detector):
    """§17.7: mean token entropy strictly below `h_star` nats for more than `patience` consecutive steps
    (NaN resets the counter and raises an 'entropy metric missing' alert); relative variant: below
    `rel_frac` x the mean of the first `baseline_steps` steps for more than `patience` steps."""

    name, mode = "entropy_collapse", "entropy collapse"
    h_star, patience, rel_frac, baseline_steps = 0.5, 50, 0.1, 10
    requires = (("entropy/token_mean",),)

    def __init__(self, context: dict[str, Any] | None = None, **params: Any) -> None:
        super().__init__(context, **params)
        self.count = self.rel_count = 0
        self.baseline: list[float] = []
        self.missing_reported = False

    def check(self, step: int, m: dict[str, Any]) -> tuple[bool, Alert | None]:
        if "entropy/token_mean" not in m:
            return self.active, None
        h = _num(m, "entropy/token_mean")
        if not math.isfinite(h):
            self.count = self.rel_count = 0
            return False, None
        if len(self.baseline) < self.baseline_steps:
            self.baseline.append(h)
        self.count = self.count + 1 if h < self.h_star else 0
        base = statistics.fmean(self.baseline) if self.baseline else math.nan
        rel = len(self.baseline) >= self.baseline_steps and h < self.rel_frac * base
        self.rel_count = self.rel_count + 1 if rel else 0
        if self.count > self.patience or self.rel_count > self.patience:
            absolute = self.count > self.patience
            n = self.count if absolute else self.rel_count
            ev = {
                "entropy": round(h, 4),
                "steps_below": n,
                "threshold": self.h_star if absolute else round(self.rel_frac * base, 4),
                "initial_entropy": round(base, 4),
            }
            why = f"below {self.h_star} nats" if absolute else f"below {self.rel_frac:.0%} of its initial {base:.2f}"
            fix = (
                "clip-higher (algo.eps_high=0.28), an entropy bonus (algo.entropy_coef), a higher sampling "
                "temperature; Clip-Cov / KL-Cov for long runs"
            )
            actions = ["algo.eps_high+=0.04", "algo.entropy_coef+=0.001"]
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
        return False, None

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
    """KL to the reference (§17.3): above `kl_max`, or growing without bound (slope > 0 over `window` steps and
    the last value > `growth` x the first and > `kl_floor`). Opposite failure: with a KL penalty on, the penalty
    term exceeds the policy-gradient term while reward stalls (slope <= 0) for `window` steps."""

    name, mode = "kl_drift", "KL drift"
    kl_max, growth, kl_floor, window = 0.5, 3.0, 0.01, 10
    keys = ("kl_ref/k3", "kl_ref/k1", "actor/kl_loss")
    requires = (keys,)

    def __init__(self, context: dict[str, Any] | None = None, **params: Any) -> None:
        super().__init__(context, **params)
        self.rewards: deque[float] = deque(maxlen=self.window)
        self.dominates: deque[bool] = deque(maxlen=self.window)

    def check(self, step: int, m: dict[str, Any]) -> tuple[bool, Alert | None]:
        key = self.push(step, m)
        r = _num(m, "reward/mean")
        if math.isfinite(r):
            self.rewards.append(r)
        coef, kl_loss, pg = _num(m, "kl/coef"), _num(m, "actor/kl_loss"), _num(m, "actor/pg_loss")
        # the policy-gradient term's scale: mean |advantage| when logged (the value of a group-normalised surrogate
        # is ~0 on-policy whatever its gradient), else |pg loss|
        pg_scale = _num(m, "adv/abs_mean")
        if not math.isfinite(pg_scale):
            pg_scale = abs(pg)
        if math.isfinite(coef) and math.isfinite(kl_loss) and math.isfinite(pg_scale):
            self.dominates.append(coef * kl_loss > pg_scale and coef > 0)
        if key is None:
            return self.active, None
        vals = [v for _, v in self.values]
        last = vals[-1]
        fix = (
            "decoupled KL (no KL in the reward; algo.kl_placement=loss), an adaptive coefficient "
            "(algo.kl_controller=adaptive), an EMA reference (algo.reference=ema)"
        )
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
                ["algo.kl_controller=adaptive"],
            )
        if (
            self.full()
            and _slope(vals) > 0
            and last > self.growth * max(vals[0], self.kl_floor)
            and last > self.kl_floor
        ):
            return True, Alert(
                self.mode,
                self.name,
                self.values[0][0],
                step,
                "warning",
                f"KL to the reference grew {last / max(vals[0], self.kl_floor):.1f}x in {self.window} steps",
                {"kl_first": round(vals[0], 5), "kl_last": round(last, 5), "signal": key},
                fix,
                ["algo.kl_controller=adaptive"],
            )
        if (
            len(self.dominates) == self.window
            and all(self.dominates)
            and len(self.rewards) == self.window
            and (_slope(list(self.rewards)) <= 0)
        ):
            return True, Alert(
                self.mode,
                self.name,
                step - self.window + 1,
                step,
                "warning",
                "the KL penalty outweighs the policy gradient and reward has stalled",
                {"kl_coef": coef, "kl_loss": round(kl_loss, 5), "pg_scale": round(pg_scale, 5)},
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
        self.ratios: deque[float] = deque(maxlen=self.window)

    def check(self, step: int, m: dict[str, Any]) -> tuple[bool, Alert | None]:
        self.push(step, m)
        inc, cor = _num(m, "length/incorrect_mean"), _num(m, "length/correct_mean")
        self.ratios.append(inc / cor if math.isfinite(inc) and math.isfinite(cor) and cor > 0 else math.nan)
        sustained = len(self.ratios) == self.window and all(r > self.ratio for r in self.ratios)
        mean, acc = _num(m, "length/mean"), _num(m, "reward/accuracy")
        fix = (
            "token-level aggregation (algo.loss_agg=token-mean), Dr. GRPO normalisation "
            "(algo.loss_agg=constant-norm, algo.adv_scale=none), overlong shaping (algo.soft_overlong=true)"
        )
        if self.full() and sustained and _slope([v for _, v in self.values]) > 0:
            return True, Alert(
                self.mode,
                self.name,
                self.values[0][0],
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
        vals = [v for _, v in self.values]
        if self.mean() >= self.threshold and vals[-1] >= vals[0]:
            return True, Alert(
                self.mode,
                self.name,
                self.values[0][0],
                step,
                "warning",
                f"{self.mean():.0%} of responses hit the length limit",
                {"truncation_rate": round(self.mean(), 3)},
                "overlong filtering (algo.overlong_filter=true) or soft overlong punishment "
                "(algo.soft_overlong=true), or a larger rollout.max_new_tokens",
                ["algo.soft_overlong=true"],
            )
        return False, None


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
        self.totals: deque[float] = deque(maxlen=self.window)

    def check(self, step: int, m: dict[str, Any]) -> tuple[bool, Alert | None]:
        self.push(step, m)
        tot = _num(m, "actor/clipfrac")
        if not math.isfinite(tot):
            tot = sum(v for v in (_num(m, "actor/clipfrac_high"), _num(m, "actor/clipfrac_low")) if math.isfinite(v))
        self.totals.append(tot)
        if len(self.totals) < self.window:
            return self.active, None
        ctx = self.context
        if ctx.get("policy_loss") not in self.CLIPS_BY_DESIGN and statistics.fmean(self.totals) > self.high:
            return True, Alert(
                self.mode,
                self.name,
                step - self.window + 1,
                step,
                "warning",
                f"{statistics.fmean(self.totals):.0%} of tokens are clipped: most of each update is thrown away",
                {"clip_frac": round(statistics.fmean(self.totals), 3)},
                "a lower learning rate (train.lr) or fewer epochs per batch",
                ["train.lr*=0.5"],
            )
        off_policy = ctx.get("epochs", 1) * ctx.get("mini_batches", 1) > 1
        clip_higher = (ctx.get("eps_high") or 0) > (ctx.get("eps_low") or 0)
        highs = [v for _, v in self.values if self.values]
        if off_policy and clip_higher and len(highs) == self.window and max(highs) == 0.0:
            return True, Alert(
                self.mode,
                self.name,
                step - self.window + 1,
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
        self.push(step, m)
        frac, amax = _num(m, "mismatch/frac_high"), _num(m, "mismatch/abs_diff_max")
        bad = (
            (self.full() and self.mean() > self.kl_max)
            or (math.isfinite(frac) and frac > self.frac_max)
            or (math.isfinite(amax) and amax > self.abs_max)
        )
        if not bad:
            return False, None
        ev = {
            "mismatch_kl": round(self.mean(), 6) if self.values else None,
            "frac_rho_above_C": frac,
            "abs_logp_diff_max": amax,
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
        self.components: dict[str, deque[float]] = {}

    def check(self, step: int, m: dict[str, Any]) -> tuple[bool, Alert | None]:
        self.push(step, m)
        for key in [k for k in m if k.startswith("reward/corr/")]:
            v = _num(m, key)
            if math.isfinite(v):
                self.components.setdefault(key, deque(maxlen=self.window)).append(v)
        dup = _num(m, "reward/dup_inconsistency")
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
        if self.full() and abs(self.mean()) > self.corr_max:
            acc_corr = _num(m, "reward/acc_corr")
            if not math.isfinite(acc_corr) or abs(acc_corr) < abs(self.mean()):
                return True, Alert(
                    self.mode,
                    self.name,
                    self.values[0][0],
                    step,
                    "warning",
                    f"reward correlates with response length (r = {self.mean():.2f}) more than with correctness",
                    {"length_corr": round(self.mean(), 3), "acc_corr": acc_corr},
                    fix,
                    [],
                )
        acc_corr = _num(m, "reward/acc_corr")
        for key, vals in self.components.items():
            c = statistics.fmean(vals)
            if (
                len(vals) == self.window
                and abs(c) > self.corr_max
                and (not math.isfinite(acc_corr) or abs(acc_corr) < abs(c))
            ):
                name = key.removeprefix("reward/corr/")
                return True, Alert(
                    self.mode,
                    self.name,
                    step - self.window + 1,
                    step,
                    "warning",
                    f"reward follows its '{name}' component (r = {c:.2f}) more than correctness",
                    {f"corr_{name}": round(c, 3), "acc_corr": acc_corr},
                    fix + "; lower the weight of the non-correctness reward",
                    [],
                )
        return False, None


@register
class Numerical(Detector):
    """NaN/inf loss (`train/nonfinite_loss`), non-finite gradients (`train/nonfinite_grad`), or a gradient-norm spike
    above `spike` x the median of the previous `history` steps."""

    name, mode = "numerical", "numerical trouble"
    spike, history = 10.0, 20
    requires = (("train/grad_norm", "train/nonfinite_grad", "train/nonfinite_loss"),)

    def __init__(self, context: dict[str, Any] | None = None, **params: Any) -> None:
        super().__init__(context, **params)
        self.norms: deque[float] = deque(maxlen=self.history)

    def check(self, step: int, m: dict[str, Any]) -> tuple[bool, Alert | None]:
        # logs store a NaN loss as null (indistinguishable from "not logged"), so the trainer flags it explicitly
        if _num(m, "train/nonfinite_loss") > 0:
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
        if _num(m, "train/nonfinite_grad") > 0:
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
        if math.isfinite(g):
            if len(self.norms) >= 5 and g > self.spike * statistics.median(self.norms):
                med = statistics.median(self.norms)
                self.norms.append(g)
                return True, Alert(
                    self.mode,
                    self.name,
                    step,
                    step,
                    "warning",
                    f"gradient norm {g:.3g} is {g / med:.0f}x its recent median",
                    {"grad_norm": g, "median": med},
                    "lower the learning rate (train.lr) or tighten train.max_grad_norm",
                    ["train.lr*=0.5"],
                )
            self.norms.append(g)
        return False, None


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

    def observe(self, step: int, metrics: dict[str, Any]) -> list[Alert]:
        new = [a for d in self.detectors if (a := d.observe(step, metrics)) is not None]
        self.alerts.extend(new)
        return new

    def active(self) -> list[str]:
        return [d.mode for d in self.detectors if d.active]

    def not_measurable(self, available: set[str]) -> dict[str, list[str]]:
        return {d.name: miss for d in self.detectors if (miss := d.missing(available))}


def rank(alerts: list[Alert]) -> list[Alert]:
    """Most severe first, then earliest onset."""
    return sorted(alerts, key=lambda a: (SEVERITY_RANK.get(a.severity, 9), a.step))
