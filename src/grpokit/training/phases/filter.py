"""Which sampled groups a step trains on (docs/math.md §5 dynamic sampling, §6 GPG resampling).

A strategy gets `draw(k)` — sample k fresh prompts x G responses, scored — and returns the training batch and its
metrics. Registered by name; the recipe picks one through `algo.dynamic_sampling` / `algo.gpg_threshold`.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from ... import metric_names as mn
from ...algos.compose import AlgoConfig
from ...algos.shaping import group_keep_mask
from ...monitor.measures import zero_variance_signals
from ..batch import Batch

Draw = Callable[[int], Batch]
STRATEGIES: dict[str, Callable[[Draw, int, AlgoConfig], tuple[Batch, dict[str, float]]]] = {}


class DynamicSamplingError(RuntimeError):
    """Dynamic sampling could not fill the batch within `algo.max_gen_rounds` rounds."""


def strategy(name: str) -> Callable:
    def deco(fn: Callable) -> Callable:
        STRATEGIES[name] = fn
        return fn

    return deco


def strategy_name(cfg: AlgoConfig) -> str:
    if cfg.dynamic_sampling:
        return "dapo"
    if cfg.gpg_threshold is not None:
        return "gpg"
    return "all"


def _filter_metric(b: Batch, cfg: AlgoConfig) -> torch.Tensor:
    return b.accuracy if cfg.filter_metric == "accuracy" else torch.nan_to_num(b.rewards, nan=0.0)


def _groups(b: Batch) -> list[torch.Tensor]:
    return [torch.nonzero(b.group_ids == g).squeeze(1) for g in torch.unique(b.group_ids)]


def _prefilter_metrics(batches: list[Batch], rounds: int) -> dict[str, float]:
    allb = Batch.concat(batches)
    m = zero_variance_signals(allb.rewards, allb.accuracy, allb.group_ids)
    m[mn.SAMPLING_ROUNDS] = float(rounds)
    m[mn.SAMPLING_SHORT_BATCH] = 0.0  # 1.0 when dynamic sampling trains on a short batch (ds_shortfall=partial)
    m[mn.SAMPLING_GENERATED_GROUPS] = float(len(torch.unique(allb.group_ids)))
    return m


@strategy("all")
def keep_all(draw: Draw, prompts: int, cfg: AlgoConfig) -> tuple[Batch, dict[str, float]]:
    """Train on every sampled group (GRPO, Dr. GRPO, ...)."""
    b = draw(prompts)
    return b, _prefilter_metrics([b], 1)


@strategy("dapo")
def dapo_dynamic_sampling(draw: Draw, prompts: int, cfg: AlgoConfig) -> tuple[Batch, dict[str, float]]:
    """DAPO dynamic sampling (docs/math.md §5): each round samples ceil(ds_oversample x prompts) prompts (verl's
    gen_batch_size; its DAPO example over-samples 3x), keeps groups whose filter metric has population std > 0 (or
    G = 1), and draws again until `prompts` groups are kept (at most `max_gen_rounds` rounds, verl's
    max_num_gen_batches = 10), then takes the first `prompts`.

    Not full after `max_gen_rounds` rounds: by default (`ds_shortfall="error"`, DAPO's pseudo-code in docs/math.md §5,
    and verl)
    raise DynamicSamplingError naming the cause (solved or too hard) and the fix. `"partial"` is an explicit
    opt-in: train on the kept groups with `sampling/short_batch` = 1 (the short-batch detector reports it); with
    no group kept at all the step's update is skipped."""
    kept: list[Batch] = []
    drawn: list[Batch] = []
    n_kept = 0
    per_round = max(prompts, math.ceil(cfg.ds_oversample * prompts))
    for rnd in range(1, max(cfg.max_gen_rounds, 1) + 1):
        b = draw(per_round)
        drawn.append(b)
        keep = group_keep_mask(_filter_metric(b, cfg), b.group_ids)
        for idx in _groups(b):
            if bool(keep[idx[0]]) and n_kept < prompts:
                kept.append(b.select(idx))
                n_kept += 1
        if n_kept >= prompts:
            metrics = _prefilter_metrics(drawn, rnd)
            return Batch.concat(kept), metrics
    metrics = _prefilter_metrics(drawn, len(drawn))
    if cfg.ds_shortfall == "partial":
        metrics[mn.SAMPLING_SHORT_BATCH] = 1.0
        if kept:
            return Batch.concat(kept), metrics
        last = drawn[-1]
        last.extras["no_valid_group"] = True  # nothing to learn from: the trainer skips this step's update
        metrics[mn.SAMPLING_NO_VALID_GROUP] = 1.0
        return last, metrics
    raise DynamicSamplingError(shortfall_message(n_kept, prompts, cfg, metrics))


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


@strategy("gpg")
def gpg_resampling(draw: Draw, prompts: int, cfg: AlgoConfig) -> tuple[Batch, dict[str, float]]:
    """GPG threshold (docs/math.md §6): while the valid-group fraction (B-M)/B of what was drawn is below
    `gpg_threshold`, draw again (at most `max_gen_rounds`); assemble valid groups first, topped up with
    degenerate groups to `prompts` groups."""
    drawn: list[Batch] = []
    valid: list[Batch] = []
    degenerate: list[Batch] = []
    rnd = 0
    while rnd < max(cfg.max_gen_rounds, 1):
        rnd += 1
        b = draw(prompts)
        drawn.append(b)
        keep = group_keep_mask(torch.nan_to_num(b.rewards, nan=0.0), b.group_ids)
        for idx in _groups(b):
            (valid if bool(keep[idx[0]]) and len(idx) > 1 else degenerate).append(b.select(idx))
        frac = min(1.0, len(valid) / prompts)
        if frac >= (cfg.gpg_threshold or 0.0):
            break
    chosen = (valid + degenerate)[:prompts]
    metrics = _prefilter_metrics(drawn, rnd)
    metrics[mn.GPG_VALID_FRAC] = min(len(valid), prompts) / max(len(chosen), 1)
    return Batch.concat(chosen), metrics
