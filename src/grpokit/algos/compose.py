"""One composed entry point: batch tensors + an algorithm config -> loss and every metric.

A recipe names its pieces (advantage estimator, policy loss, aggregation, KL estimator, IS correction) and
their hyper-parameters in one flat `AlgoConfig`; `compute_loss` looks each piece up in its registry and passes
it the parameters its signature declares. Optional terms (KL loss, entropy bonus, value loss, positive-example
NLL, IS weights, top-entropy mask) are on when their coefficient or input is set. No method names are tested.

    L = Agg(w * e * l_pi) + beta Agg(k) - c_H Agg_tok(H) + c_v Agg(l_V) + mu L_NLL        (spec §2, §5, §11, §12)
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from .aggregate import Denominators, aggregate
from .correction import is_weights, mismatch_stats
from .kl import kl_estimate
from .masked import masked_mean, masked_sum
from .registry import ADVANTAGES, AGGREGATIONS, IS_CORRECTIONS, KL_ESTIMATORS, POLICY_LOSSES
from .value import value_loss


@dataclass
class AlgoConfig:
    """Every algorithmic switch of a recipe (flat, so `--set algo.eps_high=0.28` reaches any of them)."""

    # advantages (§3, §4, §6, §11, §15)
    advantage: str = "grpo"
    adv_scale: str = "group"
    adv_eps: float = 1e-6
    gamma: float = 1.0
    lam: float = 1.0
    lam_critic: float = 1.0
    gae_alpha: float = 0.05
    adv_whiten: bool = True
    gpg_std_norm: bool = False
    gpg_alpha_correction: bool = True
    gpg_threshold: float | None = None
    pass_k: int = 4
    # policy loss (§2, §5, §7, §8, §9, §14)
    policy_loss: str = "ppo_clip"
    eps_low: float = 0.2
    eps_high: float | None = None
    dual_clip_c: float | None = None
    delta: float | None = None
    clip_c: float = 0.4
    cispo_cap_mode: str = "relative"
    cispo_eps_low: float | None = None
    cispo_eps_high: float = 0.2
    cispo_cap: float = 5.0
    clip_cov_ratio: float = 2e-4
    clip_cov_lb: float = 1.0
    clip_cov_ub: float = 5.0
    kl_cov_ratio: float = 2e-4
    kl_cov_coef: float = 1.0
    top_entropy_rho: float | None = None
    # aggregation (§1.5)
    loss_agg: str = "token-mean"
    l_norm: float | None = None
    # KL (§16, §12)
    kl_coef: float = 0.0
    kl_estimator: str = "k3"
    kl_placement: str = "loss"  # loss | reward | reward_centered (T1)
    kl_controller: str = "fixed"  # fixed | adaptive
    kl_target: float = 0.1
    kl_horizon: float = 10000.0
    kl_center: str = "batch"
    reference: str = "frozen"  # none | frozen | ema | sync
    ref_ema_eta: float = 0.99
    ref_sync_every: int = 0
    # entropy (§12)
    entropy_coef: float = 0.0
    entropy_target: float | None = None
    entropy_coef_lr: float = 1e-3
    # sampler/learner correction (§10)
    is_correction: str | None = None
    is_c_max: float = 2.0
    is_c_min: float | None = None
    # DAPO shaping and filtering (§5)
    dynamic_sampling: bool = False
    filter_metric: str = "accuracy"
    max_gen_rounds: int = 10  # DAPO / verl max_num_gen_batches
    ds_oversample: float = 1.0  # prompts drawn per round = ceil(ds_oversample * prompts_per_step) (verl: 3)
    ds_shortfall: str = "error"  # batch not full after max_gen_rounds: "error" (spec §5, verl) | "partial" (opt-in)
    overlong_filter: bool = False
    soft_overlong: bool = False
    overlong_cache: float = 0.2  # tokens, or a fraction of max_new_tokens when < 1 (paper: 4096/20480 = 0.2)
    overlong_factor: float = 1.0
    # critic (§2, §11, §13)
    vf_coef: float = 0.0
    value_clip: float | None = 0.5
    value_pretrain_steps: int = 0
    critic_lr: float = 5e-6
    nll_coef: float = 0.0
    # reward given to truncated responses instead of their score (ORZ: 0, T1: -1); None keeps the score
    truncated_reward: float | None = None
    # extra free-form notes (paper, defaults) shown by `grpokit recipes show`
    notes: dict[str, Any] = field(default_factory=dict)

    @property
    def uses_critic(self) -> bool:
        return self.vf_coef > 0 or "gae" in self.advantage

    @property
    def needs_reference(self) -> bool:
        return self.reference != "none" and self.kl_coef > 0

    def validate(self) -> None:
        """Check every registry name and range; raise one ValueError naming the field, value and fix."""
        for name, reg in (
            ("advantage", ADVANTAGES),
            ("policy_loss", POLICY_LOSSES),
            ("loss_agg", AGGREGATIONS),
            ("kl_estimator", KL_ESTIMATORS),
        ):
            value = getattr(self, name)
            if value not in reg:
                try:
                    reg.get(value)
                except KeyError as e:
                    raise ValueError(f"algo.{name}: {e.args[0]}") from None
        if self.is_correction is not None and self.is_correction not in IS_CORRECTIONS:
            try:
                IS_CORRECTIONS.get(self.is_correction)
            except KeyError as e:
                raise ValueError(f"algo.is_correction: {e.args[0]}") from None
        choices = {
            "kl_placement": ("loss", "reward", "reward_centered"),
            "kl_controller": ("fixed", "adaptive"),
            "reference": ("none", "frozen", "ema", "sync"),
            "adv_scale": ("group", "batch", "none"),
            "filter_metric": ("accuracy", "reward"),
            "cispo_cap_mode": ("relative", "absolute"),
            "ds_shortfall": ("partial", "error"),
        }
        for name, allowed in choices.items():
            if getattr(self, name) not in allowed:
                raise ValueError(f"algo.{name}={getattr(self, name)!r} is not one of {allowed}")
        if self.loss_agg == "constant-norm" and not self.l_norm:
            raise ValueError("algo.l_norm must be set (e.g. to max_new_tokens) when algo.loss_agg=constant-norm")
        if self.dual_clip_c is not None and self.dual_clip_c <= 1:
            raise ValueError(f"algo.dual_clip_c={self.dual_clip_c} must be > 1 (spec §2), or null to disable")
        if self.top_entropy_rho is not None and not 0 <= self.top_entropy_rho <= 1:
            raise ValueError(f"algo.top_entropy_rho={self.top_entropy_rho} must lie in [0, 1]")
        if not 0 <= self.ref_ema_eta <= 1:
            raise ValueError(f"algo.ref_ema_eta={self.ref_ema_eta} must lie in [0, 1]")
        if self.max_gen_rounds < 1:
            raise ValueError(f"algo.max_gen_rounds={self.max_gen_rounds} must be >= 1")
        if self.ds_oversample < 1:
            raise ValueError(f"algo.ds_oversample={self.ds_oversample} must be >= 1 (a factor on prompts_per_step)")
        if self.eps_low < 0 or (self.eps_high is not None and self.eps_high < 0):
            raise ValueError("algo.eps_low / algo.eps_high must be >= 0")

    def params(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


def call_with_params(fn: Callable[..., Any], *args: Any, params: dict[str, Any], **extra: Any) -> Any:
    """Call `fn(*args, **kw)` with the entries of `params` that `fn`'s signature accepts (plus `extra`)."""
    sig = inspect.signature(fn).parameters
    kw = {k: v for k, v in params.items() if k in sig}
    kw.update({k: v for k, v in extra.items() if k in sig})
    return fn(*args, **kw)


def compute_advantages(cfg: AlgoConfig, rewards: torch.Tensor, group_ids: torch.Tensor, **inputs: Any) -> torch.Tensor:
    """Run the recipe's advantage estimator (registry lookup; `inputs` e.g. mask, values, token_rewards, valid)."""
    return call_with_params(ADVANTAGES.get(cfg.advantage), rewards, group_ids, params=cfg.params(), **inputs)


@dataclass
class LossInputs:
    """Tensors of one micro-batch. Shapes [N,T] unless noted; `logp` (and `entropy`, `values` when they feed a
    loss term) carry gradients."""

    logp: torch.Tensor
    mask: torch.Tensor
    advantages: torch.Tensor  # [N] or [N,T]
    old_logp: torch.Tensor | None = None  # default: logp.detach() (exactly on-policy)
    ref_logp: torch.Tensor | None = None
    samp_logp: torch.Tensor | None = None
    entropy: torch.Tensor | None = None
    keep: torch.Tensor | None = None  # top-entropy keep mask
    values: torch.Tensor | None = None
    old_values: torch.Tensor | None = None
    returns: torch.Tensor | None = None
    positive: torch.Tensor | None = None  # [N] bool: correct responses (VAPO NLL set T)


def loss_denominators(mask: torch.Tensor, positive: torch.Tensor | None = None) -> dict[str, Denominators]:
    """Local denominators of a micro-batch; sum them over micro-batches/ranks for the global ones."""
    out = {"main": Denominators.from_mask(mask)}
    if positive is not None:
        out["nll"] = Denominators.from_mask(mask * positive.to(mask.dtype)[:, None])
    return out


def compute_loss(
    inputs: LossInputs,
    cfg: AlgoConfig,
    *,
    denominators: dict[str, Denominators] | None = None,
    kl_coef: float | None = None,
    entropy_coef: float | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Total loss of one micro-batch and its metrics. Pass mini-batch-global `denominators` (see
    `loss_denominators`) when accumulating gradients over micro-batches or ranks (§1.5 rule 2)."""
    mask = inputs.mask
    dens = denominators or loss_denominators(mask, inputs.positive)
    old = inputs.logp.detach() if inputs.old_logp is None else inputs.old_logp
    params = cfg.params()
    per_tok, pm = call_with_params(
        POLICY_LOSSES.get(cfg.policy_loss), inputs.logp, old, inputs.advantages, mask, params=params
    )
    metrics: dict[str, float] = {f"actor/{k}": v for k, v in pm.items()}

    if cfg.is_correction and inputs.samp_logp is not None:
        w = call_with_params(is_weights, old, inputs.samp_logp, mask, params=params, mode=cfg.is_correction)
        per_tok = per_tok * w
        stats = mismatch_stats(old, inputs.samp_logp, mask, cfg.is_c_max, weights=w)
        metrics.update({f"mismatch/{k}": v for k, v in stats.items()})
    if inputs.keep is not None:
        per_tok = per_tok * inputs.keep
        metrics["actor/entropy_keep_frac"] = float(masked_mean(inputs.keep.float(), mask))

    pg = aggregate(per_tok, mask, cfg.loss_agg, denominators=dens["main"], l_norm=cfg.l_norm)
    total = pg
    metrics["actor/pg_loss"] = float(pg.detach())

    beta = cfg.kl_coef if kl_coef is None else kl_coef
    if beta > 0 and cfg.kl_placement == "loss" and inputs.ref_logp is not None:
        kl = kl_estimate(inputs.logp, inputs.ref_logp, cfg.kl_estimator)
        kl_loss = aggregate(kl, mask, cfg.loss_agg, denominators=dens["main"], l_norm=cfg.l_norm)
        total = total + beta * kl_loss
        metrics["actor/kl_loss"] = float(kl_loss.detach())

    c_h = cfg.entropy_coef if entropy_coef is None else entropy_coef
    if c_h > 0 and inputs.entropy is not None:
        emask = mask if inputs.keep is None else inputs.keep
        ent = aggregate(inputs.entropy, emask, "token-mean", denominators=dens["main"])
        total = total - c_h * ent
        metrics["actor/entropy_bonus"] = float(ent.detach())

    if cfg.vf_coef > 0 and inputs.values is not None and inputs.returns is not None:
        old_v = inputs.values.detach() if inputs.old_values is None else inputs.old_values
        vl, vm = value_loss(inputs.values, old_v, inputs.returns, mask, value_clip=cfg.value_clip)
        v_agg = aggregate(vl, mask, cfg.loss_agg, denominators=dens["main"], l_norm=cfg.l_norm)
        total = total + cfg.vf_coef * v_agg
        metrics["critic/value_loss"] = float(v_agg.detach())
        metrics.update({f"critic/{k}": v for k, v in vm.items()})

    if cfg.nll_coef > 0 and inputs.positive is not None:
        pos_mask = mask * inputs.positive.to(mask.dtype)[:, None]
        den = dens["nll"].tokens if "nll" in dens else float(pos_mask.sum())
        nll = -masked_sum(inputs.logp, pos_mask) / den if den > 0 else inputs.logp.sum() * 0.0
        total = total + cfg.nll_coef * nll
        metrics["actor/nll_loss"] = float(nll.detach())

    metrics["actor/loss"] = float(total.detach())
    return total, metrics
