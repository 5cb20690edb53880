"""One training run's state and its step: the phases of `grpokit.training.phases` called in order.

    rollout -> scoring -> filter -> advantage -> update -> signals

Each phase gets what it uses, never the trainer: the batch source a `sample_round` callable and a group filter
factory, the phases the one sampling-settings value (`self.sampling`, built once), a step's `Timer` times the calls.

The session (model, engine, rewards, data) comes from `grpokit.training.session`; the trainer adds what learning needs:
optimizer and schedule, reference policy and KL placement (registered strategies), KL and entropy
coefficients, the critic with its own optimizer, the run log, detectors and checkpoints. Rank and world size
flow through (denominators are all-reduced across ranks), so multi-process runs need no change to the math.
`grpokit.training.loop.fit` runs the steps with evaluation, logging and alerts.
"""

from __future__ import annotations

import dataclasses
import functools
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from .. import algos
from .. import metric_names as mn
from ..algos.group_filter import GROUP_FILTERS, GroupFilter
from ..algos.kl_placement import make_placement
from ..algos.reference import make_reference
from ..algos.schedules import lr_lambda
from ..config import Config, ConfigError, set_key
from ..models import load_model_and_tokenizer
from ..monitor.detectors import Monitor
from ..monitor.readers.episodes import episode_examples
from ..parallel.distributed import DistInfo, global_metrics, local_prompt_count
from ..parallel.sharding import make_sharding
from ..rollout import RolloutEngine
from ..run.writer import RunWriter
from . import checkpointing
from .autopilot import Autopilot, Bounds, Change
from .batch import Batch
from .critic import CriticOptimizer, build_critic
from .detector_context import monitor_context
from .evaluation import evaluate
from .phases.advantage import advantage_metrics, policy_view, prepare, scorers
from .phases.batch_source import Round, SampleRound, in_sampler_thread, make_batch_source
from .phases.rollout import PromptStream, sample_groups
from .phases.scoring import score_rollout
from .phases.signals import step_signals, timing_metrics
from .phases.update import TrainState, run_update
from .phases.value_pretrain import pretrain_critic
from .session import Session, open_session
from .timer import Timer, clock


def make_kl_controller(algo: Any, value: float | None = None) -> Any:
    """The registered KL controller, starting at `value` (default `algo.kl_coef`); its other fields come from
    `algo.kl_<field>` (docs/math.md §2)."""
    cls = algos.KL_CONTROLLERS[algo.kl_controller]
    extra = {f.name: getattr(algo, f"kl_{f.name}") for f in dataclasses.fields(cls) if f.name != "value"}
    return cls(algo.kl_coef if value is None else value, **extra)


@dataclass
class StepResult:
    """What one training step produced: its metrics row (global over ranks), the batch it trained on, and the reward
    failures of every generation round."""

    metrics: dict[str, float]
    batch: Batch
    reward_failures: list[Any] = field(default_factory=list)


class Trainer:
    """Owns the model(s), optimizers, data stream and run directory of one training run."""

    def __init__(self, cfg: Config, run_dir: str | Path, *, session: Session | None = None) -> None:
        self.cfg = cfg
        try:  # the group filter is chosen by one key; an unknown one stops here, before the model loads
            GROUP_FILTERS[cfg.algo.group_filter]
        except KeyError as e:
            raise ConfigError(f"algo.group_filter: {e.args[0]}") from None
        self.run_dir = Path(run_dir)
        self.session = session or open_session(cfg)
        self.info = DistInfo.detect()
        self.local_prompts = local_prompt_count(cfg.rollout.prompts_per_step, self.info)
        a = cfg.algo
        self.reference = make_reference(self.model, a)
        self.placement = make_placement(a)
        self.critic_cfg = cfg.critic
        self.critic = self.critic_opt = None
        if a.uses_critic:
            self.critic = build_critic(self.model, self.critic_cfg, self.device, self._load_critic_trunk)
            self.critic_opt = CriticOptimizer(
                self.critic, self.critic_cfg, (cfg.train.adam_beta1, cfg.train.adam_beta2)
            )
        self.sharding = make_sharding(cfg.train.sharding, self.model, self.info)  # before the optimizer: FSDP2
        self.optimizer, self.scheduler = self._policy_optimizer()  # steps the learner's (maybe sharded) parameters
        self.kl_ctl = make_kl_controller(a)
        self.ent_coef = algos.EntropyCoef(a.entropy_coef, a.entropy_target, a.entropy_coef_lr)
        self.stream = PromptStream(len(self.train_examples), cfg.train.seed, rank=self.info.rank, world=self.info.world)
        self.log = RunWriter(self.run_dir, report_to=cfg.train.report_to) if self.info.rank == 0 else None
        self.step = 0
        self.group_counter = 0
        self.history: list[dict[str, Any]] = []
        self.on_phase: Any = None
        self.monitor_context = monitor_context(cfg)  # shared by every detector; refreshed after autopilot changes
        self.monitor_context["precision"] = self.precision.name  # the mismatch a precision gives by rounding alone
        self.monitor = Monitor(self.monitor_context, cfg.monitor.thresholds)
        self.autopilot: Autopilot | None = None
        if cfg.train.autopilot:
            t = cfg.train
            bounds = Bounds(
                t.autopilot_max_eps_high,
                t.autopilot_max_entropy_coef,
                t.autopilot_min_lr,
                t.autopilot_max_interventions,
            )
            self.autopilot = Autopilot(cfg, bounds)
        self.sampling = self.session.sampling_params()  # the sampler's settings, which the learner's log-probs apply
        # rollout.max_staleness: sampled now, or during the last update (phases/batch_source.py)
        args = (self.sample_with, self.sync_engine, self.session, cfg.train.seed + 1, self.info.world)
        self.batches = make_batch_source(cfg.rollout.max_staleness, *args)

    # ------------------------------------------------------------------------------------------ session views

    model = property(lambda self: self.session.model)
    tokenizer = property(lambda self: self.session.tokenizer)
    engine = property(lambda self: self.session.engine)
    rewards = property(lambda self: self.session.rewards)
    device = property(lambda self: self.session.device)
    train_examples = property(lambda self: self.session.data.train)
    prompt_tokens = property(lambda self: self.session.data.train_tokens)

    @property
    def precision(self) -> Any:
        return self.session.precision

    @precision.setter
    def precision(self, value: Any) -> None:
        self.session.precision = value

    def _autocast(self) -> Any:
        return self.session.autocast()

    def _phase(self, name: str, done: int = 0, total: int = 1) -> None:
        if self.on_phase is not None and not in_sampler_thread():
            self.on_phase(name, done, total)

    @property
    def on_policy(self) -> bool:
        return self.cfg.train.ppo_epochs == 1 and self.cfg.train.mini_batches == 1

    # ------------------------------------------------------------------------------------------------ setup

    def _policy_optimizer(self) -> tuple[torch.optim.Optimizer, Any]:
        t = self.cfg.train
        betas = (t.adam_beta1, t.adam_beta2)
        opt = torch.optim.AdamW(
            self.sharding.parameters(),
            lr=t.lr,
            betas=betas,
            weight_decay=t.weight_decay,
            fused=self.sharding.fused_optimizer,  # one kernel per step: 0.14 s vs 0.44 s for SmolLM2 on 2 cores
        )
        sched = lr_lambda(t.lr_schedule, t.warmup_steps, t.steps * t.ppo_epochs * t.mini_batches)
        return opt, torch.optim.lr_scheduler.LambdaLR(opt, sched)

    def _load_critic_trunk(self, path: str) -> torch.nn.Module:
        model, _ = load_model_and_tokenizer(path, dtype=self.precision.name, device=self.device)
        return model

    def train_state(self) -> TrainState:
        """What the update phase steps: the policy, its optimizer and schedule, critic, reference, layout."""
        return TrainState(
            model=self.model,
            optimizer=self.optimizer,
            scheduler=self.scheduler,
            algo=self.cfg.algo,
            train=self.cfg.train,
            sampling=self.sampling,
            autocast=self._autocast,
            reference=self.reference,
            critic=self.critic,
            critic_opt=self.critic_opt,
            info=self.info,
            on_phase=self.on_phase,
            sharding=self.sharding,
        )

    # -------------------------------------------------------------------------------------------- phases

    def sample_with(self, engine: RolloutEngine) -> SampleRound:
        """The run's `sample_round` with `engine` (the learner's own, or the sampler copy of max_staleness=1)."""
        return functools.partial(self.sample_round, engine)

    def sample_round(self, engine: RolloutEngine, prompts: int, timer: Timer) -> Round:
        """Rollout and scoring of one round: `prompts` fresh prompts from the seeded stream, G responses each by
        `engine` (`grpokit.rollout`), their rewards (`grpokit.rewards`) and shaping, as a Batch with fresh group ids."""
        idx = self.stream.take(prompts)
        self._phase("generate")
        with timer("generate"):
            out = sample_groups(engine, self.prompt_tokens, idx, self.sampling)
        timer.add("gen_tokens", out.gen_tokens)
        self._phase("score")
        with timer("score"):
            b, res = score_rollout(
                self.rewards,
                out,
                self.train_examples,
                idx,
                algo=self.cfg.algo,
                max_new_tokens=self.cfg.rollout.max_new_tokens,
                group_start=self.group_counter,
                pad_id=self.engine.pad_id,
                trainer_state=types.SimpleNamespace(global_step=self.step, max_steps=self.cfg.train.steps),
            )
        self.group_counter += len(idx)
        return Round(b, res, out.episodes or [])

    def new_filter(self) -> GroupFilter:
        """A group filter of `algo.group_filter` for one step (read each step: the autopilot may switch it)."""
        return GROUP_FILTERS[self.cfg.algo.group_filter](self.local_prompts, self.cfg.algo)

    def draw(self, prompts: int | None = None, timer: Timer | None = None) -> Batch:
        """One round with the learner's engine, unfiltered (value pretraining samples this way)."""
        return self.sample_round(
            self.engine, self.local_prompts if prompts is None else prompts, timer or Timer()
        ).batch

    def advantages(self, b: Batch, timer: Timer | None = None) -> dict[str, float]:
        """Advantage phase: loss mask, old/ref/init log-probs, values, KL placement, advantages, entropy mask."""
        self._phase("logprobs")
        passes = scorers(
            self.model,
            self.reference,
            self.critic,
            sampling=self.sampling,
            micro_batch_size=self.cfg.train.micro_batch_size,
            autocast=self._autocast,
            timer=timer or Timer(),
        )
        kw = {"placement": self.placement, "beta": self.kl_ctl.value, "scorers": passes, "on_policy": self.on_policy}
        prepare(b, self.cfg.algo, **kw)
        return advantage_metrics(b, self.cfg.algo)

    def update(self, b: Batch, timer: Timer | None = None, train_policy: bool = True) -> dict[str, float]:
        """Update phase; also leaves the policy's log-probs/entropies for this batch in `b.extras`."""
        metrics, outputs = run_update(
            self.train_state(),
            b,
            step=self.step,
            kl_coef=self.kl_ctl.value,
            entropy_coef=self.ent_coef.value,
            train_policy=train_policy,
            timer=timer,
        )
        on_policy = outputs.assemble(len(b), b.completion_ids.shape[1])
        if on_policy is not None:
            b.extras["policy_logp"], b.extras["policy_entropy"] = on_policy
        return metrics

    # ------------------------------------------------------------------------------------------ one step

    def train_step(self) -> StepResult:
        """One step of the algorithm, its phases in order (docs/layout.md follows them file by file)."""
        timer = Timer()
        t_step = clock()
        # 1. rollout, 2. scoring (sample_round), 3. filter (phases/batch_source.py draw_batch): sampled now, or
        # during the last update one update behind (rollout.max_staleness=1)
        drawn = self.batches.next(self.new_filter, last=self.step + 1 >= self.cfg.train.steps)
        timer.merge(drawn.timer)
        b, metrics = drawn.batch, drawn.metrics
        if drawn.episodes:  # sample episodes of each multi-turn failure kind: the detectors' evidence
            self.monitor_context["episode_examples"] = episode_examples([{"episode": r} for r in drawn.episodes])
        metrics.update(self.advantages(b, timer))  # 4. old/ref log-probs, values, KL placement, advantages
        metrics.update(self.update(b, timer))  # 5. update: optimizer steps over epochs x mini-batches
        timer.merge(self.batches.after_update(metrics))  # the engine(s) get the new weights
        metrics.update(self.signals(b, timer, clock() - t_step))  # 6. the step's §17 signals
        # one global row on every rank: controllers, detectors and autopilot then act the same everywhere
        metrics = global_metrics(metrics, self.info)
        self.after_step(metrics, int(metrics[mn.TRAIN_BATCH_SIZE]))
        return StepResult(metrics, b, [f for res in drawn.rounds for f in res.failures])

    def signals(self, b: Batch, timer: Timer, seconds: float) -> dict[str, float]:
        """Signals phase: every §17 signal of the trained batch, timings and batch size."""
        kw = {"sampling": self.sampling, "micro_batch_size": self.cfg.train.micro_batch_size}
        logp, ent = policy_view(b, self.model, autocast=self._autocast, **kw)
        m = step_signals(
            b, self.cfg.algo, max_new_tokens=self.cfg.rollout.max_new_tokens, policy_logp=logp, policy_entropy=ent
        )
        m.update(timing_metrics(timer.totals, seconds, b))
        m[mn.TRAIN_BATCH_SIZE] = float(len(b))
        return m

    def sync_engine(self, metrics: dict[str, float]) -> Timer:
        """Push the updated weights into the rollout engine (free for in-process engines; vLLM reloads them)."""
        timer = Timer()
        if metrics.get(mn.TRAIN_SKIPPED_UPDATE, 0.0) < 1.0:
            with timer("weight_sync"):
                self.engine.sync_weights(self.model)
        return timer

    def apply_changes(self, changes: list[Change], *, restored: bool = False) -> None:
        """The one place a config change reaches the live run: the key, then every runtime mirror of it (the
        learning rate of the optimizer and schedule, the entropy and KL coefficients, the KL controller, the
        sampling settings) and the detectors' context. `restored`: changes made again after a resume, whose
        coefficients and learning rate the checkpoint already holds."""
        for ch in changes:
            set_key(self.cfg, ch.key, ch.value)
            if ch.key == "algo.kl_controller":
                self.kl_ctl = make_kl_controller(self.cfg.algo, value=self.kl_ctl.value)
            elif ch.key.startswith("rollout."):
                self.sampling = self.session.sampling_params()
            elif restored:
                continue
            elif ch.key == "train.lr":
                self.optimizer.param_groups[0]["lr"] = ch.value
                self.scheduler.base_lrs[0] = ch.value
            elif ch.key == "algo.entropy_coef":
                self.ent_coef.value = ch.value
            elif ch.key == "algo.kl_coef":
                self.kl_ctl.value = ch.value
        self.monitor_context.update(monitor_context(self.cfg))  # the detectors see the fixes now in force

    def after_step(self, metrics: dict[str, float], n: int) -> None:
        """Controllers and the reference move once per step."""
        if mn.KL_REF_K1 in metrics:
            # n = the batch's sample count, as Ziegler et al. and verl pass it (docs/math.md §2)
            self.kl_ctl.update(metrics[mn.KL_REF_K1], n)
        self.ent_coef.update(metrics.get(mn.ENTROPY_TOKEN_MEAN, float("nan")))
        self.reference.after_step(self.model, self.step)
        metrics[mn.KL_COEF] = self.kl_ctl.value
        metrics[mn.ENTROPY_COEF] = self.ent_coef.value
        metrics[mn.TRAIN_LR] = self.optimizer.param_groups[0]["lr"]

    def pretrain_critic(self) -> list[dict[str, float]]:
        """Value pretraining before the first policy step (see `grpokit.training.phases.value_pretrain`)."""
        if self.critic is None or self.critic_cfg.pretrain_max_steps <= 0 or self.step > 0:
            return []
        return pretrain_critic(self.draw, self.advantages, self.train_state(), self.critic_cfg, self.info)

    # ------------------------------------------------------------------------------------------- eval

    def evaluate(self, n_samples: int = 1) -> dict[str, float]:
        """Held-out accuracy and mean length at `rollout.eval_temperature` (own seeded RNG stream per step)."""
        return evaluate(self.session, n_samples, seed=self.cfg.train.seed + 7919 * (self.step + 1), step=self.step)

    # ------------------------------------------------------------------------------------- checkpoints

    def stateful(self) -> checkpointing.Stateful:
        """What a checkpoint writes and restores in place: the policy, critic and reference modules, optimizers,
        schedule."""
        mods: dict[str, torch.nn.Module] = {"model": self.model}
        if self.critic is not None:
            mods["critic"] = self.critic
        mods.update(self.reference.checkpoint_modules())
        extra = {"critic_optimizer": self.critic_opt} if self.critic_opt is not None else {}
        return checkpointing.Stateful(mods, self.sharding.optimizer_state(self.optimizer), self.scheduler, extra)

    def record(self) -> checkpointing.RunRecord:
        """The run's numbers a checkpoint's state.json holds."""
        return checkpointing.RunRecord(
            self.step,
            self.stream.position,
            self.group_counter,
            self.kl_ctl.value,
            self.ent_coef.value,
            self.precision.name,
            self.log.sizes() if self.log is not None else None,
            self.autopilot.state_dict() if self.autopilot is not None else None,
        )

    def save(self) -> Path:
        """Checkpoint this step (what it holds: `grpokit.training.checkpointing`)."""
        kw = {"info": self.info, "train": self.cfg.train, "tokenizer": self.tokenizer}
        return checkpointing.save(self.run_dir, self.record(), self.stateful(), **kw)

    def restore(self, path: Path | None = None) -> int:
        """Load checkpoint `path`, or the newest readable one; returns its step, 0 when there is none."""
        rec = checkpointing.restore(self.run_dir, self.stateful(), self.info, steps=self.cfg.train.steps, path=path)
        if rec is None:
            return 0
        self.step, self.stream.position, self.group_counter = rec.step, rec.data_position, rec.group_counter
        self.kl_ctl.value, self.ent_coef.value = rec.kl_coef, rec.entropy_coef
        if self.autopilot is not None and rec.autopilot:
            # the interventions made before the checkpoint stay in force, and count against the budget
            self.apply_changes(self.autopilot.load_state_dict(rec.autopilot), restored=True)
        self.sharding.after_restore()  # FSDP2: the sharded learner takes the restored weights
        self.engine.sync_weights(self.model)
        checkpointing.cut_logs(self.log, self.run_dir, rec, steps=self.cfg.train.steps)
        return self.step

    def save_final(self) -> Path:
        return checkpointing.save_final(self.run_dir, self.model, self.tokenizer, self.step, self.info)
