"""The estimated seconds of one training step, from parts timed the way a step runs them.

- generation: the mean seconds of a training-shaped round (`rollout.prompts_per_step` prompts x G per engine
  call, see `sampling.py`) times the expected rounds (dynamic sampling refills zero-variance groups:
  1 / (1 - P(zv)), capped at `algo.max_gen_rounds`);
- scoring: per sample, times the samples of those rounds;
- no-grad log-prob passes (pi_old when the update is off-policy or needs it, pi_ref): per sample;
- the update: one forward+backward of a `train.micro_batch_size` micro-batch, per sample, times the step's
  samples and `train.ppo_epochs`; plus the optimizer step (AdamW, timed on its second call: the first allocates
  its state) once per mini-batch and epoch.

Everything runs in the session's device and resolved precision, which the report records with the torch thread
count and how much of those threads this process actually got (`cpu_share` = CPU seconds / (wall seconds x
threads)): a share well below 1 means another job competed for the cores and the estimate is pessimistic.
"""

from __future__ import annotations

import math
import os
import time
from typing import Any

import torch

BUSY_SHARE = 0.6  # below this CPU share the machine was busy with another job during the measurement


def forward_rows(
    session: Any, out: Any, idx: torch.Tensor | slice
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """`completion_forward` (log-probs, entropies, None) of the rows `idx` of the rollout `out` with the session's
    model, under its autocast, at the sampling temperature."""
    from ..models.forward import completion_forward

    with session.autocast():
        return completion_forward(
            session.model,
            out.prompt_ids[idx],
            out.prompt_mask[idx],
            out.completion_ids[idx],
            out.completion_mask[idx],
            temperature=session.cfg.rollout.temperature,
            top_k=session.cfg.rollout.top_k,
            top_p=session.cfg.rollout.top_p,
        )


def _fwd_bwd(session: Any, out: Any, idx: torch.Tensor) -> float:
    t0 = time.perf_counter()
    logp, _, _ = forward_rows(session, out, idx)
    mask = out.completion_mask[idx].to(logp.device).float()
    loss = -(logp.float() * mask).sum() / mask.sum().clamp(min=1)
    loss.backward()
    return time.perf_counter() - t0


def time_update(session: Any, out: Any) -> dict[str, float]:
    """Seconds of one forward+backward of a training-shaped micro-batch (the first `train.micro_batch_size`
    samples, at most one step's batch: whole groups, as in training; after a 2-sample warm-up that pays one-off
    allocations), its size, and the seconds of one AdamW step over the trainable parameters (lr 0: the weights
    stay as they are)."""
    model = session.model
    r = session.cfg.rollout
    n = min(session.cfg.train.micro_batch_size, r.prompts_per_step * r.group_size, out.completion_ids.shape[0])
    model.train()
    _fwd_bwd(session, out, torch.arange(min(2, n)))
    model.zero_grad(set_to_none=True)
    fwd_bwd = _fwd_bwd(session, out, torch.arange(n))
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=0.0, weight_decay=0.0)
    opt.step()  # allocates the moment buffers (a training run pays this once)
    t0 = time.perf_counter()
    opt.step()
    optimizer = time.perf_counter() - t0
    model.zero_grad(set_to_none=True)
    del opt
    return {"fwd_bwd": fwd_bwd, "fwd_bwd_n": float(n), "optimizer": optimizer}


def _forward_passes(cfg: Any) -> int:
    a, tr = cfg.algo, cfg.train
    on_policy = tr.ppo_epochs == 1 and tr.mini_batches == 1
    need_old = (
        (not on_policy)
        or a.top_entropy_rho is not None
        or a.uses_critic
        or (a.kl_placement != "loss" and a.kl_coef > 0)
    )
    return int(need_old) + int(a.needs_reference)


def step_cost(cfg: Any, t: dict[str, Any], n_sampled: int, zv: float) -> dict[str, Any]:
    """The estimate from the timed parts `t` (round seconds, score, forward, fwd_bwd, optimizer)."""
    a, r, tr = cfg.algo, cfg.rollout, cfg.train
    n_step = r.prompts_per_step * r.group_size
    rounds = 1.0
    if a.dynamic_sampling and math.isfinite(zv):  # refill rounds to replace zero-variance groups
        rounds = min(float(a.max_gen_rounds), 1.0 / max(1e-9, 1.0 - zv))
    round_s = t["rounds"][1:] or t["rounds"]  # the first engine call pays one-off warm-up costs
    passes = _forward_passes(cfg)
    parts = {
        "generate": sum(round_s) / len(round_s) * rounds,
        "score": t["score"] / n_sampled * n_step * rounds,
        "logprob_passes": passes * t["forward"] / n_sampled * n_step,
        "update": t["fwd_bwd"] / t["fwd_bwd_n"] * n_step * tr.ppo_epochs,
        "optimizer": t["optimizer"] * tr.mini_batches * tr.ppo_epochs,
    }
    return {
        "samples_per_step": n_step,
        "expected_generation_rounds": rounds,
        "forward_only_passes": passes,
        "seconds": parts,
        "seconds_per_step": sum(parts.values()),
    }


class MachineClock:
    """Wall and process CPU seconds over the measurement, and the load average when it started."""

    def __init__(self) -> None:
        self.wall0, self.cpu0 = time.perf_counter(), time.process_time()
        self.load_before = os.getloadavg()[0] if hasattr(os, "getloadavg") else math.nan

    def summary(self, session: Any) -> dict[str, Any]:
        """Device, precision, threads and the CPU share this process got (see the module docstring)."""
        wall = time.perf_counter() - self.wall0
        cpu = time.process_time() - self.cpu0
        threads = torch.get_num_threads()
        on_cpu = str(session.device).startswith("cpu")
        share = cpu / max(wall * threads, 1e-9) if on_cpu else math.nan
        busy = on_cpu and share < BUSY_SHARE
        asked = session.cfg.model.precision
        return {
            "device": str(session.device),
            "precision": session.precision.name,
            "precision_asked": asked,
            "torch_threads": threads,
            "cpu_share": share,
            "load_before": self.load_before,
            "busy": busy,
            "note": _note(session.precision.name, asked, share, busy),
        }


def _note(precision: str, asked: str, share: float, busy: bool) -> str:
    parts = [f"measured in {precision}"]
    if asked == "auto":
        parts.append(
            f"training resolves model.precision=auto again: add --set model.precision={precision} to train in it"
        )
    if busy:
        parts.append(
            f"the machine was busy (this process got {share:.0%} of its threads): another job competed for the "
            "cores, so this estimate is too high; re-run preflight when nothing else runs"
        )
    return "; ".join(parts)
