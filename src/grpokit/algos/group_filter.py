"""Group filters: which sampled groups a step trains on (docs/math.md §5 dynamic sampling, §6 GPG resampling).

A group filter is chosen by one key, `algo.group_filter`, among the registered `GROUP_FILTERS` (validated with the
other choices by `AlgoConfig.validate`). The step asks it how many prompts to sample next (`request()`: None when it
has what it needs), gives it each scored round (`add`), and takes the training batch and the filter's metrics
(`result()`):

    groups = GROUP_FILTERS[algo.group_filter](prompts, algo)
    while (n := groups.request()) is not None:
        groups.add(score(rollout(n)))
    batch, metrics = groups.result()

A round is anything with the `Scored` protocol's fields (the trainer's `training/batch.py` `Batch` is one): the
filters read rewards, accuracy and group ids, and select, concatenate and mark rounds, nothing else.
"""

from __future__ import annotations

import math
from typing import Any, Protocol

import torch

from .. import metric_names as mn
from ..common.errors import GrpokitError
from .algo_config import AlgoConfig
from .measures import zero_variance_signals
from .registry import GROUP_FILTERS
from .shaping import group_keep_mask


class Scored(Protocol):
    """One scored round as a group filter sees it: per-sample rewards, accuracy and group ids ([N] tensors), and
    free-form extras; `select` keeps some samples, `concat` joins rounds."""

    rewards: torch.Tensor
    accuracy: torch.Tensor
    group_ids: torch.Tensor
    extras: dict[str, Any]

    def select(self, idx: torch.Tensor) -> Scored: ...

    @staticmethod
    def concat(parts: list[Any]) -> Any: ...


class DynamicSamplingError(GrpokitError, RuntimeError):
    """Dynamic sampling could not fill the batch within `algo.max_gen_rounds` rounds."""


def _concat(parts: list[Scored]) -> Scored:
    return type(parts[0]).concat(parts)


def _filter_metric(b: Scored, cfg: AlgoConfig) -> torch.Tensor:
    return b.accuracy if cfg.filter_metric == "accuracy" else torch.nan_to_num(b.rewards, nan=0.0)


def _groups(b: Scored) -> list[torch.Tensor]:
    return [torch.nonzero(b.group_ids == g).squeeze(1) for g in torch.unique(b.group_ids)]


class GroupFilter:
    """Base: one round of `prompts` prompts, every group kept (what `all` is)."""

    def __init__(self, prompts: int, algo: AlgoConfig) -> None:
        self.prompts, self.algo = prompts, algo
        self.drawn: list[Scored] = []

    def request(self) -> int | None:
        """Prompts to sample in the next round, or None when the filter has what it needs."""
        return self.prompts if not self.drawn else None

    def add(self, b: Scored) -> None:
        """A scored round."""
        self.drawn.append(b)

    def result(self) -> tuple[Scored, dict[str, float]]:
        """The training batch and the filter's metrics (zero-variance signals of everything drawn, rounds)."""
        return _concat(self.drawn), self.metrics()

    def metrics(self) -> dict[str, float]:
        allb = _concat(self.drawn)
        m = zero_variance_signals(allb.rewards, allb.accuracy, allb.group_ids)
        m[mn.SAMPLING_ROUNDS] = float(len(self.drawn))
        m[mn.SAMPLING_SHORT_BATCH] = 0.0  # 1.0 when dynamic sampling trains on a short batch (ds_shortfall=partial)
        m[mn.SAMPLING_GENERATED_GROUPS] = float(len(torch.unique(allb.group_ids)))
        return m


@GROUP_FILTERS.register("all")
class KeepAll(GroupFilter):
    """Train on every sampled group (GRPO, Dr. GRPO, ...)."""


@GROUP_FILTERS.register("dynamic_sampling")
class DynamicSampling(GroupFilter):
    """DAPO dynamic sampling (docs/math.md §5): train on groups whose filter metric varies, drawn until full.

    Each round samples ceil(ds_oversample x prompts) prompts (verl's gen_batch_size; its DAPO example over-samples
    3x), keeps groups whose filter metric has population std > 0 (or G = 1), and draws again until `prompts` groups
    are kept (at most `max_gen_rounds` rounds, verl's max_num_gen_batches = 10), then takes the first `prompts`.

    Not full after `max_gen_rounds` rounds: by default (`ds_shortfall="error"`, DAPO's pseudo-code in docs/math.md
    §5, and verl) raise DynamicSamplingError naming the cause (solved or too hard) and the fix. `"partial"` is an
    explicit opt-in: train on the kept groups with `sampling/short_batch` = 1 (the short-batch detector reports it);
    with no group kept at all the step's update is skipped."""

    def __init__(self, prompts: int, algo: AlgoConfig) -> None:
        super().__init__(prompts, algo)
        self.kept: list[Scored] = []
        self.per_round = max(prompts, math.ceil(algo.ds_oversample * prompts))

    def request(self) -> int | None:
        full = len(self.kept) >= self.prompts
        return None if full or len(self.drawn) >= max(self.algo.max_gen_rounds, 1) else self.per_round

    def add(self, b: Scored) -> None:
        super().add(b)
        keep = group_keep_mask(_filter_metric(b, self.algo), b.group_ids)
        for idx in _groups(b):
            if bool(keep[idx[0]]) and len(self.kept) < self.prompts:
                self.kept.append(b.select(idx))

    def result(self) -> tuple[Scored, dict[str, float]]:
        metrics = self.metrics()
        if len(self.kept) >= self.prompts:
            return _concat(self.kept), metrics
        if self.algo.ds_shortfall != "partial":
            raise DynamicSamplingError(shortfall_message(len(self.kept), self.prompts, self.algo, metrics))
        metrics[mn.SAMPLING_SHORT_BATCH] = 1.0
        if self.kept:
            return _concat(self.kept), metrics
        last = self.drawn[-1]
        last.extras["no_valid_group"] = True  # nothing to learn from: the trainer skips this step's update
        metrics[mn.SAMPLING_NO_VALID_GROUP] = 1.0
        return last, metrics


def shortfall_message(n_kept: int, prompts: int, cfg: AlgoConfig, metrics: dict[str, float]) -> str:
    """Why dynamic sampling could not fill the batch, and what to do about it."""
    solved, failed = metrics.get(mn.ZV_ALL_CORRECT, 0.0), metrics.get(mn.ZV_ALL_WRONG, 0.0)
    head = (
        f"dynamic sampling kept {n_kept} of {prompts} groups after algo.max_gen_rounds={cfg.max_gen_rounds} rounds "
        f"of {math.ceil(cfg.ds_oversample * prompts)} prompts: {solved:.0%} of the groups drawn were all correct, "
        f"{failed:.0%} all wrong."
    )
    if solved + failed < 0.5:
        cause = (
            " Most groups got identical rewards without being all correct or all wrong: with a graded reward this "
            "means every sample of a prompt is the same completion (entropy collapse: see entropy/token_mean), or "
            "the reward ignores the completion. Lower train.lr, raise algo.eps_high (clip-higher) or set "
            "algo.entropy_coef > 0."
        )
    elif solved >= failed:
        cause = (
            " The model solves almost every prompt: the task is learned — stop here (the last checkpoint is "
            "saved), or train on harder data (grpokit preflight shows pass rates per prompt)."
        )
    else:
        cause = (
            " The prompts are too hard for the model: filter the data to prompts it sometimes solves (grpokit "
            "preflight), or use a larger rollout.group_size."
        )
    return (
        head + cause + " Or raise algo.max_gen_rounds / algo.ds_oversample, or set algo.ds_shortfall=partial to "
        "train on short batches."
    )


@GROUP_FILTERS.register("gpg")
class GPGResampling(GroupFilter):
    """GPG resampling (docs/math.md §6): draw again while too few groups are valid; valid groups first.

    While the valid-group fraction (B-M)/B of what was drawn is below `gpg_threshold`, draw again (at most
    `max_gen_rounds`); assemble valid groups first, topped up with degenerate groups to `prompts` groups."""

    def __init__(self, prompts: int, algo: AlgoConfig) -> None:
        super().__init__(prompts, algo)
        self.valid: list[Scored] = []
        self.degenerate: list[Scored] = []

    def request(self) -> int | None:
        if self.drawn and min(1.0, len(self.valid) / self.prompts) >= (self.algo.gpg_threshold or 0.0):
            return None
        return self.prompts if len(self.drawn) < max(self.algo.max_gen_rounds, 1) else None

    def add(self, b: Scored) -> None:
        super().add(b)
        keep = group_keep_mask(torch.nan_to_num(b.rewards, nan=0.0), b.group_ids)
        for idx in _groups(b):
            (self.valid if bool(keep[idx[0]]) and len(idx) > 1 else self.degenerate).append(b.select(idx))

    def result(self) -> tuple[Scored, dict[str, float]]:
        chosen = (self.valid + self.degenerate)[: self.prompts]
        metrics = self.metrics()
        metrics[mn.GPG_VALID_FRAC] = min(len(self.valid), self.prompts) / max(len(chosen), 1)
        return _concat(chosen), metrics
