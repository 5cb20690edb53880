"""Where the time goes: a generation-bound or learner-bound verdict from the phase times a trainer logs (§17 of
docs/math.md lists the timing signals), with what to change in the trainer's own terms.

    gen share     = time/generate / time/step          (TRL async: time/rollout_wait / time/step)
    learner share = (time/update + time/logprobs + time/ref + time/forward + time/backward + time/optimizer)
                    / time/step

each averaged over the last `window` training steps. A share of at least `share` names the bottleneck (an `info`
verdict: not a failure, a place to spend effort); a run where neither dominates gets none."""

from __future__ import annotations

import math
import statistics
from typing import Any

from ... import metric_names as mn
from .base import Alert, Detector, register
from .rows import StepWindow, finite_at

#: the modes of this detector's verdicts: where the time goes, not failures (corpus scoring leaves them out)
TIME_VERDICTS = frozenset({"generation-bound", "learner-bound"})

LEARNER_PHASES = (
    mn.TIME_UPDATE,
    mn.TIME_LOGPROBS,
    mn.TIME_REF,
    mn.TIME_PREFIX + "forward",
    mn.TIME_PREFIX + "backward",
    mn.TIME_PREFIX + "optimizer",
)

GEN_FIX = (
    "generation is the bottleneck: TRL use_vllm=True (vllm_mode='colocate', vllm_enable_sleep_mode=True frees the "
    "cache for the update) or a lower max_completion_length; verl actor_rollout_ref.rollout.name=vllm|sglang with a "
    "higher rollout.gpu_memory_utilization, or a lower data.max_response_length; grpokit rollout.engine=vllm "
    "(rollout.vllm_sleep) or a lower rollout.max_new_tokens"
)
LEARNER_FIX = (
    "the update is the bottleneck: larger micro-batches with fewer accumulation steps (TRL "
    "per_device_train_batch_size up, gradient_accumulation_steps down; verl "
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu up or use_dynamic_bsz=True to pack sequences by "
    "ppo_max_token_len_per_gpu; grpokit train.micro_batch_size up), and no reference pass when beta=0"
)


def phase_shares(m: dict[str, Any]) -> tuple[float, float, str | None]:
    """(generation share, learner share, the generation key read) of one row; NaN where not logged."""
    total = finite_at(m, mn.TIME_STEP)
    if not math.isfinite(total) or total <= 0:
        return math.nan, math.nan, None
    gen_key = next((k for k in (mn.TIME_GENERATE, mn.TIME_ROLLOUT_WAIT) if math.isfinite(finite_at(m, k))), None)
    gen = finite_at(m, gen_key) / total if gen_key else math.nan
    parts = [v for k in LEARNER_PHASES if math.isfinite(v := finite_at(m, k))]
    learn = sum(parts) / total if parts else math.nan
    return gen, learn, gen_key


@register
class TimeSplit(Detector):
    """The phase that takes at least `share` of each step over the last `window` steps (module docstring)."""

    name, mode = "time_split", "generation-bound"
    share, window = 0.6, 10
    requires = ((mn.TIME_STEP,), (mn.TIME_GENERATE, mn.TIME_ROLLOUT_WAIT, *LEARNER_PHASES))

    def __init__(self, context: dict[str, Any] | None = None, **params: Any) -> None:
        super().__init__(context, **params)
        self.shares = StepWindow(self.window)
        self.gen_key: str | None = None

    def check(self, step: int, m: dict[str, Any]) -> tuple[bool, Alert | None]:
        gen, learn, key = phase_shares(m)
        if not (math.isfinite(gen) or math.isfinite(learn)):
            return self.active, None
        self.gen_key = key or self.gen_key
        self.shares.add(step, (gen, learn))
        if not self.shares.full():
            return self.active, None
        g = [x for x, _ in self.shares.values() if math.isfinite(x)]
        u = [y for _, y in self.shares.values() if math.isfinite(y)]
        g_mean = statistics.fmean(g) if g else math.nan
        u_mean = statistics.fmean(u) if u else math.nan
        ev = {
            "generation_share": round(g_mean, 3) if g else None,
            "learner_share": round(u_mean, 3) if u else None,
            "generation_key": self.gen_key,
            "steps": len(self.shares),
        }
        if g and g_mean >= self.share:
            what = "waits for rollouts" if self.gen_key == mn.TIME_ROLLOUT_WAIT else "is generation"
            msg = f"generation-bound: {g_mean:.0%} of each step {what} (last {len(self.shares)} logged steps)"
            return True, self.new_alert(step, "info", msg, ev, GEN_FIX, onset=self.shares.first_step())
        if u and u_mean >= self.share:
            msg = f"learner-bound: {u_mean:.0%} of each step is the update and its log-prob passes"
            onset = self.shares.first_step()
            return True, self.new_alert(step, "info", msg, ev, LEARNER_FIX, onset=onset, mode="learner-bound")
        return False, None
