"""REINFORCE++ returns across masked positions (docs/math.md §2 convention), KL in the reward for REINFORCE++-baseline
(§15.2, §16), the adaptive KL controller's n (§2), and a top-entropy threshold that scales past 2^24 tokens and spans
ranks (§14.2); each test failed on the code before its fix."""

from __future__ import annotations

import os
import socket

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as tmp_mp

from grpokit.algos import AdaptiveKLController, get_advantage
from grpokit.algos.policy_loss import top_entropy_threshold


def test_15_2_reinforce_pp_carries_the_return_through_masked_positions() -> None:
    """A masked position inside a sequence (e.g. tool output) neither adds reward nor discounts: the return at
    a valid token equals the discounted sum over the *valid* tokens after it."""
    gamma = 0.5
    mask = torch.tensor([[1.0, 0.0, 0.0, 1.0, 1.0], [1.0, 1.0, 1.0, 0.0, 0.0]])
    rewards = torch.tensor([1.0, 0.0])
    tr = torch.tensor([[0.1, 9.0, 9.0, 0.2, 0.3], [0.4, 0.5, 0.6, 9.0, 9.0]])  # 9 sits on masked positions
    fn = get_advantage("reinforce_pp")
    adv = fn(rewards, torch.tensor([0, 1]), mask=mask, gamma=gamma, token_rewards=tr)
    # expected returns over valid tokens only; row 0's valid tokens are t=0,3,4 with the outcome at t*=4
    r0 = [0.1, 0.2, 0.3 + 1.0]
    g0 = [r0[0] + gamma * r0[1] + gamma**2 * r0[2], r0[1] + gamma * r0[2], r0[2]]
    r1 = [0.4, 0.5, 0.6]
    g1 = [r1[0] + gamma * r1[1] + gamma**2 * r1[2], r1[1] + gamma * r1[2], r1[2]]
    g = torch.tensor(g0 + g1, dtype=torch.float64)
    expected = (g - g.mean()) / torch.sqrt(g.var(unbiased=True) + 1e-8)
    got = adv[mask.bool()].double()
    torch.testing.assert_close(got, expected.to(got.dtype), rtol=1e-5, atol=1e-5)


def test_15_2_reinforce_pp_baseline_takes_kl_in_the_reward() -> None:
    """Token rewards (-beta k1) enter REINFORCE++-baseline as their per-sequence sum before the group mean."""
    fn = get_advantage("reinforce_pp_baseline")
    rewards = torch.tensor([1.0, 0.0, 1.0, 1.0])
    groups = torch.tensor([0, 0, 1, 1])
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0], [1.0, 0.0, 0.0], [1.0, 1.0, 1.0]])
    tr = -0.1 * torch.tensor([[1.0, 2.0, 5.0], [0.5, 0.5, 0.5], [3.0, 7.0, 7.0], [0.0, 1.0, 1.0]])
    with_kl = fn(rewards, groups, mask=mask, token_rewards=tr)
    summed = rewards + (tr * mask).sum(1)
    torch.testing.assert_close(with_kl, fn(summed, groups, mask=mask))
    assert not torch.allclose(with_kl, fn(rewards, groups, mask=mask))  # the group (1, 1) now has a signal


def test_2_adaptive_kl_coefficient_reacts_with_batch_size_n() -> None:
    """beta <- beta (1 + clip(KL/target - 1, -0.2, 0.2) n / horizon) with n = samples in the batch: at KL 10x the
    target and 256 samples a step, beta rises 0.2 * 256 / 1000 = 5.12% per step (the trainer used n = 1)."""
    ctl = AdaptiveKLController(0.05, target=0.1, horizon=1000)
    values = [ctl.update(1.0, 256) for _ in range(5)]
    assert values[-1] == pytest.approx(0.05 * (1 + 0.2 * 256 / 1000) ** 5)
    assert values[-1] > 1.25 * 0.05


def test_adaptive_kl_in_the_trainer_moves_beta_by_the_batch_size(tmp_path) -> None:
    """The ppo recipe's beta moves by n = batch size per step (it stayed at its start with n = 1)."""
    from grpokit.config import build_config
    from grpokit.training.trainer import Trainer

    cfg = build_config(
        "ppo",
        overrides=[
            "model.name=tiny",
            "model.precision=fp32",
            "rollout.prompts_per_step=2",
            "rollout.group_size=4",
            "rollout.max_new_tokens=4",
            "data.eval_size=2",
            "train.eval_every=0",
            "train.save_every=0",
            "algo.kl_target=1e-9",  # KL far above target: clip at +0.2
            "algo.kl_horizon=100",
            "critic.pretrain_max_steps=0",
            "reward.functions=[toy_rewards:vowel_frac]",
        ],
    )
    tr = Trainer(cfg, tmp_path)
    with torch.no_grad():  # move the policy away from the reference: KL >> 1e-9
        for p in tr.model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    beta0 = tr.kl_ctl.value
    m = tr.train_step().metrics
    n = m["train/batch_size"]
    tr.rewards.close()
    assert m["kl_ref/k1"] > 1e-6
    assert m["kl/coef"] == pytest.approx(beta0 * (1 + 0.2 * n / 100))


def test_14_2_threshold_matches_torch_quantile_and_scales_past_2_pow_24() -> None:
    gen = torch.Generator().manual_seed(0)
    ent = torch.rand(37, 11, generator=gen) * 3
    mask = (torch.rand(37, 11, generator=gen) > 0.3).float()
    for rho in (0.0, 0.2, 0.5, 0.77, 1.0):
        ref = float(torch.quantile(ent[mask.bool()], 1 - rho))
        assert top_entropy_threshold(ent, mask, rho) == pytest.approx(ref, rel=1e-6, abs=1e-6)
    big = torch.rand(1 << 12, (1 << 12) + 3, generator=gen)  # 2^24 + 12288 valid tokens: torch.quantile raises
    with pytest.raises(RuntimeError):
        torch.quantile(big.flatten(), 0.8)
    tau = top_entropy_threshold(big, torch.ones_like(big), 0.2)
    assert abs(tau - 0.8) < 2e-3 and float((big >= tau).float().mean()) == pytest.approx(0.2, abs=2e-3)


def _rank_threshold(rank: int, world: int, port: int, ent: torch.Tensor, mask: torch.Tensor, out: list) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        rows = torch.tensor_split(torch.arange(ent.shape[0]), world)[rank]
        tau = top_entropy_threshold(ent[rows], mask[rows], 0.2)
        out[rank] = tau
    finally:
        dist.destroy_process_group()


def test_14_2_threshold_is_computed_over_all_ranks() -> None:
    """Two gloo processes holding different halves of the batch get the same threshold as one process with all
    of it (and the halves alone would disagree)."""
    gen = torch.Generator().manual_seed(1)
    ent = torch.cat([torch.rand(6, 9, generator=gen), 2 + torch.rand(6, 9, generator=gen)])  # halves differ
    mask = (torch.rand(12, 9, generator=gen) > 0.2).float()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    manager = tmp_mp.Manager()
    out = manager.list([None, None])
    tmp_mp.spawn(_rank_threshold, args=(2, port, ent, mask, out), nprocs=2, join=True)
    whole = top_entropy_threshold(ent, mask, 0.2)
    assert out[0] == pytest.approx(whole, abs=1e-6) and out[1] == pytest.approx(whole, abs=1e-6)
    assert top_entropy_threshold(ent[:6], mask[:6], 0.2) != pytest.approx(whole, abs=1e-3)
