"""Sampler != learner after a weight sync: the mismatch signal jumping above its own history. A failed or partial
weight sync leaves the sampler serving other weights than the learner's; the gap between their log-probs then
jumps and stays (docs/math.md §17.6 defines the mismatch statistics).

    base = median of the signal over the `baseline` logged rows before the jump
    jump = value > `ratio` * base and value > `floor[signal]`, for `patience` logged rows in a row

The signal is the first logged of the mismatch KL (k3, k1), the mean |log-prob difference| (TRL
`sampling/sampling_logp_difference/mean`) and verl's mean |probability difference|
(`training/rollout_probs_diff_mean`). A sampler that syncs every step (TRL and verl colocated, grpokit on-policy)
has each row right after a sync; with context `weight_sync_steps` N > 1 the jump must start within one step after
a multiple of N (a jump elsewhere is drift, which `sampler_mismatch` judges by level)."""

from __future__ import annotations

import math
import statistics
from typing import Any

from ... import metric_names as mn
from .base import Alert, Detector, register
from .rows import first_logged

SIGNALS = (mn.MISMATCH_KL_K3, mn.MISMATCH_KL_K1, mn.MISMATCH_ABS_DIFF_MEAN, mn.MISMATCH_PROBS_DIFF_MEAN)
FLOORS = {mn.MISMATCH_KL_K3: 1e-3, mn.MISMATCH_KL_K1: 1e-3, mn.MISMATCH_ABS_DIFF_MEAN: 0.05}
FIX = (
    "the sampler is not serving the trained weights: check the weight sync (TRL vllm_mode='server': the vLLM "
    "server's log for a failed update, weight_sync_steps; verl: the rollout's load_format and the sharding "
    "manager's sync, rollout.free_cache_engine; grpokit: rollout.engine's weight refresh), and until then correct "
    "the update with truncated importance sampling (algo.is_correction=token_truncate)"
)


@register
class SyncMismatchJump(Detector):
    """The mismatch signal jumping `ratio` times above its recent median right after a weight sync."""

    name, mode = "sync_mismatch", "sampler != learner after sync"
    baseline, ratio, patience, critical_ratio, default_floor = 10, 5.0, 2, 20.0, 0.01
    requires = (SIGNALS,)

    def __init__(self, context: dict[str, Any] | None = None, **params: Any) -> None:
        super().__init__(context, **params)
        self.history: list[float] = []
        self.key: str | None = None
        self.jumped: list[int] = []

    @property
    def min_steps(self) -> int:
        return 3 + self.patience

    def after_sync(self, step: int) -> bool:
        n = self.context.get("weight_sync_steps")
        return not (isinstance(n, int) and n > 1) or step % n in (0, 1)

    def check(self, step: int, m: dict[str, Any]) -> tuple[bool, Alert | None]:
        key, v = first_logged(m, (self.key,) if self.key else SIGNALS)
        if key is None:
            return self.active, None
        self.key, v = key, abs(v)
        if len(self.history) < 3:
            self.history.append(v)
            return self.active, None
        base = statistics.median(self.history[-self.baseline :])
        floor = FLOORS.get(key, self.default_floor)
        high = v > floor and v > self.ratio * max(base, 1e-12)
        if not high or (not self.jumped and not self.after_sync(step)):
            self.jumped = []
            self.history.append(v)
            return False, None
        self.jumped.append(step)  # the baseline stays the one before the jump
        if len(self.jumped) < self.patience:
            return self.active, None
        x = v / base if base > 0 else math.inf
        ev = {"signal": key, "value": v, "baseline_median": base, "ratio": round(x, 2) if math.isfinite(x) else None}
        ev["jump_at"] = self.jumped[0]
        msg = (
            f"the sampler no longer matches the learner: {key} jumped to {v:.3g} from a median of {base:.3g} at step "
            f"{self.jumped[0]} (after a weight sync) and stayed"
        )
        severity = "critical" if x >= self.critical_ratio else "warning"
        return True, self.new_alert(step, severity, msg, ev, FIX, onset=self.jumped[0])
