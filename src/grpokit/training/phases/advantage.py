"""Advantage phase: the loss mask, the no-grad scoring passes (pi_old, pi_ref, pi_init, values), the KL penalty
where the recipe places it before the loss, the advantages (registered estimator) and the top-entropy mask."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import torch

from ... import algos
from ... import metric_names as mn
from ...algos.algo_config import AlgoConfig
from ...algos.compose import compute_advantages
from ...algos.kl_placement import KLPlacement
from ...algos.reference import Reference
from ...models.forward import completion_forward
from ...rollout import SamplingParams
from ..batch import Batch
from ..critic import Critic
from ..timer import Timer

Autocast = Callable[[], contextlib.AbstractContextManager]


def truncation(sampling: SamplingParams) -> dict[str, Any]:
    """The sampler's temperature, top-k and top-p, which the learner's log-probs apply as the sampler did."""
    return {"temperature": sampling.temperature, "top_k": sampling.top_k, "top_p": sampling.top_p}


def micro_batches(n: int, size: int) -> Iterator[torch.Tensor]:
    for s in range(0, n, size):
        yield torch.arange(s, min(n, s + size))


@torch.no_grad()
def score_pass(
    model: torch.nn.Module,
    b: Batch,
    *,
    micro_batch_size: int,
    sampling: SamplingParams,
    autocast: Autocast,
    value_fn: Callable[..., torch.Tensor | None] | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """(log-probs, entropies, values or None) [N,T] of the batch's completions under `model`, no gradient; the
    log-probs at the sampler's temperature and under its top-k/top-p truncation (docs/math.md §10)."""
    lps, ents, vals = [], [], []
    for idx in micro_batches(len(b), micro_batch_size):
        with autocast():
            lp, ent, h = completion_forward(
                model,
                b.prompt_ids[idx],
                b.prompt_mask[idx],
                b.completion_ids[idx],
                b.raw_mask[idx],
                **truncation(sampling),
                return_hidden=value_fn is not None,
            )
            v = value_fn(b, idx, h) if value_fn is not None else None
        lps.append(lp.float().cpu())
        ents.append(ent.float().cpu())
        if v is not None:
            vals.append(v.float().cpu())
    return torch.cat(lps), torch.cat(ents), (torch.cat(vals) if vals else None)


Scorer = Callable[[Batch], tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]]


def scorers(
    policy: torch.nn.Module,
    reference: Reference,
    critic: Critic | None,
    *,
    sampling: SamplingParams,
    micro_batch_size: int,
    autocast: Autocast,
    timer: Timer,
) -> dict[str, Scorer]:
    """The scoring passes `prepare` may run, each timed as `logprobs`: "old" (the policy, with the critic's values
    when there is one), "ref" and "init" (the reference's models, where they exist)."""
    common = {"micro_batch_size": micro_batch_size, "sampling": sampling, "autocast": autocast}
    value_fn = None
    if critic is not None:

        def value_fn(b: Batch, idx: torch.Tensor, hidden: torch.Tensor | None) -> torch.Tensor:
            return critic.values(b.prompt_ids[idx], b.prompt_mask[idx], b.completion_ids[idx], b.raw_mask[idx], hidden)

    def timed(model: torch.nn.Module, **kw: Any) -> Scorer:
        def run(b: Batch) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
            with timer("logprobs"):
                return score_pass(model, b, **common, **kw)

        return run

    out = {"old": timed(policy, value_fn=value_fn)}
    for name, model in (("ref", reference.model), ("init", reference.init_model)):
        if model is not None:
            out[name] = timed(model)
    return out


def policy_view(
    b: Batch, policy: torch.nn.Module, *, sampling: SamplingParams, micro_batch_size: int, autocast: Autocast
) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """pi_old's log-probs and entropies of the batch: the old pass, the on-policy forward, or (update skipped
    and on-policy) a scoring pass now, so a skipped step still logs entropy, KL and mismatch."""
    if b.old_logp is not None:
        return b.old_logp, b.entropy
    if "policy_logp" in b.extras:
        return b.extras["policy_logp"], b.extras["policy_entropy"]
    lp, ent, _ = score_pass(policy, b, micro_batch_size=micro_batch_size, sampling=sampling, autocast=autocast)
    return lp, ent


def needs_old_pass(algo: AlgoConfig, on_policy: bool, placement: KLPlacement) -> bool:
    """Whether pi_old must be scored before the update: off-policy updates, the top-entropy mask, a critic, or a
    KL penalty placed before the loss. Exactly on-policy, the training forward itself is pi_old."""
    return (not on_policy) or algo.top_entropy_rho is not None or algo.uses_critic or placement.needs_old_logp()


def prepare(
    b: Batch,
    algo: AlgoConfig,
    *,
    placement: KLPlacement,
    beta: float,
    scorers: dict[str, Scorer],
    on_policy: bool,
) -> None:
    """Fill the batch's mask, old/ref/init log-probs, values, returns, advantages and keep mask in place.

    `scorers` maps "old" (the policy, with values when there is a critic), "ref" and "init" to scoring passes;
    a missing key means that model does not exist in this run.
    """
    b.mask = b.raw_mask * b.valid.float()[:, None]
    if algo.overlong_filter:
        b.mask = algos.overlong_filter(b.mask, b.truncated)
    if needs_old_pass(algo, on_policy, placement):
        b.old_logp, b.entropy, b.values = scorers["old"](b)
    if "ref" in scorers:
        b.ref_logp, _, _ = scorers["ref"](b)
    if "init" in scorers:
        b.init_logp, _, _ = scorers["init"](b)
    rewards, token_rewards = placement.rewards(b, torch.nan_to_num(b.rewards, nan=0.0), beta)
    inputs: dict[str, Any] = {"mask": b.mask, "valid": b.valid, "token_rewards": token_rewards}
    if algo.uses_critic:
        inputs["values"] = b.values
        b.returns = algos.value_targets(rewards, b.values, b.mask, token_rewards=token_rewards, **algo.kwargs("critic"))
    b.advantages = placement.advantages(b, compute_advantages(algo, rewards, b.group_ids, **inputs), beta)
    if algo.top_entropy_rho is not None:
        tau = algos.top_entropy_threshold(b.entropy, b.mask, algo.top_entropy_rho)
        b.keep = algos.top_entropy_mask(b.entropy, b.mask, threshold=tau)
    b.extras["scalar_rewards"] = rewards


def advantage_metrics(b: Batch, algo: AlgoConfig) -> dict[str, float]:
    adv_tok = algos.advantages.broadcast_advantages(b.advantages, b.mask)
    valid = adv_tok[b.mask.bool()]
    nan = float("nan")
    m = {
        mn.ADV_MEAN: float(valid.mean()) if valid.numel() else nan,
        mn.ADV_ABS_MEAN: float(valid.abs().mean()) if valid.numel() else nan,
        mn.ADV_NONZERO_FRAC: float((valid != 0).float().mean()) if valid.numel() else nan,
    }
    if algo.advantage == "gpg":
        m[mn.GPG_ALPHA] = algos.gpg_alpha(b.extras["scalar_rewards"], b.group_ids)[0]
    return m
