"""One composed entry point: batch tensors + an algorithm config -> loss and every metric.

A recipe names its components (`components.py`: advantage estimator, policy loss, aggregation, KL estimator, IS
correction, critic targets, centred KL) and sets their hyper-parameters in one flat `AlgoConfig`
(`algo_config.py`), which binds each component's declared parameters once. `compute_loss` then passes each
component exactly its declared parameters. Optional terms (KL loss, entropy
bonus, value loss, positive-example NLL, IS weights, top-entropy mask) are on when their coefficient or input is
set. No method names are tested.

    L = Agg(w * e * l_pi) + beta Agg(k) - c_H Agg_tok(H) + c_v Agg(l_V) + mu L_NLL        (docs/math.md §2, §5, §11,
    §12)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from .aggregate import Denominators, aggregate
from .algo_config import AlgoConfig
from .correction import mismatch_stats
from .kl_placement import make_placement
from .masked import masked_mean, masked_sum
from .registry import ADVANTAGES, IS_CORRECTIONS, POLICY_LOSSES
from .value import value_loss

__all__ = [
    "LossInputs",
    "compute_advantages",
    "compute_loss",
    "loss_denominators",
]


def compute_advantages(cfg: AlgoConfig, rewards: torch.Tensor, group_ids: torch.Tensor, **inputs: Any) -> torch.Tensor:
    """Run the recipe's advantage estimator with its declared parameters. `inputs` are tensors of the
    estimators' fixed signature (mask, valid, values, token_rewards); each estimator gets those it takes."""
    unknown = set(inputs) - set(ADVANTAGES.inputs)
    if unknown:
        raise TypeError(f"compute_advantages: unknown inputs {sorted(unknown)} (inputs: {ADVANTAGES.inputs})")
    fn = ADVANTAGES.get(cfg.advantage)
    takes = ADVANTAGES.takes(cfg.advantage)
    return fn(rewards, group_ids, **{k: v for k, v in inputs.items() if k in takes}, **cfg.kwargs("advantage"))


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


def _policy_term(
    inputs: LossInputs, cfg: AlgoConfig, old: torch.Tensor, dens: dict[str, Denominators]
) -> tuple[torch.Tensor, dict[str, float]]:
    """Agg(w * e * l_pi): the policy loss per token, times IS weights w (§10) and the top-entropy keep mask e
    (§14) when on, aggregated (§1.5)."""
    mask = inputs.mask
    policy_loss = POLICY_LOSSES.get(cfg.policy_loss)
    per_tok, pm = policy_loss(inputs.logp, old, inputs.advantages, mask, **cfg.kwargs("policy_loss"))
    metrics: dict[str, float] = {f"actor/{k}": v for k, v in pm.items()}
    if cfg.is_correction and inputs.samp_logp is not None:
        is_kw = cfg.kwargs("is_correction")
        w = IS_CORRECTIONS.get(cfg.is_correction)(old, inputs.samp_logp, mask, **is_kw)
        per_tok = per_tok * w
        stats = mismatch_stats(old, inputs.samp_logp, mask, is_kw.get("is_c_max"), weights=w)
        metrics.update({f"mismatch/{k}": v for k, v in stats.items()})
    if inputs.keep is not None:
        per_tok = per_tok * inputs.keep
        metrics["actor/entropy_keep_frac"] = float(masked_mean(inputs.keep.float(), mask))
    pg = aggregate(per_tok, mask, cfg.loss_agg, denominators=dens["main"], l_norm=cfg.l_norm)
    metrics["actor/pg_loss"] = float(pg.detach())
    return pg, metrics


def _value_term(
    inputs: LossInputs, cfg: AlgoConfig, dens: dict[str, Denominators]
) -> tuple[torch.Tensor, dict[str, float]]:
    """Agg(l_V): the (clipped) value loss of §2/§11, aggregated like the policy loss."""
    assert inputs.values is not None and inputs.returns is not None
    mask = inputs.mask
    old_v = inputs.values.detach() if inputs.old_values is None else inputs.old_values
    vl, vm = value_loss(inputs.values, old_v, inputs.returns, mask, value_clip=cfg.value_clip)
    v_agg = aggregate(vl, mask, cfg.loss_agg, denominators=dens["main"], l_norm=cfg.l_norm)
    return v_agg, {"critic/value_loss": float(v_agg.detach()), **{f"critic/{k}": v for k, v in vm.items()}}


def _nll_term(inputs: LossInputs, dens: dict[str, Denominators]) -> torch.Tensor:
    """L_NLL: mean negative log-likelihood over the tokens of positive (correct) responses (VAPO, docs/math.md §11;
    0 when there are none)."""
    assert inputs.positive is not None
    mask = inputs.mask
    pos_mask = mask * inputs.positive.to(mask.dtype)[:, None]
    den = dens["nll"].tokens if "nll" in dens else float(pos_mask.sum())
    return -masked_sum(inputs.logp, pos_mask) / den if den > 0 else inputs.logp.sum() * 0.0


def compute_loss(
    inputs: LossInputs,
    cfg: AlgoConfig,
    *,
    denominators: dict[str, Denominators] | None = None,
    kl_coef: float | None = None,
    entropy_coef: float | None = None,
    vf_coef: float = 0.0,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Total loss of one micro-batch and its metrics. Pass mini-batch-global `denominators` (see
    `loss_denominators`) when accumulating gradients over micro-batches or ranks (§1.5 rule 2). `vf_coef` (c_v)
    weighs the value loss for a loop that steps a policy and a value head with one optimizer; grpokit's trainer
    steps its critic with an optimizer of its own (where a constant weight changes nothing) and leaves it at 0.

    L = Agg(w * e * l_pi) + beta Agg(k) - c_H Agg_tok(H) + c_v Agg(l_V) + mu L_NLL   (docs/math.md §2, §5, §11, §12)
    """
    mask = inputs.mask
    dens = denominators or loss_denominators(mask, inputs.positive)
    old = inputs.logp.detach() if inputs.old_logp is None else inputs.old_logp
    total, metrics = _policy_term(inputs, cfg, old, dens)

    beta = cfg.kl_coef if kl_coef is None else kl_coef
    kl_loss = None
    if beta > 0 and inputs.ref_logp is not None:  # the placement says whether the KL is a loss term
        kl_loss = make_placement(cfg).loss_term(inputs.logp, inputs.ref_logp, mask, dens["main"])
    if kl_loss is not None:
        total = total + beta * kl_loss
        metrics["actor/kl_loss"] = float(kl_loss.detach())

    c_h = cfg.entropy_coef if entropy_coef is None else entropy_coef
    if c_h > 0 and inputs.entropy is not None:
        emask = mask if inputs.keep is None else inputs.keep
        ent = aggregate(inputs.entropy, emask, "token-mean", denominators=dens["main"])
        total = total - c_h * ent
        metrics["actor/entropy_bonus"] = float(ent.detach())

    if vf_coef > 0 and inputs.values is not None and inputs.returns is not None:
        v_agg, vm = _value_term(inputs, cfg, dens)
        total = total + vf_coef * v_agg
        metrics.update(vm)

    if cfg.nll_coef > 0 and inputs.positive is not None:
        nll = _nll_term(inputs, dens)
        total = total + cfg.nll_coef * nll
        metrics["actor/nll_loss"] = float(nll.detach())

    metrics["actor/loss"] = float(total.detach())
    return total, metrics
