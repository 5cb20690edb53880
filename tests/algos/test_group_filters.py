"""The group filters over their small protocol (algos/group_filter.py; docs/math.md §5 dynamic sampling, §6 GPG
resampling): any round with rewards, accuracy, group ids, extras, `select` and `concat` will do, here a plain
dataclass with no model behind it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
import torch

from grpokit import metric_names as mn
from grpokit.algos import GROUP_FILTERS, AlgoConfig
from grpokit.algos.group_filter import DynamicSamplingError


@dataclass
class Round:
    rewards: torch.Tensor
    accuracy: torch.Tensor
    group_ids: torch.Tensor
    extras: dict[str, Any] = field(default_factory=dict)

    def select(self, idx: torch.Tensor) -> Round:
        return Round(self.rewards[idx], self.accuracy[idx], self.group_ids[idx], dict(self.extras))

    @staticmethod
    def concat(parts: list[Round]) -> Round:
        return Round(*(torch.cat([getattr(p, k) for p in parts]) for k in ("rewards", "accuracy", "group_ids")))


def scored(groups: list[list[float]], first_id: int) -> Round:
    """One round: a group per list of 0/1 accuracies (reward = accuracy), ids from `first_id`."""
    acc = torch.tensor([a for g in groups for a in g])
    ids = torch.tensor([first_id + i for i, g in enumerate(groups) for _ in g])
    return Round(acc.clone(), acc, ids)


def run(name: str, algo: AlgoConfig, rounds: list[list[list[float]]], prompts: int) -> tuple[Round, dict, list]:
    f = GROUP_FILTERS[name](prompts, algo)
    asked = []
    while (n := f.request()) is not None:
        asked.append(n)
        f.add(scored(rounds[len(asked) - 1], 100 * len(asked)))
    batch, metrics = f.result()
    return batch, metrics, asked


def test_all_trains_on_one_round_of_every_group() -> None:
    batch, m, asked = run("all", AlgoConfig(), [[[1, 1], [0, 1], [0, 0]]], prompts=3)
    assert asked == [3] and batch.group_ids.tolist() == [100, 100, 101, 101, 102, 102]
    assert m[mn.SAMPLING_ROUNDS] == 1.0 and m[mn.ZV_ACC_FRAC] == pytest.approx(2 / 3)


def test_dynamic_sampling_draws_until_it_has_varying_groups_and_takes_the_first() -> None:
    """Round 1 (3x over-sampled, 6 prompts) holds one varying group, round 2 three: the first two varying ones train."""
    algo = AlgoConfig(group_filter="dynamic_sampling", ds_oversample=3.0)
    r1 = [[1, 1], [0, 1], [0, 0], [1, 1], [0, 0], [1, 1]]
    r2 = [[1, 0], [0, 0], [0, 1], [1, 0], [1, 1], [0, 0]]
    batch, m, asked = run("dynamic_sampling", algo, [r1, r2], prompts=2)
    assert asked == [6, 6]
    assert batch.group_ids.tolist() == [101, 101, 200, 200] and batch.accuracy.tolist() == [0, 1, 1, 0]
    assert m[mn.SAMPLING_ROUNDS] == 2.0 and m[mn.SAMPLING_GENERATED_GROUPS] == 12.0


def test_dynamic_sampling_short_of_groups_is_an_error_or_an_opted_in_short_batch() -> None:
    solved = [[[1, 1], [1, 1]]] * 2
    with pytest.raises(DynamicSamplingError, match=r"kept 0 of 2 groups .*100% of the groups drawn were all correct"):
        run("dynamic_sampling", AlgoConfig(group_filter="dynamic_sampling", max_gen_rounds=2), solved, prompts=2)
    algo = AlgoConfig(group_filter="dynamic_sampling", max_gen_rounds=2, ds_shortfall="partial")
    batch, m, _ = run("dynamic_sampling", algo, solved, prompts=2)
    assert batch.extras["no_valid_group"] is True and m[mn.SAMPLING_NO_VALID_GROUP] == 1.0
    assert m[mn.SAMPLING_SHORT_BATCH] == 1.0


def test_gpg_draws_again_below_its_threshold_and_puts_valid_groups_first() -> None:
    """gpg_threshold 0.5 of 2 prompts: round 1 has no valid group, round 2 one (1/2 >= 0.5), so it stops there with
    the valid group first, topped up with a degenerate one."""
    algo = AlgoConfig(group_filter="gpg", advantage="gpg", gpg_threshold=0.5)
    batch, m, asked = run("gpg", algo, [[[1, 1], [0, 0]], [[0, 0], [1, 0]]], prompts=2)
    assert asked == [2, 2]
    assert batch.group_ids.tolist() == [201, 201, 100, 100]
    assert m[mn.GPG_VALID_FRAC] == 0.5
