"""Where a step's batch comes from: sampled now, or during the previous step's update (`rollout.max_staleness`).

Both sources run the same rounds (`draw_batch`: 1. rollout, 2. scoring, 3. filter, docs/layout.md) and differ in
when, and with which weights:

- max_staleness=0, `Synchronous`: the step samples with the learner's own engine, then updates; the engine gets the
  new weights after the update (today's loop, unchanged).
- max_staleness=1, `OneStepOffPolicy` (verl's one_step_off_policy, prime-rl's async level 1): a second `hf` engine
  holds a copy of the policy, the sampler. While step k updates the learner (w_{k-1} -> w_k), a background thread
  samples, scores and filters step k+1's batch with the sampler's weights w_{k-1}; after the update the step waits
  for that thread, then copies w_k into the sampler, so a sync never lands mid-generation. Step k+1 trains on a
  batch sampled one update behind: `rollout/staleness` = 1 (0 at the first step, sampled synchronously). Step time
  = max(generation, training) + sync instead of generation + training (docs/benchmarks.md).

The batch carries the sampler's own token log-probs (`sampler_logp`: the distribution it sampled from, after
temperature/top-k/top-p), so an IS correction (`algo.is_correction`, algos/correction.py, docs/math.md §10) weights
each token by rho = pi_old / pi_sampler with pi_old the learner's recompute (the proximal policy of the PPO ratio)
and pi_sampler the stale behaviour policy; the §17.6 `mismatch/*` signals measure the staleness, and the
`stale_sampler` detector (monitor/detectors/staleness.py) warns when it grows. A resumed run starts its pipeline
again: its first step samples synchronously, and the prompts of the batch in flight at the checkpoint are skipped.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import torch

from ... import metric_names as mn
from ...agents.signals import episode_metrics
from ...algos.group_filter import GroupFilter
from ...config import ConfigError
from ...rewards import RewardResult
from ...rollout import RolloutEngine
from ...rollout.hf import SharedPrefixSampler
from ..batch import Batch
from ..timer import Timer
from .scoring import merge_round_metrics

SAMPLER_THREAD = threading.local()  # `active` is True in the background sampler's thread


def in_sampler_thread() -> bool:
    """Whether the caller is the background sampler (phase reports for the display come from the step's thread)."""
    return bool(getattr(SAMPLER_THREAD, "active", False))


@dataclass
class Round:
    """One generation round, rolled out and scored: its batch, its reward result and its episodes (multi-turn)."""

    batch: Batch
    rewards: RewardResult
    episodes: list[dict[str, Any]] = field(default_factory=list)


# `sample_round(n, timer)`: n fresh prompts x G responses (or episodes) by one engine, scored and shaped
SampleRound = Callable[[int, Timer], Round]
# `sample_with(engine)`: the run's sample_round with that engine (the learner's own, or the sampler copy)
SampleWith = Callable[[RolloutEngine], SampleRound]
# a new group filter of `algo.group_filter` for one step (read each step: the autopilot may switch it)
MakeFilter = Callable[[], GroupFilter]


@dataclass
class Drawn:
    """One step's batch as the group filter returned it, with its metrics, reward rounds, the timer of its rounds
    and the learner version (updates applied) whose weights sampled it."""

    batch: Batch
    metrics: dict[str, float]
    rounds: list[RewardResult]
    timer: Timer = field(default_factory=Timer)
    version: int = 0
    episodes: list[dict[str, Any]] = field(default_factory=list)  # every episode sampled (multi-turn runs)


def draw_batch(sample_round: SampleRound, groups: GroupFilter) -> Drawn:
    """Rollout, scoring and filter rounds of one step: the group filter asks for rounds until it has its groups;
    reward/* describe everything sampled (all rounds), reward/kept_* the trained batch."""
    timer = Timer()
    rounds: list[RewardResult] = []
    episodes: list[dict[str, Any]] = []
    while (n := groups.request()) is not None:  # one round, or more when the filter asks (dynamic sampling)
        r = sample_round(n, timer)  # 1. rollout: n prompts x G responses (or episodes), 2. scoring: rewards, shaping
        rounds.append(r.rewards)
        episodes += r.episodes
        groups.add(r.batch)  # 3. filter: keep the groups that train
    b, metrics = groups.result()
    metrics.update(merge_round_metrics(rounds))
    metrics.update(episode_metrics(episodes))  # episode/*: every episode sampled, like reward/*
    return Drawn(b, metrics, rounds, timer, episodes=episodes)


class Synchronous:
    """max_staleness=0: sample now with the learner's engine; after the update the engine gets the new weights."""

    def __init__(self, sample_round: SampleRound, sync_engine: Callable[[dict[str, float]], Timer]) -> None:
        self.sample_round, self.sync_engine = sample_round, sync_engine

    def next(self, make_filter: MakeFilter, last: bool) -> Drawn:
        """This step's batch, kept by a new group filter (`last`: the run's last step)."""
        return draw_batch(self.sample_round, make_filter())

    def after_update(self, metrics: dict[str, float]) -> Timer:
        """The engine gets the updated weights; returns the time it took."""
        return self.sync_engine(metrics)


def sampler_engine(session: Any, seed: int) -> Any:
    """The sampler: the `hf` engine on a frozen copy of the learner's policy, drawing from its own seeded random
    stream (its draws do not depend on how its thread interleaves with the learner's); running episodes in a
    multi-turn run. It decodes eagerly whatever rollout.decode says: CUDA graphs captured in its thread while the
    learner runs kernels in another would be captured with the learner's work."""
    model = copy.deepcopy(session.model).requires_grad_(False)
    device = next(model.parameters()).device
    generator = torch.Generator(device=device).manual_seed(seed)
    engine = SharedPrefixSampler(model, session.tokenizer, autocast=session.autocast, generator=generator)
    return engine if session.agent is None else session.agent.wrap(engine, session.data, session.cfg.data)


@torch.no_grad()
def copy_weights(dst: torch.nn.Module, src: torch.nn.Module) -> None:
    """dst's parameters and buffers := src's (dst is a deep copy of src: same tensors, same order)."""
    for d, s in zip([*dst.parameters(), *dst.buffers()], [*src.parameters(), *src.buffers()], strict=True):
        d.copy_(s)


class OneStepOffPolicy:
    """max_staleness=1: step k+1's batch is sampled by the sampler copy during step k's update (module docstring)."""

    def __init__(
        self,
        sample_with: SampleWith,
        sync_engine: Callable[[dict[str, float]], Timer],
        session: Any,
        seed: int,
        world: int,
    ) -> None:
        if world > 1:
            raise ConfigError(
                f"rollout.max_staleness=1 is not supported under torchrun (world size {world}): its "
                "sampler copy runs in one process; use rollout.max_staleness=0"
            )
        self.sync_engine, self.learner = sync_engine, session.model
        self.sampler = sampler_engine(session, seed)
        self.sample_round = sample_with(self.sampler)
        self.pool = ThreadPoolExecutor(1, thread_name_prefix="grpokit-sampler")
        self.ready: Drawn | None = None  # the next step's batch, sampled during this step's update
        self.future: Future[Drawn] | None = None  # that batch while it is being sampled
        self.learner_version = 0  # updates applied to the learner
        self.sampler_version = -1  # the learner version whose weights the sampler holds (-1: never synced)

    def next(self, make_filter: MakeFilter, last: bool) -> Drawn:
        """This step's batch (sampled during the last update, or now at the first step), and the next step's
        sampling started in the background (not after the run's `last` step)."""
        if self.future is not None:  # the last step stopped before its after_update: collect what it started
            self.ready, self.future = self.future.result(), None
        drawn, self.ready = self.ready, None
        if drawn is None:
            self.sync()
            drawn = self.draw(make_filter)
        if not last:
            self.future = self.pool.submit(self.background, make_filter)
        drawn.metrics[mn.ROLLOUT_STALENESS] = float(self.learner_version - drawn.version)
        drawn.batch.extras["sampler_version"] = drawn.version
        return drawn

    def after_update(self, metrics: dict[str, float]) -> Timer:
        """Wait for the next step's batch, then give the sampler the updated weights; returns the time it took."""
        timer = Timer()
        with timer("rollout_wait"):
            if self.future is not None:
                try:
                    self.ready = self.future.result()
                finally:
                    self.future = None
        timer.merge(self.sync_engine(metrics))  # the learner's own engine (evaluation samples with it)
        if metrics.get(mn.TRAIN_SKIPPED_UPDATE, 0.0) < 1.0:
            self.learner_version += 1
        with timer("weight_sync"):
            self.sync()
        return timer

    def sync(self) -> None:
        """Copy the learner's weights into the sampler when it holds older ones (never while it samples)."""
        if self.sampler_version != self.learner_version:
            copy_weights(self.sampler.model, self.learner)
            self.sampler_version = self.learner_version

    def draw(self, make_filter: MakeFilter) -> Drawn:
        version = self.sampler_version
        drawn = draw_batch(self.sample_round, make_filter())
        drawn.version = version
        return drawn

    def background(self, make_filter: MakeFilter) -> Drawn:
        """The next step's batch, drawn in the sampler's thread while the learner updates.

        torch keeps autocast's cast cache (the bf16 copies of the learner's weights, one per weight for a whole
        forward) for the process but counts autocast nesting per thread: each time the sampler left its own
        autocast region its thread's count fell to 0 and cleared the learner's cache mid-forward, so a weight used
        twice (shared-prompt prefill, then completions) was cast twice, its two bf16 gradients rounded apart, and
        the update depended on when the sampler's forwards ended. Held one level deep while it draws, the sampler's
        exits never clear it; its own weights are frozen (`requires_grad=False`), which autocast never caches."""
        SAMPLER_THREAD.active = True
        torch.autocast_increment_nesting()
        try:
            return self.draw(make_filter)
        finally:
            torch.autocast_decrement_nesting()
            SAMPLER_THREAD.active = False


def make_batch_source(
    max_staleness: int,
    sample_with: SampleWith,
    sync_engine: Callable[[dict[str, float]], Timer],
    session: Any,
    seed: int,
    world: int,
) -> Synchronous | OneStepOffPolicy:
    """The batch source of `rollout.max_staleness` (config/checks.py allows 0 and 1)."""
    if max_staleness == 0:
        return Synchronous(sample_with(session.engine), sync_engine)
    return OneStepOffPolicy(sample_with, sync_engine, session, seed, world)
