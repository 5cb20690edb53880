"""Memory headroom: the step at which the peak memory a run logs reaches the card's capacity, forecast from its
growth, and an out-of-memory error at a log's end explained with the same arithmetic.

Over the last `window` training steps (at least 3 logged rows), with m the peak allocated memory (verl
`perf/max_memory_allocated_gb`, reserved where allocated is not logged) and s its least-squares slope in GB per
step (docs/math.md §17, the trend rules):

    steps left = (capacity - m_now) / s     (s > `min_slope`; m grew by `min_rise` GB, half of it in the window's
                                             second half: a peak that jumped once early and then held is not growth)

A forecast within `horizon` steps is a warning, within `critical_steps` (or m_now >= 95% of capacity) critical.
The capacity is the log's `perf/mem_capacity_gb`, else context `gpu_memory_gb`, else an assumption stated in the
evidence: the smallest common card size at least as large as the most memory the log shows (`CARD_SIZES_GB`)."""

from __future__ import annotations

import math
from typing import Any

from ... import metric_names as mn
from .base import Alert, Detector, register
from .rows import StepWindow, finite_at, first_logged, slope

CARD_SIZES_GB = (16.0, 24.0, 32.0, 40.0, 48.0, 80.0, 94.0, 96.0, 141.0, 180.0, 192.0, 288.0)
MEM_KEYS = (mn.PERF_MEM_ALLOCATED_GB, mn.PERF_MEM_RESERVED_GB)
FIX = (
    "lower the peak before it reaches the card: verl actor_rollout_ref.actor.use_dynamic_bsz=True with a lower "
    "ppo_max_token_len_per_gpu (or a lower ppo_micro_batch_size_per_gpu), model.enable_gradient_checkpointing=True, "
    "actor.fsdp_config.param_offload / optimizer_offload, a lower rollout.gpu_memory_utilization or "
    "data.max_response_length; TRL gradient_checkpointing=True, a lower per_device_train_batch_size or "
    "max_completion_length, vllm_gpu_memory_utilization down; grpokit train.micro_batch_size or "
    "rollout.max_new_tokens down"
)


def assumed_capacity(most_gb: float) -> float:
    """The smallest common card size that holds `most_gb` (the largest if none does)."""
    return next((c for c in CARD_SIZES_GB if c >= most_gb), CARD_SIZES_GB[-1])


def headroom_forecast(steps: list[int], mem: list[float], capacity: float) -> dict[str, Any]:
    """Slope (GB per step) of `mem` over `steps` and the step it reaches `capacity` (None when not growing)."""
    if len(steps) < 2 or steps[-1] == steps[0]:
        return {"slope_gb_per_step": 0.0, "reaches_capacity_at": None}
    per_row = slope(mem)
    per_step = per_row * (len(steps) - 1) / (steps[-1] - steps[0])
    out: dict[str, Any] = {"slope_gb_per_step": round(per_step, 4), "reaches_capacity_at": None}
    if per_step > 0:
        out["reaches_capacity_at"] = steps[-1] + max(0, math.ceil((capacity - mem[-1]) / per_step))
    return out


def explain_oom(rows: list[dict[str, Any]], capacity_gb: float | None = None, window: int = 10) -> str | None:
    """One line saying, with the memory arithmetic, why a run whose log ends in an out-of-memory error ran out:
    its last peak, its growth per step and the capacity. None when the log carries no memory figure."""
    pts = [(int(r["step"]), v) for r in rows if math.isfinite(v := first_logged(r, MEM_KEYS)[1])]
    if not pts:
        return None
    most = max(v for _, v in pts)
    reserved = [finite_at(r, mn.PERF_MEM_RESERVED_GB) for r in rows]
    most = max([most, *[v for v in reserved if math.isfinite(v)]])
    cap = capacity_gb if capacity_gb else assumed_capacity(most)
    tail = pts[-window:]
    fc = headroom_forecast([s for s, _ in tail], [v for _, v in tail], cap)
    step, last = pts[-1]
    known = "" if capacity_gb else " (assumed: the smallest common card that holds the log's peak)"
    grow = fc["slope_gb_per_step"]
    if grow > 0:
        at = fc["reaches_capacity_at"]
        why = (
            "the growth explains it"
            if at <= step + 1
            else f"the growth alone fills it only by then: a spike, or a smaller card than {cap:.0f} GB"
        )
        return (
            f"out of memory after step {step}: the peak was {last:.1f} GB of a {cap:.0f} GB card{known}, growing "
            f"{grow:.2f} GB per step over the last {len(tail)} logged steps: {cap - last:.1f} GB were left, full by "
            f"about step {at} ({why})"
        )
    return (
        f"out of memory after step {step}: the peak was {last:.1f} GB of a {cap:.0f} GB card{known} and not growing; "
        f"the step that failed needed {cap - last:.1f} GB more than any logged one (a longer batch or a spike)"
    )


@register
class MemoryHeadroom(Detector):
    """Peak memory growing towards the card's capacity (module docstring)."""

    name, mode = "memory_headroom", "memory headroom"
    window, horizon, critical_steps, min_slope, min_rise = 10, 100, 10, 0.01, 1.0
    requires = (MEM_KEYS,)

    def __init__(self, context: dict[str, Any] | None = None, **params: Any) -> None:
        super().__init__(context, **params)
        self.mem = StepWindow(self.window)
        self.most = 0.0
        self.rows: list[tuple[int, float]] = []  # the window's rows, at least 3 (a sparse log's window holds one)

    def capacity(self, m: dict[str, Any]) -> tuple[float, str]:
        logged = finite_at(m, mn.PERF_MEM_CAPACITY_GB)
        if math.isfinite(logged) and logged > 0:
            return logged, "logged"
        ctx = self.context.get("gpu_memory_gb")
        if isinstance(ctx, (int, float)) and ctx > 0:
            return float(ctx), "config"
        return assumed_capacity(self.most), "assumed: the smallest common card that holds the log's peak"

    def check(self, step: int, m: dict[str, Any]) -> tuple[bool, Alert | None]:
        key, v = first_logged(m, MEM_KEYS)
        if key is None:
            return self.active, None
        self.most = max(self.most, v, finite_at(m, mn.PERF_MEM_RESERVED_GB) if key != mn.PERF_MEM_RESERVED_GB else v)
        self.mem.add(step, v)
        self.rows = [*[p for p in self.rows if p[0] < step], (step, v)][-max(3, len(self.mem)) :]
        if not self.mem.full() or len(self.rows) < 3:
            return self.active, None
        steps, vals = [s for s, _ in self.rows], [x for _, x in self.rows]
        cap, how = self.capacity(m)
        fc = headroom_forecast(steps, vals, cap)
        rise = vals[-1] - min(vals)
        at = fc["reaches_capacity_at"]
        near = vals[-1] >= 0.95 * cap
        half = vals[len(vals) // 2 :]  # still growing in the window's second half, not one early jump
        growing = fc["slope_gb_per_step"] > self.min_slope and rise >= self.min_rise
        growing = growing and half[-1] - half[0] >= self.min_rise / 2
        if not (near or (growing and at is not None and at - step <= self.horizon)):
            return False, None
        left = None if at is None else at - step
        critical = near or (left is not None and left <= self.critical_steps)
        ev = {"memory_gb": round(vals[-1], 2), "signal": key, "capacity_gb": cap, "capacity": how, **fc}
        ev["steps_left"] = left
        msg = (
            f"peak memory {vals[-1]:.1f} GB of {cap:.0f} GB, growing {fc['slope_gb_per_step']:.2f} GB/step: "
            f"it reaches the card at about step {at}"
            if at is not None and growing
            else f"peak memory {vals[-1]:.1f} GB is within 5% of the {cap:.0f} GB card"
        )
        return True, self.new_alert(step, "critical" if critical else "warning", msg, ev, FIX)


def oom_findings(notes: list[str], rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A doctor finding for a log that ends in an out-of-memory error (a reader's note): `explain_oom`'s line."""
    if not any("out of memory" in n.lower() or "outofmemory" in n.lower() for n in notes):
        return []
    line = explain_oom(rows)
    return [{"kind": "out_of_memory", "severity": "warning", "message": line}] if line else []
