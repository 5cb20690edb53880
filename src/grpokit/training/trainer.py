"""One training run's state and its step: the phases of `grpokit.training.phases` called in order.

    rollout -> scoring -> filter -> advantage -> update -> signals

The session (model, engine, rewards, data) comes from `grpokit.training.session`; the trainer adds what learning needs:
optimizer and schedule, reference policy and KL placement (registered strategies), KL and entropy
coefficients, the critic with its own optimizer, the run log, detectors and checkpoints. Rank and world size
flow through (denominators are all-reduced across ranks), so multi-process runs need no change to the math.
`grpokit.training.loop.fit` runs the steps with evaluation, logging and alerts.
"""

from __future__ import annotations

import dataclasses
import time
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from .. import algos
from .. import metric_names as mn
from ..algos.group_filter import GROUP_FILTERS
from ..algos.kl_placement import make_placement
from ..algos.reference import make_reference
from ..algos.schedules import lr_lambda
from ..config import Config, ConfigError
from ..models import load_model_and_tokenizer
from ..monitor.detectors import Monitor
from ..monitor.readers.episodes import episode_examples
from ..parallel.distributed import DistInfo, global_metrics, local_prompt_count
from ..parallel.sharding import make_sharding
from ..rewards import RewardResult
from ..rollout import RolloutOutput
from ..run.writer import RunWriter
from . import checkpointing as run_state
from .autopilot import Autopilot, Bounds
from .batch import Batch
from .critic import CriticOptimizer, build_critic
from .detector_context import monitor_context
from .evaluation import evaluate
from .phases.advantage import advantage_metrics, prepare, score_pass
from .phases.batch_source import in_sampler_thread, make_batch_source
from .phases.rollout import PromptStream, sample_groups
from .phases.scoring import score_rollout
from .phases.signals import step_signals
from .phases.update import TrainState, run_update
from .phases.value_pretrain import pretrain_critic
from .session import Session, open_session


def make_kl_controller(algo: Any) -> Any:
    """The registered KL controller; its fields other than `value` come from `algo.kl_<field>` (docs/math.md §2)."""
    cls = algos.KL_CONTROLLERS[algo.kl_controller]
    extra = {f.name: getattr(algo, f"kl_{f.name}") for f in dataclasses.fields(cls) if f.name != "value"}
    return cls(algo.kl_coef, **extra)


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
            self.autopilot = Autopilot(self, bounds)
        self.batches = make_batch_source(self)  # rollout.max_staleness: sampled now, or during the last update

    # ------------------------------------------------------------------------------------------ session views

    model = property(lambda self: self.session.model)
    tokenizer = property(lambda self: self.session.tokenizer)
    engine = property(lambda self: self.session.engine)
    rewards = property(lambda self: self.session.rewards)
    device = property(lambda self: self.session.device)
    train_examples = property(lambda self: self.session.data.train)
    prompt_tokens = property(lambda self: self.session.data.train_tokens)
    eval_examples = property(lambda self: self.session.data.held_out)
    eval_tokens = property(lambda self: self.session.data.held_out_tokens)
    ref_model = property(lambda self: self.reference.model)

    @property
    def precision(self) -> Any:
        return self.session.precision

    @precision.setter
    def precision(self, value: Any) -> None:
        self.session.precision = value

    def sampling_params(self, n: int | None = None, temperature: float | None = None) -> Any:
        return self.session.sampling_params(n, temperature)

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
            temperature=self.cfg.rollout.temperature,
            autocast=self._autocast,
            reference=self.reference,
            critic=self.critic,
            critic_opt=self.critic_opt,
            info=self.info,
            on_phase=self.on_phase,
            sharding=self.sharding,
            top_k=self.cfg.rollout.top_k,
            top_p=self.cfg.rollout.top_p,
        )

    # -------------------------------------------------------------------------------------------- phases

    def rollout(self, prompts: int, timings: dict[str, float], engine: Any = None) -> tuple[RolloutOutput, list[int]]:
        """Rollout phase: `prompts` fresh prompts from the seeded stream, G responses each (by `engine`: the
        learner's own when None)."""
        idx = self.stream.take(prompts)
        self._phase("generate")
        return sample_groups(engine or self.engine, self.prompt_tokens, idx, self.sampling_params(), timings), idx

    def score(self, out: RolloutOutput, idx: list[int], timings: dict[str, float]) -> tuple[Batch, RewardResult]:
        """Scoring phase: rewards of one round's responses, shaped, as a Batch with fresh group ids."""
        self._phase("score")
        b, res = score_rollout(
            self.rewards,
            out,
            self.train_examples,
            idx,
            algo=self.cfg.algo,
            max_new_tokens=self.cfg.rollout.max_new_tokens,
            group_start=self.group_counter,
            pad_id=self.engine.pad_id,
            timings=timings,
            trainer_state=types.SimpleNamespace(global_step=self.step, max_steps=self.cfg.train.steps),
        )
        self.group_counter += len(idx)
        return b, res

    def draw(self, timings: dict[str, float], prompts: int | None = None) -> Batch:
        """Rollout and scoring of one round (value pretraining samples this way)."""
        b, _ = self.score(*self.rollout(self.local_prompts if prompts is None else prompts, timings), timings)
        return b

    def _scorers(self) -> dict[str, Any]:
        common = {
            "micro_batch_size": self.cfg.train.micro_batch_size,
            "temperature": self.cfg.rollout.temperature,
            "top_k": self.cfg.rollout.top_k,
            "top_p": self.cfg.rollout.top_p,
            "autocast": self._autocast,
        }
        value_fn = None
        if self.critic is not None:
            critic = self.critic

            def value_fn(b: Batch, idx: torch.Tensor, hidden: torch.Tensor | None) -> torch.Tensor:
                return critic.values(
                    b.prompt_ids[idx], b.prompt_mask[idx], b.completion_ids[idx], b.raw_mask[idx], hidden
                )

        out = {"old": lambda b: score_pass(self.model, b, value_fn=value_fn, **common)}
        for name, model in (("ref", self.reference.model), ("init", self.reference.init_model)):
            if model is not None:
                out[name] = lambda b, m=model: score_pass(m, b, **common)
        return out

    def advantages(self, b: Batch, timings: dict[str, float]) -> dict[str, float]:
        """Advantage phase: loss mask, old/ref/init log-probs, values, KL placement, advantages, entropy mask."""
        self._phase("logprobs")
        prepare(
            b,
            self.cfg.algo,
            placement=self.placement,
            beta=self.kl_ctl.value,
            scorers=self._scorers(),
            on_policy=self.on_policy,
            timings=timings,
        )
        return advantage_metrics(b, self.cfg.algo)

    def update(self, b: Batch, timings: dict[str, float], train_policy: bool = True) -> dict[str, float]:
        """Update phase; also leaves the policy's log-probs/entropies for this batch in `b.extras`."""
        metrics, outputs = run_update(
            self.train_state(),
            b,
            timings,
            step=self.step,
            kl_coef=self.kl_ctl.value,
            entropy_coef=self.ent_coef.value,
            train_policy=train_policy,
        )
        on_policy = outputs.assemble(len(b), b.completion_ids.shape[1])
        if on_policy is not None:
            b.extras["policy_logp"], b.extras["policy_entropy"] = on_policy
        return metrics

    def _policy_view(self, b: Batch) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """pi_old's log-probs and entropies of the batch: the old pass, the on-policy forward, or (update skipped
        and on-policy) a scoring pass now, so a skipped step still logs entropy, KL and mismatch."""
        if b.old_logp is not None:
            return b.old_logp, b.entropy
        if "policy_logp" in b.extras:
            return b.extras["policy_logp"], b.extras["policy_entropy"]
        lp, ent, _ = score_pass(
            self.model,
            b,
            micro_batch_size=self.cfg.train.micro_batch_size,
            temperature=self.cfg.rollout.temperature,
            top_k=self.cfg.rollout.top_k,
            top_p=self.cfg.rollout.top_p,
            autocast=self._autocast,
        )
        return lp, ent

    # ------------------------------------------------------------------------------------------ one step

    def train_step(self) -> StepResult:
        """One step of the algorithm, its phases in order (docs/layout.md follows them file by file)."""
        timings: dict[str, float] = {}
        t_step = time.perf_counter()
        # 1. rollout, 2. scoring, 3. filter (phases/batch_source.py draw_batch): sampled now, or during the last
        # update one update behind (rollout.max_staleness=1)
        drawn = self.batches.next(timings)
        b, metrics = drawn.batch, drawn.metrics
        if drawn.episodes:  # sample episodes of each multi-turn failure kind: the detectors' evidence
            self.monitor_context["episode_examples"] = episode_examples([{"episode": r} for r in drawn.episodes])
        metrics.update(self.advantages(b, timings))  # 4. old/ref log-probs, values, KL placement, advantages
        metrics.update(self.update(b, timings))  # 5. update: optimizer steps over epochs x mini-batches
        self.batches.after_update(metrics, timings)  # the engine(s) get the new weights
        metrics.update(self.signals(b, timings, time.perf_counter() - t_step))  # 6. the step's §17 signals
        # one global row on every rank: controllers, detectors and autopilot then act the same everywhere
        metrics = global_metrics(metrics, self.info)
        self.after_step(metrics, int(metrics[mn.TRAIN_BATCH_SIZE]))
        return StepResult(metrics, b, [f for res in drawn.rounds for f in res.failures])

    def signals(self, b: Batch, timings: dict[str, float], seconds: float) -> dict[str, float]:
        """Signals phase: every §17 signal of the trained batch, timings and batch size."""
        logp, ent = self._policy_view(b)
        m = step_signals(
            b, self.cfg.algo, max_new_tokens=self.cfg.rollout.max_new_tokens, policy_logp=logp, policy_entropy=ent
        )
        m.update(_timing_metrics(timings, seconds, b))
        m[mn.TRAIN_BATCH_SIZE] = float(len(b))
        return m

    def sync_engine(self, metrics: dict[str, float], timings: dict[str, float]) -> None:
        """Push the updated weights into the rollout engine (free for in-process engines; vLLM reloads them)."""
        if metrics.get(mn.TRAIN_SKIPPED_UPDATE, 0.0) >= 1.0:
            return
        t0 = time.perf_counter()
        self.engine.sync_weights(self.model)
        timings["weight_sync"] = time.perf_counter() - t0

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
        return pretrain_critic(self)

    # ------------------------------------------------------------------------------------------- eval

    def evaluate(self, n_samples: int = 1) -> dict[str, float]:
        """Held-out accuracy and mean length at `rollout.eval_temperature` (own seeded RNG stream per step)."""
        return evaluate(self.session, n_samples, seed=self.cfg.train.seed + 7919 * (self.step + 1), step=self.step)

    # ------------------------------------------------------------------------------------- checkpoints

    def modules(self) -> dict[str, torch.nn.Module]:
        return run_state.modules(self)

    def save(self) -> Path:
        """Checkpoint this step (see `grpokit.training.checkpointing`)."""
        return run_state.save(self)

    def restore(self, path: Path | None = None) -> int:
        """Load checkpoint `path`, or the newest readable one; returns its step, 0 when there is none."""
        return run_state.restore(self, path)

    def save_final(self) -> Path:
        return run_state.save_final(self)


def _timing_metrics(timings: dict[str, float], total: float, b: Batch) -> dict[str, float]:
    m = {f"time/{k}" if k != "gen_tokens" else mn.PERF_GEN_TOKENS: v for k, v in timings.items()}
    m[mn.TIME_STEP] = total
    m[mn.PERF_TOKENS_PER_S] = float((b.prompt_mask.sum() + b.raw_mask.sum()) / total)
    m[mn.PERF_GEN_TOKENS_PER_S] = timings.get("gen_tokens", 0.0) / max(timings.get("generate", 1e-9), 1e-9)
    return m
