"""The training loop: sample groups -> rewards -> shaping -> advantages -> filter -> update -> monitor.

Each stage is a small function or registered strategy; this file only calls them in order. Rank and world size
flow through (denominators are all-reduced across ranks), so multi-process runs need no change to the math.
"""

from __future__ import annotations

import contextlib
import copy
import inspect
import math
import random
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from . import algos
from .algos.aggregate import Denominators
from .algos.compose import LossInputs, compute_advantages, compute_loss, loss_denominators
from .batch import Batch, from_rollout
from .checkpoint import latest_checkpoint, load_checkpoint, save_checkpoint
from .config import Config
from .data import Example, get_task, load_examples, render_prompt
from .learner import ValueHead, completion_forward, hidden_size
from .models import autocast_ctx, load_model_and_tokenizer, resolve_precision
from .monitor import signals
from .monitor.autopilot import Autopilot, Bounds, truncate_rows_after, write_rows
from .monitor.detectors import Monitor
from .rewards import RewardManager
from .rollout import SamplingParams, make_engine
from .runlog import RunLog
from .sampling import STRATEGIES, strategy_name


@dataclass
class DistInfo:
    rank: int = 0
    world: int = 1

    @classmethod
    def detect(cls) -> DistInfo:
        if dist.is_available() and dist.is_initialized():
            return cls(dist.get_rank(), dist.get_world_size())
        return cls()


def _all_reduce_dens(d: dict[str, Denominators], info: DistInfo) -> dict[str, Denominators]:
    if info.world == 1:
        return d
    out = {}
    for k, v in d.items():
        t = torch.tensor([v.tokens, v.nonempty_seqs, v.seqs], dtype=torch.float64)
        dist.all_reduce(t)
        out[k] = Denominators(*t.tolist())
    return out


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def pick_device(name: str) -> str:
    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return name


class PromptStream:
    """Endless, seeded, epoch-shuffled stream over training examples; its position is checkpointed."""

    def __init__(self, n: int, seed: int, position: int = 0) -> None:
        self.n, self.seed, self.position = n, seed, position

    def take(self, k: int) -> list[int]:
        out = []
        for _ in range(k):
            epoch, i = divmod(self.position, self.n)
            perm = torch.randperm(self.n, generator=torch.Generator().manual_seed(self.seed + epoch))
            out.append(int(perm[i]))
            self.position += 1
        return out


def lr_lambda(schedule: str, warmup: int, total: int):
    def fn(step: int) -> float:
        if warmup > 0 and step < warmup:
            return (step + 1) / warmup
        if schedule == "constant" or total <= warmup:
            return 1.0
        frac = min(1.0, (step - warmup) / max(1, total - warmup))
        return 1.0 - frac if schedule == "linear" else 0.5 * (1 + math.cos(math.pi * frac))

    return fn


def monitor_context(cfg: Config) -> dict[str, Any]:
    """What the detectors need to know about the recipe."""
    a, t = cfg.algo, cfg.train
    return {
        "dynamic_sampling": a.dynamic_sampling,
        "policy_loss": a.policy_loss,
        "eps_low": a.eps_low,
        "eps_high": a.eps_high,
        "epochs": t.epochs,
        "mini_batches": t.mini_batches,
        "is_correction": a.is_correction,
        "recipe": cfg.recipe,
    }


class Trainer:
    """Owns the model(s), optimizer, data stream and run directory of one training run."""

    def __init__(self, cfg: Config, run_dir: str | Path, *, console: Any = None) -> None:
        self.cfg = cfg
        self.run_dir = Path(run_dir)
        self.info = DistInfo.detect()
        self.console = console
        seed_everything(cfg.train.seed)
        self.device = pick_device(cfg.model.device)
        self.precision = resolve_precision(cfg.model.precision, self.device)
        lora = None
        if cfg.model.lora_r > 0:
            lora = {
                "r": cfg.model.lora_r,
                "alpha": cfg.model.lora_alpha,
                "dropout": cfg.model.lora_dropout,
                "target_modules": list(cfg.model.lora_target_modules),
            }
        self.model, self.tokenizer = load_model_and_tokenizer(
            cfg.model.name, dtype=self.precision.name, device=self.device, lora=lora, seed=cfg.train.seed
        )
        if cfg.model.gradient_checkpointing:
            self.model.gradient_checkpointing_enable()
        self.model.train()
        a = cfg.algo
        self.ref_model = None
        if a.needs_reference:
            self.ref_model = copy.deepcopy(self.model).eval().requires_grad_(False)
        # a moving (EMA / synced) reference hides cumulative drift: also measure KL to the initial model (spec §17.3)
        self.init_model = None
        if self.ref_model is not None and a.reference in ("ema", "sync"):
            self.init_model = copy.deepcopy(self.model).eval().requires_grad_(False)
        self.value_head = ValueHead(hidden_size(self.model)).to(self.device) if a.uses_critic else None
        params = [{"params": [p for p in self.model.parameters() if p.requires_grad], "lr": cfg.train.lr}]
        if self.value_head is not None:
            params.append({"params": list(self.value_head.parameters()), "lr": a.critic_lr})
        self.optimizer = torch.optim.AdamW(
            params,
            lr=cfg.train.lr,
            betas=(cfg.train.adam_beta1, cfg.train.adam_beta2),
            weight_decay=cfg.train.weight_decay,
        )
        total_opt_steps = cfg.train.steps * cfg.train.epochs * cfg.train.mini_batches
        sched = lr_lambda(cfg.train.lr_schedule, cfg.train.warmup_steps, total_opt_steps)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, [sched] * len(params))
        self.kl_ctl = algos.KL_CONTROLLERS[a.kl_controller](
            a.kl_coef, **({"target": a.kl_target, "horizon": a.kl_horizon} if a.kl_controller == "adaptive" else {})
        )
        self.ent_coef = algos.EntropyCoef(a.entropy_coef, a.entropy_target, a.entropy_coef_lr)
        self.engine = make_engine(
            cfg.rollout.engine, model=self.model, tokenizer=self.tokenizer, autocast=self._autocast
        )
        self._load_data()
        funcs = list(cfg.reward.functions) or [self.task_reward]
        weights = list(cfg.reward.weights) or [1.0] * len(funcs)
        self.rewards = RewardManager(
            list(zip(funcs, weights)), timeout_s=cfg.reward.timeout_s, max_fail_frac=cfg.reward.max_fail_frac
        )
        self.log = RunLog(self.run_dir) if self.info.rank == 0 else None
        self.step = 0
        self.group_counter = 0
        self.history: list[dict[str, Any]] = []
        self.on_phase: Any = None
        self.monitor = Monitor(monitor_context(cfg), cfg.monitor.thresholds)
        self.autopilot: Autopilot | None = None
        if cfg.train.autopilot:
            t = cfg.train
            bounds = Bounds(
                t.autopilot_max_eps_high,
                t.autopilot_max_entropy_coef,
                t.autopilot_min_lr,
                t.autopilot_max_interventions,
            )
            self.autopilot = Autopilot(self, bounds)
        self._rounds: list[Any] = []  # every generation round's RewardResult of the current step
        self._reward_failures: list[Any] = []

    def _phase(self, name: str, done: int = 0, total: int = 1) -> None:
        if self.on_phase is not None:
            self.on_phase(name, done, total)

    # ------------------------------------------------------------------------------------------------ setup

    def _autocast(self) -> contextlib.AbstractContextManager:
        return autocast_ctx(self.precision, self.device)

    def _load_data(self) -> None:
        d, seed = self.cfg.data, self.cfg.train.seed
        try:
            task = get_task(d.task)
        except (ValueError, KeyError):
            task = None
        if task is not None:
            self.train_examples = task.examples("train", d.train_size, seed)
            held_out = task.examples("test", None, seed + 1)
            self.eval_examples = held_out[: d.eval_size if d.eval_size is not None else 200]
            self.task_reward = task.default_reward
        else:
            keys = {"prompt_key": d.prompt_key, "answer_key": d.answer_key}
            if d.eval_data:
                self.train_examples = load_examples(d.task, "train", d.train_size, seed, **keys)
                self.eval_examples = load_examples(d.eval_data, "test", None, seed + 1, **keys)[: d.eval_size or 200]
            else:  # one file: hold out a seeded 10% (at most 200) for evaluation
                pool = load_examples(d.task, "train", None, seed, **keys)
                order = torch.randperm(len(pool), generator=torch.Generator().manual_seed(seed)).tolist()
                n_eval = min(d.eval_size or 200, max(1, len(pool) // 10)) if len(pool) > 1 else 0
                self.eval_examples = [pool[i] for i in order[:n_eval]]
                train = [pool[i] for i in order[n_eval:]]
                self.train_examples = train[: d.train_size] if d.train_size else train
            self.task_reward = "math_verify"
        if not self.train_examples:
            raise ValueError(f"data.task={d.task!r} gave no training examples")
        self.prompt_tokens = [self._encode(e) for e in self.train_examples]
        self.eval_tokens = [self._encode(e) for e in self.eval_examples]
        self.stream = PromptStream(len(self.train_examples), seed)

    def _encode(self, ex: Example) -> list[int]:
        text = render_prompt(self.tokenizer, ex, self.cfg.data.system_prompt)
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def sampling_params(self, n: int | None = None, temperature: float | None = None) -> SamplingParams:
        r = self.cfg.rollout
        return SamplingParams(
            n=r.group_size if n is None else n,
            max_new_tokens=r.max_new_tokens,
            temperature=r.temperature if temperature is None else temperature,
            top_p=r.top_p,
            top_k=r.top_k,
        )

    # -------------------------------------------------------------------------------------------- rollout

    def draw(self, timings: dict[str, float], prompts: int | None = None) -> Batch:
        """Sample `prompts` (default rollout.prompts_per_step) fresh prompts x G responses, score and shape them."""
        idx = self.stream.take(self.cfg.rollout.prompts_per_step if prompts is None else prompts)
        self._phase("generate")
        t0 = time.perf_counter()
        out = self.engine.generate([self.prompt_tokens[i] for i in idx], self.sampling_params())
        timings["generate"] = timings.get("generate", 0.0) + time.perf_counter() - t0
        timings["gen_tokens"] = timings.get("gen_tokens", 0.0) + out.gen_tokens
        self._phase("score")
        t0 = time.perf_counter()
        examples = [self.train_examples[idx[int(i)]] for i in out.prompt_index]
        res = self.rewards.score(out.texts, examples)
        timings["score"] = timings.get("score", 0.0) + time.perf_counter() - t0
        self._rounds.append(res)
        rewards = torch.tensor(res.rewards, dtype=torch.float32)
        accuracy = torch.tensor(res.accuracy, dtype=torch.float32).nan_to_num(0.0)
        rewards = self.shape_rewards(rewards, out.lengths, out.truncated)
        b = from_rollout(out, rewards, accuracy, self.group_counter, idx, self.engine.pad_id)
        self.group_counter += len(idx)
        return b

    def shape_rewards(self, rewards: torch.Tensor, lengths: torch.Tensor, truncated: torch.Tensor) -> torch.Tensor:
        """Soft overlong punishment (§5) and the truncated-response reward of ORZ/T1 (§12, §13)."""
        a = self.cfg.algo
        if a.soft_overlong:
            rewards = rewards + algos.soft_overlong_punishment(
                lengths, self.cfg.rollout.max_new_tokens, int(a.overlong_cache), a.overlong_factor
            )
        if a.truncated_reward is not None:
            rewards = torch.where(
                truncated & torch.isfinite(rewards), torch.full_like(rewards, a.truncated_reward), rewards
            )
        return rewards

    # ------------------------------------------------------------------------------------------ learner side

    @property
    def on_policy(self) -> bool:
        return self.cfg.train.epochs == 1 and self.cfg.train.mini_batches == 1

    def _micro(self, n: int) -> Iterator[torch.Tensor]:
        mbs = self.cfg.train.micro_batch_size
        for s in range(0, n, mbs):
            yield torch.arange(s, min(n, s + mbs))

    @torch.no_grad()
    def _score_pass(self, model: torch.nn.Module, b: Batch, values: bool) -> tuple[torch.Tensor, ...]:
        lps, ents, vals = [], [], []
        for idx in self._micro(len(b)):
            with self._autocast():
                lp, ent, v = completion_forward(
                    model,
                    b.prompt_ids[idx],
                    b.prompt_mask[idx],
                    b.completion_ids[idx],
                    b.raw_mask[idx],
                    temperature=self.cfg.rollout.temperature,
                    value_head=self.value_head if values else None,
                )
            lps.append(lp.float().cpu())
            ents.append(ent.float().cpu())
            if v is not None:
                vals.append(v.float().cpu())
        return torch.cat(lps), torch.cat(ents), (torch.cat(vals) if vals else None)

    def prepare(self, b: Batch, timings: dict[str, float]) -> dict[str, float]:
        """Loss mask, old/ref log-probs, values, KL-in-reward, advantages, top-entropy mask."""
        a, m = self.cfg.algo, {}
        b.mask = b.raw_mask * b.valid.float()[:, None]
        if a.overlong_filter:
            b.mask = algos.overlong_filter(b.mask, b.truncated)
        self._phase("logprobs")
        t0 = time.perf_counter()
        need_old = (
            (not self.on_policy)
            or a.top_entropy_rho is not None
            or a.uses_critic
            or (a.kl_placement != "loss" and a.kl_coef > 0)
        )
        if need_old:
            b.old_logp, b.entropy, b.values = self._score_pass(self.model, b, values=a.uses_critic)
        if self.ref_model is not None:
            b.ref_logp, _, _ = self._score_pass(self.ref_model, b, values=False)
        if self.init_model is not None:
            b.init_logp, _, _ = self._score_pass(self.init_model, b, values=False)
        timings["logprobs"] = time.perf_counter() - t0
        rewards = torch.nan_to_num(b.rewards, nan=0.0)
        token_rewards = None
        beta = self.kl_ctl.value
        if b.ref_logp is not None and beta > 0 and a.kl_placement == "reward":
            if a.uses_critic or _takes_token_rewards(a.advantage):
                token_rewards = algos.kl_reward_penalty(b.old_logp, b.ref_logp, b.mask, beta)
            else:
                rewards = rewards - beta * algos.sequence_kl(b.old_logp, b.ref_logp, b.mask)
        inputs: dict[str, Any] = {"mask": b.mask, "valid": b.valid, "token_rewards": token_rewards}
        if a.uses_critic:
            inputs["values"] = b.values
            b.returns = algos.value_targets(
                rewards, b.values, b.mask, gamma=a.gamma, lam_critic=a.lam_critic, token_rewards=token_rewards
            )
        b.advantages = compute_advantages(a, rewards, b.group_ids, **inputs)
        if b.ref_logp is not None and beta > 0 and a.kl_placement == "reward_centered":
            b.advantages = b.advantages - beta * algos.centered_sequence_kl(
                b.old_logp, b.ref_logp, b.mask, b.group_ids, kl_center=a.kl_center
            )
        if a.top_entropy_rho is not None:
            tau = algos.top_entropy_threshold(b.entropy, b.mask, a.top_entropy_rho)
            b.keep = algos.top_entropy_mask(b.entropy, b.mask, threshold=tau)
        adv_tok = algos.advantages.broadcast_advantages(b.advantages, b.mask)
        valid_adv = adv_tok[b.mask.bool()]
        m["adv/mean"] = float(valid_adv.mean()) if valid_adv.numel() else float("nan")
        m["adv/abs_mean"] = float(valid_adv.abs().mean()) if valid_adv.numel() else float("nan")
        m["adv/nonzero_frac"] = float((valid_adv != 0).float().mean()) if valid_adv.numel() else float("nan")
        if a.advantage == "gpg":
            m["gpg/alpha"] = algos.gpg_alpha(rewards, b.group_ids)[0]
        return m

    def update(self, b: Batch, timings: dict[str, float], value_only: bool = False) -> dict[str, float]:
        """Epochs x mini-batches of optimizer steps, micro-batched with mini-batch-global denominators."""
        cfg, a = self.cfg, self.cfg.algo
        n = len(b)
        per_step: list[dict[str, float]] = []
        gen = torch.Generator().manual_seed(cfg.train.seed * 100003 + self.step)
        positive = (b.accuracy >= 0.5) & b.valid if a.nll_coef > 0 else None
        entropies: list[torch.Tensor] = []
        mism: list[tuple[torch.Tensor | None, ...]] = []
        t_fwd = t_bwd = t_opt = 0.0
        skip = (
            not value_only
            and self.value_head is None
            and bool((b.advantages == 0).all())
            and self.kl_ctl.value == 0
            and self.ent_coef.value == 0
            and a.nll_coef == 0
        )
        if skip or b.extras.get("no_valid_group"):
            return {"train/skipped_update": 1.0}
        n_opt, done_opt = cfg.train.epochs * cfg.train.mini_batches, 0
        self._phase("update", 0, n_opt)
        for _epoch in range(cfg.train.epochs):
            perm = torch.randperm(n, generator=gen) if cfg.train.mini_batches > 1 else torch.arange(n)
            for mb in torch.tensor_split(perm, cfg.train.mini_batches):
                if mb.numel() == 0:
                    continue
                mbb = b.select(mb)
                pos = positive[mb] if positive is not None else None
                dens = _all_reduce_dens(loss_denominators(mbb.mask, pos), self.info)
                self.optimizer.zero_grad(set_to_none=True)
                mets: list[dict[str, float]] = []
                for idx in self._micro(len(mbb)):
                    t0 = time.perf_counter()
                    with self._autocast():
                        logp, ent, values = completion_forward(
                            self.model,
                            mbb.prompt_ids[idx],
                            mbb.prompt_mask[idx],
                            mbb.completion_ids[idx],
                            mbb.raw_mask[idx],
                            temperature=cfg.rollout.temperature,
                            value_head=self.value_head,
                            with_entropy=True,
                        )
                    dev = logp.device
                    mask = mbb.mask[idx].to(dev)
                    sel = _selector(idx, dev)
                    if mbb.old_logp is None:  # exactly on-policy: this forward is pi_old; read its signals here
                        entropies.append(ent.detach().float().cpu()[mbb.raw_mask[idx].bool()])
                        mism.append(
                            (
                                logp.detach().float().cpu(),
                                mbb.sampler_logp[idx],
                                mbb.raw_mask[idx],
                                None if mbb.ref_logp is None else mbb.ref_logp[idx],
                                None if mbb.init_logp is None else mbb.init_logp[idx],
                            )
                        )
                    inputs = LossInputs(
                        logp=logp.float(),
                        mask=mask,
                        advantages=sel(mbb.advantages),
                        old_logp=sel(mbb.old_logp),
                        ref_logp=sel(mbb.ref_logp),
                        samp_logp=sel(mbb.sampler_logp) if a.is_correction else None,
                        entropy=ent if self.ent_coef.value > 0 else None,
                        keep=sel(mbb.keep),
                        values=values,
                        old_values=sel(mbb.values),
                        returns=sel(mbb.returns),
                        positive=None if pos is None else pos[idx].to(dev),
                    )
                    if value_only:
                        loss, met = self._value_only_loss(inputs, a, dens)
                    else:
                        loss, met = compute_loss(
                            inputs, a, denominators=dens, kl_coef=self.kl_ctl.value, entropy_coef=self.ent_coef.value
                        )
                    t1 = time.perf_counter()
                    loss.backward()
                    t2 = time.perf_counter()
                    t_fwd += t1 - t0
                    t_bwd += t2 - t1
                    mets.append(met)
                t0 = time.perf_counter()
                params = [p for g in self.optimizer.param_groups for p in g["params"]]
                if value_only:
                    for p in self.model.parameters():
                        p.grad = None
                grad_norm = torch.nn.utils.clip_grad_norm_(params, cfg.train.max_grad_norm)
                if torch.isfinite(grad_norm):
                    self.optimizer.step()
                self.scheduler.step()
                if self.ref_model is not None and a.reference == "ema" and not value_only:
                    algos.ema_update_(self.ref_model.parameters(), self.model.parameters(), a.ref_ema_eta)
                t_opt += time.perf_counter() - t0
                agg = _mean_dicts(mets)
                agg["train/grad_norm"] = float(grad_norm)
                agg["train/nonfinite_loss"] = float(any(not math.isfinite(x.get("actor/loss", 0.0)) for x in mets))
                agg["train/nonfinite_grad"] = float(not torch.isfinite(grad_norm))
                per_step.append(agg)
                done_opt += 1
                self._phase("update", done_opt, n_opt)
        timings["forward"] = t_fwd
        timings["backward"] = t_bwd
        timings["optimizer"] = t_opt
        out = _mean_dicts(per_step)
        if entropies:
            ent_all = torch.cat(entropies)
            out["entropy/token_mean"] = float(ent_all.mean()) if ent_all.numel() else float("nan")
        if mism:
            width = max(x[0].shape[1] for x in mism)

            def cat(i: int) -> torch.Tensor:
                return torch.cat([torch.nn.functional.pad(x[i].float(), (0, width - x[i].shape[1])) for x in mism])

            ms = algos.mismatch_stats(cat(0), cat(1), cat(2), a.is_c_max)
            out.update({f"mismatch/{k}": v for k, v in ms.items()})
            for i, prefix in ((3, "kl_ref"), (4, "kl_init")):  # on-policy: this forward is pi_old (spec §17.3)
                if mism[0][i] is not None:
                    out.update(algos.kl_metrics(cat(0), cat(i), cat(2), prefix=prefix))
        return out

    def _value_only_loss(self, inputs: LossInputs, a: Any, dens: dict[str, Denominators]):
        vl, vm = algos.value_loss(
            inputs.values, inputs.old_values, inputs.returns, inputs.mask, value_clip=a.value_clip
        )
        loss = algos.aggregate(vl, inputs.mask, a.loss_agg, denominators=dens["main"], l_norm=a.l_norm)
        return loss, {"critic/value_loss": float(loss.detach()), **{f"critic/{k}": v for k, v in vm.items()}}

    # ------------------------------------------------------------------------------------------ one step

    def train_step(self) -> dict[str, float]:
        cfg, a = self.cfg, self.cfg.algo
        timings: dict[str, float] = {}
        t_step = time.perf_counter()
        strat = STRATEGIES[strategy_name(a)]
        self._rounds = []
        b, metrics = strat(lambda k: self.draw(timings, k), cfg.rollout.prompts_per_step, a)
        # reward/* describe everything sampled this step (all generation rounds); reward/kept_* the trained batch
        metrics.update(_merge_round_metrics(self._rounds))
        self._reward_failures = [f for res in self._rounds for f in res.failures]
        kept = signals.reward_signals(b.rewards, b.accuracy)
        metrics.update({k.replace("reward/", "reward/kept_"): v for k, v in kept.items()})
        metrics.update(signals.reward_consistency_signals(b.texts, b.rewards, b.accuracy, b.lengths))
        cache = int(a.overlong_cache) if a.soft_overlong else 0
        metrics.update(signals.length_signals(b.lengths, b.truncated, b.accuracy, cfg.rollout.max_new_tokens, cache))
        metrics.update(self.prepare(b, timings))
        if b.entropy is not None:
            metrics.update(signals.entropy_signals(b.entropy, b.raw_mask))
        if b.ref_logp is not None and b.old_logp is not None:
            metrics.update(algos.kl_metrics(b.old_logp, b.ref_logp, b.raw_mask, prefix="kl_ref"))
        if b.init_logp is not None and b.old_logp is not None:
            metrics.update(algos.kl_metrics(b.old_logp, b.init_logp, b.raw_mask, prefix="kl_init"))
        if b.old_logp is not None:
            ms = algos.mismatch_stats(b.old_logp, b.sampler_logp, b.raw_mask, a.is_c_max)
            metrics.update({f"mismatch/{k}": v for k, v in ms.items()})
        value_only = a.uses_critic and self.step < a.value_pretrain_steps
        upd = self.update(b, timings, value_only=value_only)
        if b.entropy is None and "entropy/token_mean" in upd:
            metrics["entropy/token_mean"] = upd.pop("entropy/token_mean")
        metrics.update(upd)
        if b.values is not None and b.returns is not None:
            metrics["critic/explained_variance"] = algos.explained_variance(b.returns, b.values, b.mask)
        if value_only:
            metrics["critic/pretraining"] = 1.0
        if a.kl_controller == "adaptive" and "kl_ref/k1" in metrics:
            # n = the batch's sample count, as Ziegler et al. and verl pass it (spec §2)
            self.kl_ctl.update(metrics["kl_ref/k1"], len(b))
        self.ent_coef.update(metrics.get("entropy/token_mean", float("nan")))
        if (
            self.ref_model is not None
            and a.reference == "sync"
            and a.ref_sync_every > 0
            and ((self.step + 1) % a.ref_sync_every == 0)
        ):
            algos.ema_update_(self.ref_model.parameters(), self.model.parameters(), 0.0)
        metrics["kl/coef"] = self.kl_ctl.value
        metrics["entropy/coef"] = self.ent_coef.value
        metrics["train/lr"] = self.optimizer.param_groups[0]["lr"]
        metrics["train/batch_size"] = float(len(b))
        total = time.perf_counter() - t_step
        for k, v in timings.items():
            metrics[f"time/{k}" if k != "gen_tokens" else "perf/gen_tokens"] = v
        metrics["time/step"] = total
        metrics["perf/tokens_per_s"] = float((b.prompt_mask.sum() + b.raw_mask.sum()) / total)
        metrics["perf/gen_tokens_per_s"] = timings.get("gen_tokens", 0.0) / max(timings.get("generate", 1e-9), 1e-9)
        self._last_batch = b
        return metrics

    # ------------------------------------------------------------------------------------------- eval

    @torch.no_grad()
    def evaluate(self, n_samples: int = 1) -> dict[str, float]:
        """Held-out accuracy and mean length at `rollout.eval_temperature`."""
        if not self.eval_tokens:
            return {}
        t0 = time.perf_counter()
        # evaluation draws from its own seeded stream, so evaluating never changes the training trajectory
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.cfg.train.seed + 7919 * (self.step + 1))
            out = self.engine.generate(
                self.eval_tokens, self.sampling_params(n=n_samples, temperature=self.cfg.rollout.eval_temperature)
            )
        examples = [self.eval_examples[int(i)] for i in out.prompt_index]
        res = self.rewards.score(out.texts, examples)
        acc = torch.tensor(res.accuracy, dtype=torch.float64).nan_to_num(0.0)
        return {
            "eval/accuracy": float(acc.mean()),
            "eval/length": float(out.lengths.double().mean()),
            "eval/truncation_rate": float(out.truncated.double().mean()),
            "eval/n": float(len(out.texts)),
            "time/eval": time.perf_counter() - t0,
        }

    # ------------------------------------------------------------------------------------- checkpoints

    def modules(self) -> dict[str, torch.nn.Module]:
        mods: dict[str, torch.nn.Module] = {"model": self.model}
        if self.value_head is not None:
            mods["value_head"] = self.value_head
        if self.ref_model is not None and self.cfg.algo.reference in ("ema", "sync"):
            mods["ref_model"] = self.ref_model
        return mods

    def save(self) -> Path:
        state = {
            "data_position": self.stream.position,
            "group_counter": self.group_counter,
            "kl_coef": self.kl_ctl.value,
            "entropy_coef": self.ent_coef.value,
        }
        if self.autopilot is not None:
            state["autopilot"] = self.autopilot.state_dict()
        return save_checkpoint(
            self.run_dir,
            self.step,
            modules=self.modules(),
            optimizer=self.optimizer,
            scheduler=self.scheduler,
            state=state,
            keep=self.cfg.train.keep_checkpoints,
        )

    def restore(self, path: Path | None = None) -> int:
        path = path or latest_checkpoint(self.run_dir)
        if path is None:
            return 0
        st = load_checkpoint(path, modules=self.modules(), optimizer=self.optimizer, scheduler=self.scheduler)
        self.step = int(st["step"])
        self.stream.position = int(st["data_position"])
        self.group_counter = int(st["group_counter"])
        self.kl_ctl.value = float(st["kl_coef"])
        self.ent_coef.value = float(st["entropy_coef"])
        if self.autopilot is not None and st.get("autopilot"):
            # the interventions made before the checkpoint stay in force, and count against the budget
            self.autopilot.load_state_dict(st["autopilot"])
        if self.log is not None:
            self.log.truncate_after(self.step)
            truncate_rows_after(self.run_dir / "interventions.jsonl", self.step)
        return self.step

    def save_final(self) -> Path:
        out = self.run_dir / "final"
        model = self.model
        if hasattr(model, "merge_and_unload"):
            model = copy.deepcopy(model).merge_and_unload()
        model.save_pretrained(out, safe_serialization=True)
        self.tokenizer.save_pretrained(out)
        return out


def _merge_round_metrics(rounds: list[Any]) -> dict[str, float]:
    """One step's reward metrics over all its generation rounds: counts and seconds summed, the rest (means,
    fractions) weighted by each round's sample count; mean/std/accuracy/correlations over all samples."""
    out: dict[str, float] = {}
    sizes = [len(r.rewards) for r in rounds]
    for key in {k for r in rounds for k in r.metrics}:
        vals = [(r.metrics[key], n) for r, n in zip(rounds, sizes) if key in r.metrics]
        if key.endswith("seconds") or "/failures_" in key or key.endswith("batch_retries"):
            out[key] = float(sum(v for v, _ in vals))
        else:
            finite = [(v, n) for v, n in vals if isinstance(v, (int, float)) and math.isfinite(v)]
            total = sum(n for _, n in finite)
            out[key] = sum(v * n for v, n in finite) / total if total else float("nan")
    rewards = [x for r in rounds for x in r.rewards]
    accuracy = [x for r in rounds for x in r.accuracy]
    per_reward = {k: [x for r in rounds for x in r.per_reward[k]] for k in (rounds[0].per_reward if rounds else {})}
    out.update(
        signals.reward_signals(
            torch.tensor(rewards, dtype=torch.float32), torch.tensor(accuracy, dtype=torch.float32).nan_to_num(0.0)
        )
    )
    out.update(signals.component_correlations(rewards, per_reward))
    out["reward/sampled_n"] = float(len(rewards))
    return out


def _takes_token_rewards(advantage: str) -> bool:
    """Whether the advantage estimator accepts per-token rewards (KL in the reward enters per token, spec §16);
    the others get the per-sequence KL sum subtracted from the scalar reward."""
    return "token_rewards" in inspect.signature(algos.ADVANTAGES.get(advantage)).parameters


def _selector(idx: torch.Tensor, dev: Any):
    def sel(x: torch.Tensor | None) -> torch.Tensor | None:
        return None if x is None else x[idx].to(dev)

    return sel


def _mean_dicts(rows: list[dict[str, float]]) -> dict[str, float]:
    keys = {k for r in rows for k in r}
    out = {}
    for k in keys:
        vals = [r[k] for r in rows if k in r and isinstance(r[k], (int, float)) and math.isfinite(r[k])]
        out[k] = sum(vals) / len(vals) if vals else float("nan")
    return out


def fit(trainer: Trainer, display: Any = None, *, eval_before: bool = True, eval_samples: int = 1) -> dict[str, Any]:
    """Run `train.steps` steps with periodic eval and checkpoints; returns a summary (eval before/after).

    The reward worker process is closed when the run ends, also when it ends with an error.
    """
    try:
        return _fit(trainer, display, eval_before=eval_before, eval_samples=eval_samples)
    finally:
        trainer.rewards.close()
        if trainer.log is not None:
            trainer.log.close()


def _fit(trainer: Trainer, display: Any, *, eval_before: bool, eval_samples: int) -> dict[str, Any]:
    cfg = trainer.cfg
    log = trainer.log
    summary: dict[str, Any] = {"run_dir": str(trainer.run_dir)}
    if log is not None and trainer.step == 0:
        log.write_config(cfg.to_dict())
    hook = getattr(display, "phase", None)
    trainer.on_phase = hook
    if eval_before and trainer.step == 0:
        if hook:
            hook("eval")
        ev = trainer.evaluate(eval_samples)
        summary["eval_before"] = ev
        if log is not None:
            log.log(0, ev)
        if display:
            display.message(f"held-out accuracy before training: {ev.get('eval/accuracy', float('nan')):.1%}")
    while trainer.step < cfg.train.steps:
        metrics = trainer.train_step()
        trainer.step += 1
        if cfg.train.eval_every > 0 and trainer.step % cfg.train.eval_every == 0 and trainer.step < cfg.train.steps:
            if hook:
                hook("eval")
            metrics.update(trainer.evaluate(eval_samples))
        # detectors see the row before it is written, so the row carries the alerts active at this step
        new_alerts = trainer.monitor.observe(trainer.step, metrics)
        metrics["alerts/active"] = float(len(trainer.monitor.active()))
        _log_step(trainer, metrics)
        trainer.history.append(metrics)
        if display:
            display.step_done(trainer.step, metrics, trainer.monitor.active())
        for alert in new_alerts:
            if log is not None:
                log.alert(alert.to_dict())
            if display:
                display.alert(alert)
        _autopilot_react(trainer, display, new_alerts, metrics)
        if cfg.train.save_every > 0 and trainer.step % cfg.train.save_every == 0:
            trainer.save()
    if not (cfg.train.save_every > 0 and trainer.step % cfg.train.save_every == 0):
        trainer.save()
    if hook:
        hook("eval")
    ev = trainer.evaluate(eval_samples)
    summary["eval_after"] = ev
    if log is not None:
        log.log(trainer.step, ev)
    summary["final_model"] = str(trainer.save_final())
    return summary


def _log_step(trainer: Trainer, metrics: dict[str, Any]) -> None:
    """The step's metrics row, its reward failures and a few sampled completions."""
    log = trainer.log
    if log is None:
        return
    if trainer._reward_failures:
        log.samples(
            trainer.step,
            [
                {"reward_failure": f.__dict__ if hasattr(f, "__dict__") else str(f)}
                for f in trainer._reward_failures[:5]
            ],
        )
    log.log(trainer.step, metrics)
    b = trainer._last_batch
    k = min(trainer.cfg.train.log_completions, len(b))
    log.samples(
        trainer.step,
        [
            {
                "text": b.texts[i],
                "reward": float(b.rewards[i]),
                "accuracy": float(b.accuracy[i]),
                "length": int(b.lengths[i]),
                "truncated": bool(b.truncated[i]),
            }
            for i in range(k)
        ],
    )


def _autopilot_react(trainer: Trainer, display: Any, alerts: list[Any], metrics: dict[str, Any]) -> None:
    if trainer.autopilot is None:
        return
    rows = trainer.autopilot.react(trainer.step, alerts, metrics)
    if rows and trainer.log is not None:
        write_rows(trainer.run_dir / "interventions.jsonl", rows)
    for r in rows:
        if display and r["kind"] == "intervention":
            display.message(f"autopilot: {r['action']} ({r['before']} -> {r['after']}) because {r['reason']}")
