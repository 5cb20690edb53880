"""KL estimators, placement and reference-model control (docs/math.md §16, §12, §2).

Per token delta = logp - ref_logp (log-ratio of the sampler/learner over the reference), clamped to +-20:
k1 = delta, k2 = delta^2 / 2, k3 = exp(-delta) + delta - 1 (clamped to <= 10 as verl), `k1+`/`k3+` keep the
value of k1/k3 with the k2 gradient (straight-through: k2 - sg(k2) + sg(k)).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import torch

from ..common.registry import Registry
from .masked import LOG_RATIO_CLAMP, masked_mean, masked_sum
from .registry import KL_ESTIMATORS


def _delta(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    return (logp - ref_logp.detach()).clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)


@KL_ESTIMATORS.register("k1", "kl")
def k1(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """k1 = logp - ref_logp: unbiased for KL(pi||ref), high variance; as a loss its expected gradient is 0."""
    return _delta(logp, ref_logp)


@KL_ESTIMATORS.register("k2", "mse")
def k2(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """k2 = delta^2/2: biased, >= 0; as a loss its expected gradient is grad KL(pi||ref) (reverse KL, §16)."""
    return 0.5 * _delta(logp, ref_logp) ** 2


@KL_ESTIMATORS.register("k3", "low_var_kl")
def k3(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """k3 = ref/pi - log(ref/pi) - 1 = exp(-delta) + delta - 1: unbiased, >= 0; as a loss its expected gradient
    is grad KL(ref||pi) (forward KL) — equal to the reverse-KL gradient only to first order (§16)."""
    d = _delta(logp, ref_logp)
    return (torch.exp(-d) + d - 1).clamp(max=10.0)


@KL_ESTIMATORS.register("k1+")
def k1_plus(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """Value of k1 with the k2 gradient (verl `k1+`)."""
    kk2 = k2(logp, ref_logp)
    return kk2 - kk2.detach() + k1(logp, ref_logp).detach()


@KL_ESTIMATORS.register("k3+")
def k3_plus(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """Value of k3 with the k2 gradient (verl `k3+`)."""
    kk2 = k2(logp, ref_logp)
    return kk2 - kk2.detach() + k3(logp, ref_logp).detach()


def kl_estimate(logp: torch.Tensor, ref_logp: torch.Tensor, kind: str = "k3") -> torch.Tensor:
    """Per-token KL estimate [N,T] of the chosen estimator (docs/math.md §16)."""
    return KL_ESTIMATORS.get(kind)(logp, ref_logp)


def kl_reward_penalty(old_logp: torch.Tensor, ref_logp: torch.Tensor, mask: torch.Tensor, beta: float) -> torch.Tensor:
    """KL in the reward (docs/math.md §16 placement): token rewards r_t -= beta * sg(k1(old, ref)); returns the [N,T]
    additive term -beta * k1 (zero at masked positions), to pass as `token_rewards` to GAE / REINFORCE++."""
    return -beta * k1(old_logp.detach(), ref_logp) * mask


def sequence_kl(old_logp: torch.Tensor, ref_logp: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """KL_i = sum_t m (old - ref) (k1; RLOO puts -beta KL_i into the sequence reward, §15.1)."""
    return masked_sum(k1(old_logp.detach(), ref_logp), mask, dim=1)


def centered_sequence_kl(
    old_logp: torch.Tensor,
    ref_logp: torch.Tensor,
    mask: torch.Tensor,
    group_ids: torch.Tensor | None = None,
    *,
    kl_center: str = "batch",
    kl_scale: str | None = None,
) -> torch.Tensor:
    """T1 on-policy KL normalisation (docs/math.md §12 [X]): KL_i - mean(KL) over the batch (or the group),
    optionally divided by the std. Total advantage A_i - beta * this.
    Parameters (docs/math.md §12 [X] defaults): kl_center "batch" ("group" centres per group), kl_scale None (off) or
    "std". Bound as the `kl_placement` component of a recipe with algo.kl_placement=reward_centered."""
    if kl_scale not in (None, "std"):
        raise ValueError(f"kl_scale={kl_scale!r} must be 'std' or None (docs/math.md §12)")
    kl = sequence_kl(old_logp, ref_logp, mask).to(torch.float64)
    if kl_center == "batch":
        centred = kl - kl.mean()
    elif kl_center == "group":
        from .masked import group_stats

        centred = kl - group_stats(kl, group_ids)[0]
    else:
        raise ValueError(f"kl_center={kl_center!r} must be 'batch' or 'group'")
    if kl_scale == "std" and kl.numel() > 1:
        centred = centred / (kl.std() + 1e-8)
    return centred.to(torch.float32)


@dataclass
class FixedKLController:
    """Constant KL coefficient beta."""

    value: float

    def update(self, current_kl: float, n_steps: int = 1) -> float:
        return self.value


@dataclass
class AdaptiveKLController:
    """Ziegler et al. adaptive coefficient (docs/math.md §2): beta *= 1 + clip(KL/target - 1, -0.2, 0.2) * n/horizon."""

    value: float
    target: float = 0.1
    horizon: float = 10000.0

    def update(self, current_kl: float, n_steps: int = 1) -> float:
        if current_kl == current_kl:  # skip NaN
            err = min(max(current_kl / self.target - 1.0, -0.2), 0.2)
            self.value *= 1.0 + err * n_steps / self.horizon
        return self.value


KL_CONTROLLERS = Registry.of("KL controller", {"fixed": FixedKLController, "adaptive": AdaptiveKLController})


@torch.no_grad()
def ema_update_(ref_params: Iterable[torch.Tensor], params: Iterable[torch.Tensor], eta: float) -> None:
    """EMA reference (T1 "dynamic anchor", docs/math.md §12 [X]): theta_ref <- eta theta_ref + (1 - eta) theta.
    eta = 0 copies the policy (periodic hard sync); TRL's TR-DPO `sync_ref_model` alpha equals 1 - eta."""
    if not 0.0 <= eta <= 1.0:
        raise ValueError(f"ema eta={eta} must lie in [0, 1]")
    for r, p in zip(ref_params, params, strict=True):
        r.mul_(eta).add_(p.detach().to(r.dtype), alpha=1.0 - eta)


def kl_metrics(old_logp: torch.Tensor, ref_logp: torch.Tensor, mask: torch.Tensor, prefix: str = "kl") -> dict:
    """§17.3 signals: token-mean k1 and k3 of old vs ref, and the per-sequence total KL_seq = (1/N) sum_i sum_t."""
    if int(mask.sum()) == 0:
        nan = float("nan")
        return {f"{prefix}/k1": nan, f"{prefix}/k3": nan, f"{prefix}/seq": nan}
    d = k1(old_logp.detach(), ref_logp)
    return {
        f"{prefix}/k1": float(masked_mean(d, mask)),
        f"{prefix}/k3": float(masked_mean(k3(old_logp.detach(), ref_logp), mask)),
        f"{prefix}/seq": float(masked_sum(d, mask) / mask.shape[0]),
    }
