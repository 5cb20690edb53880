"""Scoring phase: rewards for every completion (isolated reward manager), reward shaping (soft overlong punishment,
truncated-response reward), and the step's reward metrics over every generation round."""

from __future__ import annotations

import math
from typing import Any

import torch

from ... import algos
from ... import metric_names as mn
from ...algos import measures
from ...algos.algo_config import AlgoConfig
from ...data import Example
from ...rewards import RewardManager
from ...rollout import RolloutOutput
from ..batch import Batch, from_rollout


def shape_rewards(
    algo: AlgoConfig, max_new_tokens: int, rewards: torch.Tensor, lengths: torch.Tensor, truncated: torch.Tensor
) -> torch.Tensor:
    """Soft overlong punishment (§5) and the truncated-response reward of ORZ/T1 (§12, §13)."""
    if algo.soft_overlong:
        rewards = rewards + algos.soft_overlong_punishment(
            lengths, max_new_tokens, int(algo.overlong_cache), algo.overlong_factor
        )
    if algo.truncated_reward is not None:
        rewards = torch.where(
            truncated & torch.isfinite(rewards), torch.full_like(rewards, algo.truncated_reward), rewards
        )
    return rewards


def score_rollout(
    rewards_mgr: RewardManager,
    out: RolloutOutput,
    examples: list[Example],
    idx: list[int],
    *,
    algo: AlgoConfig,
    max_new_tokens: int,
    group_start: int,
    pad_id: int,
    trainer_state: Any = None,
) -> tuple[Batch, Any]:
    """Score and shape one round's completions; returns (Batch with group ids from `group_start`, RewardResult).

    TRL-style rewards also get each completion's token ids and `trainer_state` (global_step, max_steps)."""
    per_sample = [examples[idx[int(i)]] for i in out.prompt_index]
    res = rewards_mgr.score(
        out.texts,
        per_sample,
        completion_ids=completion_id_lists(out),
        trainer_state=trainer_state,
        prompt_ids=prompt_id_lists(out),  # decoded for the rewards given the prompt (verl prompt+response, OpenRLHF)
        episodes=out.episodes,  # TRL multi-turn rewards read the whole episode, and `environments`
    )
    rewards = torch.tensor(res.rewards, dtype=torch.float32) + environment_rewards(out)
    accuracy = torch.tensor(res.accuracy, dtype=torch.float32).nan_to_num(0.0)
    shaped = shape_rewards(algo, max_new_tokens, rewards, turn_lengths(out), out.truncated)
    b = from_rollout(out, shaped, accuracy, group_start, idx, pad_id)
    b.scores = rewards
    return b, res


def prompt_id_lists(out: RolloutOutput) -> list[list[int]]:
    """Each sample's prompt token ids (left padding dropped)."""
    return [out.prompt_ids[i][out.prompt_mask[i].bool()].tolist() for i in range(len(out.texts))]


def completion_id_lists(out: RolloutOutput) -> list[list[int]]:
    """Each completion's token ids after the prompt (EOS included, padding dropped; an episode's environment tokens
    included, as TRL passes a tool-using completion's ids)."""
    spans = out.spans
    return [out.completion_ids[i, : int(spans[i])].tolist() for i in range(len(out.texts))]


def turn_lengths(out: RolloutOutput) -> torch.Tensor:
    """The length the soft overlong punishment (§5) reads: a response's tokens; an episode's longest policy turn,
    since rollout.max_new_tokens bounds each turn (a turn near it is what the punishment discourages)."""
    if out.episodes is None:
        return out.lengths
    longest = [
        max((t.get("tokens", 0) for t in e["turns"] if t["role"] == "assistant"), default=0) for e in out.episodes
    ]
    return torch.tensor(longest, dtype=torch.long)


def environment_rewards(out: RolloutOutput) -> torch.Tensor:
    """Each episode's reward from its environment (0 where it gave none; single-turn samples: 0), added to the
    reward functions' weighted sum (grpokit/agents/environment.py)."""
    if out.episodes is None:
        return torch.zeros(len(out.texts))
    return torch.tensor([float(e.get("env_reward") or 0.0) for e in out.episodes], dtype=torch.float32)


def merge_round_metrics(rounds: list[Any]) -> dict[str, float]:
    """One step's reward metrics over all its generation rounds: counts and seconds summed, the rest (means,
    fractions) weighted by each round's sample count; mean/std/accuracy/correlations over all samples."""
    out: dict[str, float] = {}
    sizes = [len(r.rewards) for r in rounds]
    for key in {k for r in rounds for k in r.metrics}:
        vals = [(r.metrics[key], n) for r, n in zip(rounds, sizes) if key in r.metrics]
        if key.endswith("seconds") or key.startswith(mn.REWARD_FAILURES_PREFIX) or key == mn.REWARD_BATCH_RETRIES:
            out[key] = float(sum(v for v, _ in vals))
        else:
            finite = [(v, n) for v, n in vals if isinstance(v, (int, float)) and math.isfinite(v)]
            total = sum(n for _, n in finite)
            out[key] = sum(v * n for v, n in finite) / total if total else float("nan")
    rewards = [x for r in rounds for x in r.rewards]
    accuracy = [x for r in rounds for x in r.accuracy]
    per_reward = {k: [x for r in rounds for x in r.per_reward[k]] for k in (rounds[0].per_reward if rounds else {})}
    out.update(
        measures.reward_signals(
            torch.tensor(rewards, dtype=torch.float32), torch.tensor(accuracy, dtype=torch.float32).nan_to_num(0.0)
        )
    )
    out.update(measures.component_correlations(rewards, per_reward))
    out[mn.REWARD_SAMPLED_N] = float(len(rewards))
    return out
