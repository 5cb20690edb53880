"""The system's own signals in each trainer's names: phase times, peak memory and the sampler/learner probability
gap, mapped onto grpokit's canonical names (`metric_names`) for the system detectors (`detectors/system_*`).

grpokit's own rows already carry `time/generate`, `time/logprobs`, `time/forward`, `time/backward`,
`time/optimizer`, `time/rollout_wait` and `time/step`; these tables bring the other trainers' figures to the same
names."""

from __future__ import annotations

from ... import metric_names as mn

#: canonical names the system tables add (beside `time/step`, `time/generate`, `perf/tokens_per_s`, already mapped)
SYSTEM_CANONICAL: frozenset[str] = frozenset(
    {
        mn.TIME_UPDATE,
        mn.TIME_LOGPROBS,
        mn.TIME_REF,
        mn.TIME_ROLLOUT_WAIT,
        mn.PERF_MEM_ALLOCATED_GB,
        mn.PERF_MEM_RESERVED_GB,
        mn.PERF_MEM_CAPACITY_GB,
        mn.MISMATCH_PROBS_DIFF_MEAN,
        mn.MISMATCH_PROBS_DIFF_MAX,
    }
)

#: verl (`verl/trainer/ppo/ray_trainer.py` `marked_timer` names, `verl/utils/debug/performance.py`
#: `_get_current_mem_info`, `verl/utils/debug/metrics.py` `calculate_debug_metrics`)
VERL_SYSTEM_NAMES: dict[str, tuple[str, ...]] = {
    # seconds of the actor's update (`update_actor`), of the old-policy log-prob pass and of the reference pass
    "timing_s/update_actor": (mn.TIME_UPDATE,),
    "timing_s/old_log_prob": (mn.TIME_LOGPROBS,),
    "timing_s/ref": (mn.TIME_REF,),
    # torch.cuda.max_memory_allocated / max_memory_reserved in GB, measured after the update
    "perf/max_memory_allocated_gb": (mn.PERF_MEM_ALLOCATED_GB,),
    "perf/max_memory_reserved_gb": (mn.PERF_MEM_RESERVED_GB,),
    # |exp(rollout_logp) - exp(old_logp)| over response tokens: mean and max (the sampler vs the learner)
    "training/rollout_probs_diff_mean": (mn.MISMATCH_PROBS_DIFF_MEAN,),
    "training/rollout_probs_diff_max": (mn.MISMATCH_PROBS_DIFF_MAX,),
}

#: TRL (`AsyncGRPOTrainer`'s documented metrics; `GRPOTrainer` logs `step_time`, already mapped)
TRL_SYSTEM_NAMES: dict[str, tuple[str, ...]] = {
    # seconds the trainer sat blocked on an empty rollout queue: generation is the bottleneck when it grows
    "perf/rollout_wait_s": (mn.TIME_ROLLOUT_WAIT,),
}
