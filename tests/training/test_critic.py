"""The critic learns (issue 9): its own optimizer, learning rate and clip; value pretraining stops on explained
variance or its cap; value-based recipes train with a finite, falling value loss; a separate value model trains
without touching the policy; critic and critic-optimizer state survive a checkpoint."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from grpokit.algos.advantages import explained_variance, gae
from grpokit.config import CriticConfig, build_config
from grpokit.training import Trainer, fit
from grpokit.training.critic import Critic, CriticOptimizer, pretraining_done

TINY = [
    "model.name=tiny",
    "model.precision=fp32",
    "rollout.prompts_per_step=4",
    "rollout.group_size=4",
    "rollout.max_new_tokens=6",
    "data.eval_size=4",
    "train.eval_every=0",
    "train.save_every=0",
    "train.micro_batch_size=16",
    "reward.functions=[toy_rewards:vowel_frac]",
]


def _regression(critic: Critic, opt: CriticOptimizer, steps: int, gen: torch.Generator) -> float:
    """Fit V(h) = w.h on detached features; return the explained variance on fresh held-out features."""
    w = torch.randn(32, generator=gen)
    for _ in range(steps):
        h = torch.randn(16, 5, 32, generator=gen)
        loss = ((critic.from_features(h) - h @ w * 0.1) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    h = torch.randn(64, 5, 32, generator=gen)
    with torch.no_grad():
        target, pred = h @ w * 0.1, critic.from_features(h)
    return float(1 - (target - pred).var() / target.var())


def test_critic_head_with_its_own_optimizer_learns_a_regression() -> None:
    """50 steps at the critic's lr (1e-3) explain most of the variance; at the policy-scale lr the old shared
    optimizer used (5e-6) the head barely moves — why the critic has its own optimizer."""
    evs = {}
    for lr in (1e-3, 5e-6):
        torch.manual_seed(0)
        critic = Critic("head", 32)
        evs[lr] = _regression(
            critic, CriticOptimizer(critic, CriticConfig(lr=lr)), 50, torch.Generator().manual_seed(1)
        )
    assert evs[1e-3] > 0.5 and evs[5e-6] < 0.05, evs


def test_explained_variance_is_the_formula_and_undefined_when_the_returns_barely_vary() -> None:
    """Spec §2: EV = 1 - Var(G - V) / Var(G); a batch with one outcome everywhere (every answer right) whose returns
    differ only by a per-token KL penalty (ppo's kl_placement=reward) has no variance to explain: NaN, not -1e4."""
    gen = torch.Generator().manual_seed(0)
    n, t = 32, 24
    mask = torch.ones(n, t)
    values = 0.8 + 0.3 * torch.rand(n, t, generator=gen)
    token_rewards = -4e-4 * torch.rand(n, t, generator=gen)  # the KL penalty's crumbs
    token_rewards[:, -1] += 1.0  # every answer right
    returns = gae(token_rewards, values, mask, gamma=1.0, lam=1.0)[1]
    assert 5e-4 < float(returns.std()) < 5e-3  # as on claim 5's ppo steps with every answer right
    assert math.isnan(explained_variance(returns, values, mask))
    token_rewards[:1, -1] -= 1.0  # one wrong answer in 32: the returns vary, the formula applies
    returns = gae(token_rewards, values, mask, gamma=1.0, lam=1.0)[1]
    assert not math.isnan(explained_variance(returns, values, mask))
    token_rewards[1 : n // 2, -1] -= 1.0  # half wrong
    returns = gae(token_rewards, values, mask, gamma=1.0, lam=1.0)[1]
    g, v = returns.double().flatten(), values.double().flatten()
    want = 1 - float((g - v).var() / g.var())
    assert explained_variance(returns, values, mask) == pytest.approx(want, rel=1e-9)
    assert explained_variance(returns, returns, mask) == pytest.approx(1.0)


def test_pretraining_stops_on_explained_variance_or_cap() -> None:
    cfg = CriticConfig(pretrain_max_steps=5, pretrain_ev=0.5, pretrain_patience=2)
    assert not pretraining_done([0.6], cfg)
    assert pretraining_done([0.1, 0.6, 0.7], cfg)
    assert not pretraining_done([0.6, 0.1, 0.7], cfg)
    assert pretraining_done([0.0] * 5, cfg)
    assert not pretraining_done([math.nan, 0.9], cfg)


@pytest.mark.parametrize("kind", ["head", "model"])
def test_value_pretraining_then_training_with_a_falling_value_loss(kind: str, tmp_path: Path) -> None:
    """vapo with value pretraining (policy fixed), then 10 steps: pretraining rows are logged, the policy did not
    move while it ran, and the value loss is finite and falls (first 3 steps vs last 3)."""
    cfg = build_config(
        "vapo",
        overrides=[
            *TINY,
            f"critic.kind={kind}",
            f"critic.lr={1e-3 if kind == 'head' else 1e-4}",
            "critic.pretrain_max_steps=3",
            "critic.pretrain_ev=0.99",
            "train.steps=10",
        ],
    )
    trainer = Trainer(cfg, tmp_path)
    before = [p.detach().clone() for p in trainer.model.parameters()]
    rows = trainer.pretrain_critic()
    assert len(rows) == 3 and all(math.isfinite(r["critic_pretrain/value_loss"]) for r in rows)
    assert all(torch.equal(a, b) for a, b in zip(before, trainer.model.parameters())), "pretraining moved the policy"
    fit(trainer, None, eval_before=False)
    steps = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines() if '"time/step"' in x]
    vl = [r["critic/value_loss"] for r in steps]
    assert len(vl) == 10 and all(math.isfinite(v) for v in vl)
    assert sum(vl[-3:]) / 3 < sum(vl[:3]) / 3, vl
    assert all("critic/explained_variance" in r for r in steps)


def test_value_pretraining_of_a_value_model_skips_the_policy_forward_with_the_same_update(tmp_path: Path) -> None:
    """A separate value model (`critic.kind=model`) reads no policy feature, so value pretraining skips the
    policy's forward: the critic's parameters after one pretraining update equal those of the update that ran it."""
    import copy

    from grpokit.training.phases.update import run_update

    cfg = build_config("vapo", overrides=[*TINY, "critic.kind=model", "critic.lr=1e-4", "critic.pretrain_max_steps=1"])
    trainer = Trainer(cfg, tmp_path)
    b = trainer.draw()
    trainer.advantages(b)
    critic0, opt0 = copy.deepcopy(trainer.critic.state_dict()), copy.deepcopy(trainer.critic_opt.state_dict())
    after = []
    for skip in (False, True):
        trainer.critic.load_state_dict(critic0)
        trainer.critic_opt.load_state_dict(copy.deepcopy(opt0))
        calls = {"n": 0}
        state = trainer.train_state()

        def counting(*a, _f=state.forward, _calls=calls, **k):
            _calls["n"] += 1
            return _f(*a, **k)

        state.forward = counting
        m, _ = run_update(state, b, step=1, kl_coef=0.0, entropy_coef=0.0, train_policy=False, value_pretraining=skip)
        assert math.isfinite(m["critic/value_loss"])
        assert (calls["n"] == 0) == skip, calls
        after.append([p.detach().clone() for p in trainer.critic.parameters()])
    for a, b1 in zip(*after):
        torch.testing.assert_close(a, b1, rtol=0, atol=1e-6)
    trainer.critic.load_state_dict(critic0)
    moved = max(float((a - p0).abs().max()) for a, p0 in zip(after[0], trainer.critic.parameters()))
    assert moved > 1e-6  # the update did something


def test_critic_and_its_optimizer_survive_a_checkpoint(tmp_path: Path) -> None:
    # the finished run's last checkpoint with its optimizer state and critic (the default keeps the model only there)
    overrides = [
        *TINY,
        "critic.pretrain_max_steps=0",
        "train.steps=2",
        "train.save_every=2",
        "train.save_only_model=false",
    ]
    first = Trainer(build_config("ppo", overrides=overrides), tmp_path)
    fit(first, None, eval_before=False)
    again = Trainer(build_config("ppo", overrides=overrides), tmp_path)
    assert again.restore() == 2
    for a, b in zip(first.critic.parameters(), again.critic.parameters()):
        assert torch.equal(a, b)
    sa, sb = first.critic_opt.state_dict()["optimizer"], again.critic_opt.state_dict()["optimizer"]
    assert all(torch.equal(sa["state"][k]["exp_avg"], sb["state"][k]["exp_avg"]) for k in sa["state"])
