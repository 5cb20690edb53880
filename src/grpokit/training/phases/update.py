"""Update phase: epochs x mini-batches of optimizer steps on one batch, each mini-batch accumulated over
micro-batches with mini-batch-global loss denominators (all-reduced over ranks, docs/math.md §1.5), the policy and the
critic stepped by their own optimizers. Exactly on-policy, the training forward is pi_old: its log-probs and
entropies are returned for the step's signals, so no separate scoring pass runs."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from ... import algos
from ... import metric_names as mn
from ...algos.aggregate import Denominators
from ...algos.algo_config import AlgoConfig
from ...algos.compose import LossInputs, compute_loss, loss_denominators
from ...algos.reference import Reference
from ...models.forward import completion_forward
from ...parallel.distributed import DistInfo, all_gather_objects, all_reduce_grads, all_reduce_sum, any_rank
from ...parallel.sharding import Sharding
from ...rollout import SamplingParams
from ..batch import Batch
from ..critic import Critic, CriticOptimizer
from ..timer import Timer
from ..timer import clock as now
from .advantage import micro_batches, truncation


def all_reduce_denominators(d: dict[str, Denominators], info: DistInfo) -> dict[str, Denominators]:
    """Sum loss denominators over ranks, so every rank divides by the global count (docs/math.md §1.5 rule 2); one
    collective on the backend's device (NCCL takes GPU tensors only)."""
    if info.world == 1:
        return d
    keys = sorted(d)
    flat = all_reduce_sum([x for k in keys for x in (d[k].tokens, d[k].nonempty_seqs, d[k].seqs)], info)
    return {k: Denominators(*flat[3 * i : 3 * i + 3]) for i, k in enumerate(keys)}


@dataclass
class TrainState:
    """What an update steps and what it steps with: the policy, its optimizer and schedule, the critic and its
    optimizer, the reference, the layout over ranks (`grpokit.parallel.sharding`)."""

    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    scheduler: Any
    algo: AlgoConfig
    train: Any  # TrainConfig
    sampling: SamplingParams  # the sampler's temperature and truncation, applied to the learner's log-probs (§10)
    autocast: Callable[[], contextlib.AbstractContextManager]
    reference: Reference
    critic: Critic | None = None
    critic_opt: CriticOptimizer | None = None
    info: DistInfo = field(default_factory=DistInfo)
    on_phase: Callable[..., None] | None = None
    sharding: Sharding | None = None  # how the learner is laid out over ranks (`grpokit.parallel.sharding`)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """The training forward (through DDP or FSDP2 when there are several ranks, so gradients are summed)."""
        wrapped = self.sharding.train_module if self.sharding is not None else None
        if wrapped is not None:
            return wrapped(*args, **kwargs)
        return completion_forward(self.model, *args, **kwargs)

    def sync_context(self, last: bool) -> contextlib.AbstractContextManager:
        """Gradient accumulation: gradients are reduced over ranks only on the last micro-batch of a step."""
        return self.sharding.sync_context(last) if self.sharding is not None else contextlib.nullcontext()


@dataclass
class OnPolicyOutputs:
    """The training forward's own log-probs and entropies (exactly on-policy: pi_old), gathered per micro-batch."""

    logp: list[torch.Tensor] = field(default_factory=list)
    entropy: list[torch.Tensor] = field(default_factory=list)
    rows: list[torch.Tensor] = field(default_factory=list)  # batch row indices of each micro-batch

    def assemble(self, n: int, width: int) -> tuple[torch.Tensor, torch.Tensor] | None:
        """[n, width] log-probs and entropies in batch order, or None when nothing was recorded."""
        if not self.logp:
            return None
        lp, ent = torch.zeros(n, width), torch.zeros(n, width)
        for rows, a, e in zip(self.rows, self.logp, self.entropy):
            lp[rows, : a.shape[1]] = a
            ent[rows, : e.shape[1]] = e
        return lp, ent


def policy_has_work(b: Batch, algo: AlgoConfig, kl_coef: float, entropy_coef: float) -> bool:
    """False when no term of the policy loss has a gradient: every advantage 0 and no KL/entropy/NLL term."""
    if b.extras.get("no_valid_group"):
        return False
    return not (bool((b.advantages == 0).all()) and kl_coef == 0 and entropy_coef == 0 and algo.nll_coef == 0)


def run_update(
    state: TrainState,
    b: Batch,
    *,
    step: int,
    kl_coef: float,
    entropy_coef: float,
    train_policy: bool = True,
    value_pretraining: bool = False,
    timer: Timer | None = None,
) -> tuple[dict[str, float], OnPolicyOutputs]:
    """All optimizer steps of one training step. `train_policy=False` steps only the critic. In
    `value_pretraining` a critic with its own transformer (`critic.kind=model`) skips the policy's forward, which
    then feeds nothing (a skipped update in training still runs it: its entropy and KL are logged). The seconds of
    its forward, backward and optimizer parts are added to `timer`."""
    cfg = state.train
    # every rank must take the same decision: DDP's gradient sum needs all of them in the backward
    train_policy = train_policy and any_rank(policy_has_work(b, state.algo, kl_coef, entropy_coef), state.info)
    if not train_policy and state.critic is None:
        return {mn.TRAIN_SKIPPED_UPDATE: 1.0}, OnPolicyOutputs()
    policy_forward = not (value_pretraining and not train_policy and not state.critic.uses_policy_features)
    gen = torch.Generator().manual_seed(cfg.seed * 100003 + step)
    positive = (b.accuracy >= 0.5) & b.valid if state.algo.nll_coef > 0 else None
    outputs, per_step = OnPolicyOutputs(), []
    clock = {"forward": 0.0, "backward": 0.0, "optimizer": 0.0}
    n_opt = cfg.ppo_epochs * cfg.mini_batches
    _phase(state, "update", 0, n_opt)
    for _ in range(cfg.ppo_epochs):
        perm = torch.randperm(len(b), generator=gen) if cfg.mini_batches > 1 else torch.arange(len(b))
        for mb in torch.tensor_split(perm, cfg.mini_batches):
            if mb.numel() == 0:
                continue
            pos = positive[mb] if positive is not None else None
            per_step.append(
                _mini_batch(
                    state,
                    b,
                    mb,
                    pos,
                    outputs,
                    clock,
                    kl_coef=kl_coef,
                    entropy_coef=entropy_coef,
                    train_policy=train_policy,
                    policy_forward=policy_forward,
                )
            )
            _phase(state, "update", len(per_step), n_opt)
    if timer is not None:
        timer.merge(clock)
    out = mean_dicts(per_step)
    if not train_policy:
        out[mn.TRAIN_SKIPPED_UPDATE] = 1.0
    return out, outputs


def _phase(state: TrainState, name: str, done: int, total: int) -> None:
    if state.on_phase is not None:
        state.on_phase(name, done, total)


def _mini_batch(
    state: TrainState,
    b: Batch,
    mb: torch.Tensor,
    positive: torch.Tensor | None,
    outputs: OnPolicyOutputs,
    clock: dict[str, float],
    *,
    kl_coef: float,
    entropy_coef: float,
    train_policy: bool,
    policy_forward: bool = True,
) -> dict[str, float]:
    """One optimizer step: accumulate every micro-batch's gradient, then step policy and critic."""
    mbb = b.select(mb)
    dens = all_reduce_denominators(loss_denominators(mbb.mask, positive), state.info)
    state.optimizer.zero_grad(set_to_none=True)
    if state.critic_opt is not None:
        state.critic_opt.zero_grad()
    mets = []
    parts = lockstep(split_micro_batches(mbb, state.train), state)
    for i, (idx, real) in enumerate(parts):
        t0 = now()
        with state.sync_context(last=i == len(parts) - 1):
            if policy_forward:
                loss, met = _micro_loss(
                    state, mbb, idx, positive, dens, outputs, mb, kl_coef, entropy_coef, train_policy
                )
            else:
                mask = mbb.mask[idx].to(next(state.critic.parameters()).device)
                loss, met = _value_loss(state, mbb, idx, None, mask, dens)
            loss = loss if real else loss * 0.0  # a repeat that only keeps the ranks' collectives in step
            t1 = now()
            loss.backward()
        clock["forward"] += t1 - t0
        clock["backward"] += now() - t1
        if real:
            mets.append(met)
    t0 = now()
    agg = mean_dicts(mets)
    if train_policy:
        params = [p for g in state.optimizer.param_groups for p in g["params"]]
        grad_norm = torch.nn.utils.clip_grad_norm_(params, state.train.max_grad_norm or math.inf)  # 0: no clipping
        if state.sharding is not None:
            grad_norm = state.sharding.grad_norm(grad_norm)
        if torch.isfinite(grad_norm):
            state.optimizer.step()
            if state.sharding is not None:
                state.sharding.after_optimizer_step()  # FSDP2: the sampling replica gets the new weights
        state.scheduler.step()
        state.reference.after_optimizer_step(state.model)
        agg[mn.TRAIN_GRAD_NORM] = float(grad_norm)
        agg[mn.TRAIN_NONFINITE_LOSS] = float(any(not math.isfinite(x.get(mn.ACTOR_LOSS, 0.0)) for x in mets))
        agg[mn.TRAIN_NONFINITE_GRAD] = float(not torch.isfinite(grad_norm))
    if state.critic_opt is not None:
        all_reduce_grads([p for p in state.critic.parameters() if p.requires_grad], state.info)
        agg[mn.CRITIC_GRAD_NORM] = state.critic_opt.step()
        agg[mn.CRITIC_LR] = state.critic_opt.optimizer.param_groups[0]["lr"]
    clock["optimizer"] += now() - t0
    return agg


def split_micro_batches(mbb: Batch, train: Any) -> list[torch.Tensor]:
    """Row indices of each micro-batch of `train.micro_batch_size` rows. With `train.sort_by_length` the rows are
    ordered by generated length first (longest first, stable: ties keep batch order, so a group's rows stay
    together), so each micro-batch, which the learner trims to its own longest completion (`completion_forward`),
    carries less padding. Every per-sample field is read through these indices (`mbb.x[idx]`) and the loss divides
    by the mini-batch's global denominators (docs/math.md §1.5 rule 2), so the order changes the gradient only by
    float rounding."""
    size = train.micro_batch_size
    if not train.sort_by_length or len(mbb) <= size:
        return list(micro_batches(len(mbb), size))
    order = torch.sort(mbb.lengths, descending=True, stable=True).indices
    return list(torch.split(order, size))


def lockstep(parts: list[torch.Tensor], state: TrainState) -> list[tuple[torch.Tensor, bool]]:
    """(rows, real) per micro-batch. FSDP2 all-gathers in every forward, so every rank must run as many as the
    rank with the most; a rank with fewer repeats its last micro-batch with a zero loss (no gradient, no metrics).
    DDP reduces once per optimizer step and needs no padding."""
    out = [(idx, True) for idx in parts]
    if state.sharding is None or not state.sharding.lockstep:
        return out
    most = max(all_gather_objects(len(parts), state.info))
    if most > len(parts) and not parts:
        raise RuntimeError(
            "train.sharding=fsdp2: this rank has no sample in a mini-batch while others do; keep batches full "
            "(algo.ds_shortfall=error) or use train.sharding=ddp"
        )
    return out + [(parts[-1], False)] * (most - len(parts))


def _micro_loss(
    state: TrainState,
    mbb: Batch,
    idx: torch.Tensor,
    positive: torch.Tensor | None,
    dens: dict[str, Denominators],
    outputs: OnPolicyOutputs,
    mb: torch.Tensor,
    kl_coef: float,
    entropy_coef: float,
    train_policy: bool,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Forward one micro-batch; returns (policy loss + value loss, metrics). Gradients stay apart: the value
    head reads detached features, and a separate value model shares no parameter with the policy."""
    a = state.algo
    grad_ctx = contextlib.nullcontext() if train_policy else torch.no_grad()
    with state.autocast(), grad_ctx:
        logp, ent, hidden = state.forward(
            mbb.prompt_ids[idx],
            mbb.prompt_mask[idx],
            mbb.completion_ids[idx],
            mbb.raw_mask[idx],
            **truncation(state.sampling),
            with_entropy=True,
            return_hidden=state.critic is not None and state.critic.uses_policy_features,
        )
    dev = logp.device
    mask = mbb.mask[idx].to(dev)
    if mbb.old_logp is None:  # exactly on-policy: this forward is pi_old
        outputs.logp.append(logp.detach().float().cpu())
        outputs.entropy.append(ent.detach().float().cpu())
        outputs.rows.append(mb[idx])
    loss = logp.new_zeros(())
    met: dict[str, float] = {}
    if train_policy:
        loss, met = compute_loss(
            LossInputs(
                logp=logp.float(),
                mask=mask,
                advantages=_sel(mbb.advantages, idx, dev),
                old_logp=_sel(mbb.old_logp, idx, dev),
                ref_logp=_sel(mbb.ref_logp, idx, dev),
                samp_logp=_sel(mbb.sampler_logp, idx, dev) if a.is_correction else None,
                entropy=ent if entropy_coef > 0 else None,
                keep=_sel(mbb.keep, idx, dev),
                positive=None if positive is None else positive[idx].to(dev),
            ),
            a,
            denominators=dens,
            kl_coef=kl_coef,
            entropy_coef=entropy_coef,
        )
    if state.critic is not None:
        v_agg, vm = _value_loss(state, mbb, idx, hidden, mask, dens)
        loss = loss + v_agg
        met.update(vm)
    return loss, met


def _value_loss(
    state: TrainState,
    mbb: Batch,
    idx: torch.Tensor,
    hidden: torch.Tensor | None,
    mask: torch.Tensor,
    dens: dict[str, Denominators],
) -> tuple[torch.Tensor, dict[str, float]]:
    """The critic's clipped value loss (docs/math.md §11), aggregated like the policy loss over the global
    denominators."""
    a, dev = state.algo, mask.device
    with state.autocast():
        values = state.critic.values(
            mbb.prompt_ids[idx], mbb.prompt_mask[idx], mbb.completion_ids[idx], mbb.raw_mask[idx], hidden
        )
    vl, vm = algos.value_loss(
        values.float(), _sel(mbb.values, idx, dev), _sel(mbb.returns, idx, dev), mask, value_clip=a.value_clip
    )
    v_agg = algos.aggregate(vl, mask, a.loss_agg, denominators=dens["main"], l_norm=a.l_norm)
    met = {mn.CRITIC_VALUE_LOSS: float(v_agg.detach())}
    met.update({f"{mn.CRITIC_PREFIX}{k}": v for k, v in vm.items()})
    return v_agg, met


def _sel(x: torch.Tensor | None, idx: torch.Tensor, dev: Any) -> torch.Tensor | None:
    return None if x is None else x[idx].to(dev)


def mean_dicts(rows: list[dict[str, float]]) -> dict[str, float]:
    keys = {k for r in rows for k in r}
    out = {}
    for k in keys:
        vals = [r[k] for r in rows if k in r and isinstance(r[k], (int, float)) and math.isfinite(r[k])]
        out[k] = sum(vals) / len(vals) if vals else float("nan")
    return out
