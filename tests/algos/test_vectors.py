"""Worked test vectors of docs/math.md §18 (the numbers of docs/math.md §18).

Every expected number below is copied from docs/math.md §18 (6 decimals), never recomputed with the code under test.
"""

from __future__ import annotations

import math

import pytest
import torch

from grpokit.algos import (
    aggregate,
    covariance_score,
    entropy_from_logits,
    gae,
    get_advantage,
    get_policy_loss,
    gpg_alpha,
    is_weights,
    kl_estimate,
    length_adaptive_lambda,
    logprobs_and_entropy,
    mismatch_stats,
    pkpo_rewards,
    soft_overlong_punishment,
    value_targets,
)

ATOL = 1e-6


def close(actual, expected, atol=ATOL):
    actual = torch.as_tensor(actual, dtype=torch.float64)
    expected = torch.as_tensor(expected, dtype=torch.float64)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    assert torch.allclose(actual, expected, atol=atol, rtol=0), f"{actual.tolist()} != {expected.tolist()}"


def leaf(values, dtype=torch.float64):
    return torch.tensor(values, dtype=dtype, requires_grad=True)


def grad_of(loss, x):
    (g,) = torch.autograd.grad(loss, x)
    return g


# ------------------------------------------------------------------------------------------------ §18.1


R = torch.tensor([1.0, 0.0, 0.0, 1.0])
G1 = torch.zeros(4, dtype=torch.long)


def test_18_1_grpo_advantage_eps_1e6():
    """§18.1 GRPO, Bessel std, eps 1e-6 (spec default): ±0.866024."""
    close(get_advantage("grpo")(R, G1), [0.866024, -0.866024, -0.866024, 0.866024])


def test_18_1_grpo_advantage_eps_1e4_trl():
    """§18.1 GRPO with TRL's eps 1e-4: ±0.865875 (so the eps parameter is really used)."""
    close(get_advantage("grpo")(R, G1, adv_eps=1e-4), [0.865875, -0.865875, -0.865875, 0.865875])


def test_18_1_grpo_default_eps_is_1e6():
    """§1.3: spec default eps_sigma = 1e-6 — the default call and adv_eps=1e-6 agree, 1e-4 differs."""
    a_default = get_advantage("grpo")(R, G1)
    close(a_default, get_advantage("grpo")(R, G1, adv_eps=1e-6), atol=0)
    assert not torch.allclose(a_default, get_advantage("grpo")(R, G1, adv_eps=1e-4), atol=1e-5, rtol=0)


def test_18_1_dr_grpo_advantage():
    """§18.1 Dr. GRPO: R - mean, no std: [0.5, -0.5, -0.5, 0.5]."""
    close(get_advantage("dr_grpo")(R, G1), [0.5, -0.5, -0.5, 0.5])


def test_18_1_rloo_advantage():
    """§18.1 RLOO leave-one-out: ±0.666667."""
    close(get_advantage("rloo")(R, G1), [0.666667, -0.666667, -0.666667, 0.666667])


@pytest.mark.parametrize("name", ["grpo", "dr_grpo", "rloo", "gpg"])
def test_18_1_all_equal_group_gives_zero(name):
    """§18.1 all-equal group [1,1,1,1] -> all advantages exactly 0."""
    a = get_advantage(name)(torch.ones(4), G1)
    assert torch.equal(a, torch.zeros(4))


def test_18_1_gpg_alpha_with_degenerate_second_group():
    """§18.1 GPG: second degenerate group -> B=8, M=4, alpha=2; advantages [1,-1,-1,1] and [0,0,0,0]."""
    rewards = torch.tensor([1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 1.0])
    groups = torch.tensor([0, 0, 0, 0, 1, 1, 1, 1])
    alpha, b, m = gpg_alpha(rewards, groups)
    assert (alpha, b, m) == (2.0, 8, 4)
    close(get_advantage("gpg")(rewards, groups), [1, -1, -1, 1, 0, 0, 0, 0])
    # without the correction the first group keeps its plain centred values
    close(get_advantage("gpg")(rewards, groups, gpg_alpha_correction=False), [0.5, -0.5, -0.5, 0.5, 0, 0, 0, 0])


def test_18_1_groups_are_independent():
    """§1.3: statistics are per group — interleaved group ids give each group its own §18.1 values."""
    rewards = torch.tensor([1.0, 5.0, 0.0, 5.0, 0.0, 7.0, 1.0, 7.0])
    groups = torch.tensor([3, 9, 3, 9, 3, 9, 3, 9])
    a = get_advantage("grpo")(rewards, groups)
    close(a[groups == 3], [0.866024, -0.866024, -0.866024, 0.866024])
    close(a[groups == 9], [-0.866024, -0.866024, 0.866024, 0.866024])


# ------------------------------------------------------------------------------------------------ §18.2


def _ppo_token(r, a, **params):
    """One-token PPO loss and its gradient d loss / d logp at ratio r (old_logp = 0, logp = log r)."""
    logp = leaf([[math.log(r)]])
    loss, metrics = get_policy_loss("ppo_clip")(
        logp, torch.zeros(1, 1, dtype=torch.float64), torch.tensor([a]), torch.ones(1, 1), **params
    )
    return float(loss.detach()), float(grad_of(loss.sum(), logp)), metrics


def test_18_2_ppo_positive_adv_clipped():
    """§18.2 A=1, r=1.5, eps 0.2 -> -1.2, clipped: zero gradient; counted in clipfrac_high (§17.4)."""
    value, grad, metrics = _ppo_token(1.5, 1.0)
    assert value == pytest.approx(-1.2, abs=ATOL)
    assert grad == 0.0
    assert metrics["clipfrac_high"] == 1.0 and metrics["clipfrac_low"] == 0.0


def test_18_2_ppo_negative_adv_clipped_low():
    """§18.2 A=-1, r=0.5 -> 0.8 (clipped at 1-eps), zero gradient, clipfrac_low = 1."""
    value, grad, metrics = _ppo_token(0.5, -1.0)
    assert value == pytest.approx(0.8, abs=ATOL)
    assert grad == 0.0
    assert metrics["clipfrac_low"] == 1.0


def test_18_2_ppo_negative_adv_large_ratio_and_dual_clip():
    """§18.2 A=-1, r=5 -> 5.0 (gradient -A r = 5); dual-clip c=3 -> 3.0 with zero gradient (§2)."""
    value, grad, _ = _ppo_token(5.0, -1.0)
    assert value == pytest.approx(5.0, abs=ATOL)
    assert grad == pytest.approx(5.0, abs=ATOL)
    value, grad, metrics = _ppo_token(5.0, -1.0, dual_clip_c=3.0)
    assert value == pytest.approx(3.0, abs=ATOL)
    assert grad == 0.0
    assert metrics["clipfrac_dual"] == 1.0


def test_18_2_clip_higher():
    """§18.2 A=1, r=1.25: eps_high 0.28 -> -1.25 with gradient -1.25; eps_high 0.2 -> -1.2 with none."""
    value, grad, _ = _ppo_token(1.25, 1.0, eps_low=0.2, eps_high=0.28)
    assert value == pytest.approx(-1.25, abs=ATOL)
    assert grad == pytest.approx(-1.25, abs=ATOL)
    value, grad, _ = _ppo_token(1.25, 1.0, eps_low=0.2, eps_high=0.2)
    assert value == pytest.approx(-1.2, abs=ATOL)
    assert grad == 0.0


def test_18_2_dual_clip_c_must_exceed_one():
    """§2: configurations with c <= 1 are rejected (verl asserts)."""
    with pytest.raises(ValueError):
        _ppo_token(1.0, -1.0, dual_clip_c=1.0)


# ------------------------------------------------------------------------------------------------ §18.3


LOSS_183 = torch.tensor([[1.0, 2.0, 0.0, 0.0], [1.0, 1.0, 1.0, 5.0], [9.0, 9.0, 9.0, 9.0]])
MASK_183 = torch.tensor([[1, 1, 0, 0], [1, 1, 1, 1], [0, 0, 0, 0]], dtype=torch.float32)


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("token-mean", 11 / 6),
        ("seq-mean-token-mean", 1.75),
        ("seq-mean-token-sum", 5.5),
        ("constant-norm", 11 / 12),
    ],
)
def test_18_3_aggregation(mode, expected):
    """§18.3 all four aggregation modes (constant-norm: L_norm=4, |B|=3 counts the empty row)."""
    value = aggregate(LOSS_183, MASK_183, mode, l_norm=4.0)
    assert float(value) == pytest.approx(expected, abs=ATOL)


def test_18_3_constant_norm_needs_l_norm():
    """§4: L_norm must be a fixed positive constant — missing l_norm is an error, not a silent default."""
    with pytest.raises(ValueError):
        aggregate(LOSS_183, MASK_183, "constant-norm")


# ------------------------------------------------------------------------------------------------ §18.4


def test_18_4_soft_overlong_punishment():
    """§18.4 L_max=20480, L_cache=4096: 16384->0, 16385->-0.000244, 18432->-0.5, 20480->-1, 20481->-1."""
    lengths = torch.tensor([16384, 16385, 18432, 20480, 20481])
    close(soft_overlong_punishment(lengths, 20480, 4096), [0.0, -0.000244140625, -0.5, -1.0, -1.0])


def test_18_4_soft_overlong_factor():
    """§5 verl form with penalty factor kappa: same zone shape, scaled by kappa."""
    lengths = torch.tensor([16384, 18432])
    close(soft_overlong_punishment(lengths, 20480, 4096, factor=0.5), [0.0, -0.25])


# ------------------------------------------------------------------------------------------------ §18.5


def _seq_loss(name, d, a, **params):
    """One sequence with token log-ratios d (old_logp = 0): aggregated seq-mean loss and d loss / d logp."""
    logp = leaf([d])
    mask = torch.ones(1, len(d))
    tok, metrics = get_policy_loss(name)(
        logp, torch.zeros(1, len(d), dtype=torch.float64), torch.tensor([a]), mask, **params
    )
    loss = aggregate(tok, mask, "seq-mean-token-mean")
    return float(loss.detach()), grad_of(loss, logp)[0], metrics


def test_18_5_gspo_unclipped():
    """§18.5 GSPO log-ratios [0.1,-0.3]: s = e^-0.1 = 0.904837; A=1 -> -0.904837, gradient -s/L on every token."""
    value, grad, _ = _seq_loss("gspo", [0.1, -0.3], 1.0)
    assert value == pytest.approx(-0.904837, abs=ATOL)
    close(grad, [-0.904837 / 2, -0.904837 / 2])


def test_18_5_gspo_clipped_whole_sequence():
    """§18.5 A=-1 with (3e-4, 4e-4) -> 0.9997, clipped: zero gradient for the whole sequence."""
    value, grad, metrics = _seq_loss("gspo", [0.1, -0.3], -1.0, eps_low=3e-4, eps_high=4e-4)
    assert value == pytest.approx(0.9997, abs=ATOL)
    assert torch.equal(grad, torch.zeros(2, dtype=torch.float64))
    assert metrics["clipfrac_low"] == 1.0


def test_18_5_gspo_default_clip_range():
    """§7 defaults: eps_low 3e-4, eps_high 4e-4 (the §18.5 value is reproduced without passing them)."""
    value, _, _ = _seq_loss("gspo", [0.1, -0.3], -1.0)
    assert value == pytest.approx(0.9997, abs=ATOL)


# ------------------------------------------------------------------------------------------------ §18.6


def test_18_6_gmpo_positive_advantage():
    """§18.6 GMPO c=0.4, A=1, d=[0.5,-0.1,0.2] -> d'=[0.4,-0.1,0.2], ratio e^(1/6)=1.181360, loss -1.181360."""
    value, grad, metrics = _seq_loss("gmpo", [0.5, -0.1, 0.2], 1.0, clip_c=0.4)
    assert value == pytest.approx(-1.181360, abs=ATOL)
    # token 0 is clipped (zero gradient), the others get -A s/L
    close(grad, [0.0, -1.181360 / 3, -1.181360 / 3])
    assert metrics["clipfrac_high"] == pytest.approx(1 / 3)


def test_18_6_gmpo_negative_advantage():
    """§18.6 A=-1, d=[-0.5,0.1,0.6] -> d'=[-0.4,0.1,0.6], ratio e^0.1=1.105171, loss 1.105171 (sign-aware clip)."""
    value, grad, metrics = _seq_loss("gmpo", [-0.5, 0.1, 0.6], -1.0, clip_c=0.4)
    assert value == pytest.approx(1.105171, abs=ATOL)
    close(grad, [0.0, 1.105171 / 3, 1.105171 / 3])
    assert metrics["clipfrac_low"] == pytest.approx(1 / 3)
    assert metrics["clipfrac_high"] == 0.0  # d=0.6 > c is NOT clipped for A<0 (sign-aware, §8/§17.4)


# ------------------------------------------------------------------------------------------------ §18.7


@pytest.mark.parametrize(
    ("params", "weight"),
    [
        ({"cispo_cap_mode": "relative", "cispo_eps_low": 10.0, "cispo_eps_high": 0.2}, 1.2),  # verl form
        ({"cispo_cap_mode": "absolute", "cispo_cap": 5.0}, 1.5),  # TRL / ScaleRL form
    ],
)
@pytest.mark.parametrize("adv", [1.0, -0.5])
def test_18_7_cispo_weight_and_gradient(params, weight, adv):
    """§18.7 CISPO r=1.5: verl form weight 1.2, TRL form weight 1.5; gradient = -weight * A * grad logp."""
    logp_val = -0.7
    logp = leaf([[logp_val]])
    old = torch.tensor([[logp_val - math.log(1.5)]], dtype=torch.float64)
    loss, _ = get_policy_loss("cispo")(logp, old, torch.tensor([adv]), torch.ones(1, 1), **params)
    assert float(loss.detach()) == pytest.approx(-weight * adv * logp_val, abs=ATOL)
    assert float(grad_of(loss.sum(), logp)) == pytest.approx(-weight * adv, abs=ATOL)


# ------------------------------------------------------------------------------------------------ §18.8


def test_18_8_token_tis_and_mis():
    """§18.8 old=-1.0, samp=-1.9: rho = e^0.9 = 2.459603; TIS(C=2) -> 2.0; MIS [0.5, 2] -> 0; C=3 keeps rho."""
    old, samp, mask = torch.tensor([[-1.0]]), torch.tensor([[-1.9]]), torch.ones(1, 1)
    close(is_weights(old, samp, mask, "token_truncate", is_c_max=2.0), [[2.0]])
    close(is_weights(old, samp, mask, "token_mask", is_c_max=2.0, is_c_min=0.5), [[0.0]])
    close(is_weights(old, samp, mask, "token_mask", is_c_max=3.0, is_c_min=0.5), [[2.459603]])
    close(is_weights(old, samp, mask, "token_truncate", is_c_max=3.0), [[2.459603]])
    stats = mismatch_stats(old, samp, mask, c=2.0)
    assert stats["rho_max"] == pytest.approx(2.459603, abs=ATOL)
    assert stats["frac_high"] == 1.0 and stats["frac_low"] == 0.0


def test_18_8_sequence_tis_and_mis():
    """§18.8 token log rho [0.3,0.2,0.4] -> sequence ratio e^0.9 = 2.459603 (truncated at C; masked outside)."""
    samp = torch.zeros(1, 4)
    old = torch.tensor([[0.3, 0.2, 0.4, 5.0]])  # last position is padding: must not enter the product
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0]])
    close(is_weights(old, samp, mask, "sequence_truncate", is_c_max=3.0), [[2.459603] * 3 + [0.0]])
    close(is_weights(old, samp, mask, "sequence_truncate", is_c_max=2.0), [[2.0] * 3 + [0.0]])
    close(is_weights(old, samp, mask, "sequence_mask", is_c_max=3.0), [[2.459603] * 3 + [0.0]])
    close(is_weights(old, samp, mask, "sequence_mask", is_c_max=2.0), [[0.0] * 4])
    # geometric-mean ratio exp(Lambda_i / L_i) = e^0.3 = 1.349859 (§17.6); for one sequence the token-mean of
    # lambda is Lambda / L, and the k1 mismatch KL is its negative
    stats = mismatch_stats(old, samp, mask, c=2.0)
    assert math.exp(-stats["kl_k1"]) == pytest.approx(1.349859, abs=ATOL)
    assert stats["seq_frac_high"] == 1.0  # Lambda = 0.9 > log 2


def test_18_8_is_c_max_must_be_positive():
    """§10 edge cases: C <= 0 is invalid (verl raises)."""
    with pytest.raises(ValueError):
        is_weights(torch.zeros(1, 1), torch.zeros(1, 1), torch.ones(1, 1), "token_truncate", is_c_max=0.0)


# ------------------------------------------------------------------------------------------------ §18.9


REW_189 = torch.tensor([[0.0, 0.0, 1.0]])
VAL_189 = torch.tensor([[0.5, 0.6, 0.7]])
MASK_189 = torch.ones(1, 3)


@pytest.mark.parametrize(
    ("lam", "adv", "ret"),
    [
        (0.95, [0.46575, 0.385, 0.3], [0.96575, 0.985, 1.0]),
        (1.0, [0.5, 0.4, 0.3], [1.0, 1.0, 1.0]),
        (0.0, [0.1, 0.1, 0.3], [0.6, 0.7, 1.0]),
    ],
)
def test_18_9_gae(lam, adv, ret):
    """§18.9 GAE r=[0,0,1], V=[0.5,0.6,0.7], gamma=1: advantages and returns for lambda 0.95 / 1 / 0."""
    a, g = gae(REW_189, VAL_189, MASK_189, gamma=1.0, lam=lam)
    close(a, [adv])
    close(g, [ret])
    # the same targets from an outcome reward placed at t* (decoupled-GAE critic targets, §11)
    close(value_targets(torch.tensor([1.0]), VAL_189, MASK_189, gamma=1.0, lam_critic=lam), [ret])


def test_18_9_gae_per_sequence_lambda_and_padding():
    """§18.9 / §11: a per-sequence lambda tensor gives each row its own §18.9 values; right padding is ignored
    (V after t* is 0: no bootstrap from padding values)."""
    rew = torch.tensor([[0.0, 0.0, 1.0, 0.0], [0.0, 0.0, 1.0, 0.0]])
    val = torch.tensor([[0.5, 0.6, 0.7, 9.0], [0.5, 0.6, 0.7, 9.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0], [1.0, 1.0, 1.0, 0.0]])
    a, g = gae(rew, val, mask, gamma=1.0, lam=torch.tensor([0.95, 0.0]))
    close(a, [[0.46575, 0.385, 0.3, 0.0], [0.1, 0.1, 0.3, 0.0]])
    close(g, [[0.96575, 0.985, 1.0, 0.0], [0.6, 0.7, 1.0, 0.0]])


def test_2_gae_skips_masked_middle_positions():
    """§2: masked positions inside a sequence (multi-turn tool output) carry next value and advantage through
    unchanged, i.e. the result equals GAE on the compressed sequence."""
    rew = torch.tensor([[0.0, 5.0, 0.0, 1.0]])
    val = torch.tensor([[0.5, 3.0, 0.6, 0.7]])
    mask = torch.tensor([[1.0, 0.0, 1.0, 1.0]])
    a, g = gae(rew, val, mask, gamma=1.0, lam=0.95)
    close(a, [[0.46575, 0.0, 0.385, 0.3]])
    close(g, [[0.96575, 0.0, 0.985, 1.0]])


def test_18_9_length_adaptive_lambda():
    """§18.9 alpha=0.05: L=10 -> 0 (clamped from -1), 20 -> 0, 100 -> 0.8, 1000 -> 0.98, 20000 -> 0.999."""
    close(length_adaptive_lambda(torch.tensor([10, 20, 100, 1000, 20000]), 0.05), [0.0, 0.0, 0.8, 0.98, 0.999])


def test_18_9_vapo_gae_uses_length_adaptive_lambda():
    """§11: the vapo_gae estimator (no whitening) equals GAE with lambda = 1 - 1/(alpha L) per sequence.
    With alpha = 0.05 and L = 3, lambda = 1 - 1/0.15 < 0 is clamped to 0 -> §18.9's lambda=0 row."""
    adv = get_advantage("vapo_gae")(
        torch.tensor([1.0]), torch.zeros(1), values=VAL_189, mask=MASK_189, gae_alpha=0.05, adv_whiten=False
    )
    close(adv, [[0.1, 0.1, 0.3]])
    # alpha large enough that lambda = 1 - 1/(alpha * 3) = 0.95 -> alpha = 1/(0.15)
    adv = get_advantage("vapo_gae")(
        torch.tensor([1.0]),
        torch.zeros(1),
        values=VAL_189,
        mask=MASK_189,
        gae_alpha=1 / 0.15,
        adv_whiten=False,
    )
    close(adv, [[0.46575, 0.385, 0.3]], atol=1e-5)


# ------------------------------------------------------------------------------------------------ §18.10


@pytest.mark.parametrize(("kind", "expected"), [("k1", 0.5), ("k2", 0.125), ("k3", 0.106531)])
def test_18_10_kl_values(kind, expected):
    """§18.10 logp=-1.0, ref=-1.5 (delta 0.5): k1 0.5, k2 0.125, k3 0.106531."""
    value = kl_estimate(torch.tensor([[-1.0]]), torch.tensor([[-1.5]]), kind)
    assert float(value) == pytest.approx(expected, abs=ATOL)


def test_18_10_kl_aliases_and_plus_variants():
    """§16 verl names: kl=k1, mse=k2, low_var_kl=k3; k1+/k3+ keep the value of k1/k3."""
    lp, ref = torch.tensor([[-1.0]]), torch.tensor([[-1.5]])
    for alias, kind in (("kl", "k1"), ("mse", "k2"), ("low_var_kl", "k3"), ("k1+", "k1"), ("k3+", "k3")):
        assert float(kl_estimate(lp, ref, alias)) == pytest.approx(float(kl_estimate(lp, ref, kind)), abs=1e-7)


PI = torch.tensor([0.5, 0.3, 0.2], dtype=torch.float64)
REF = torch.tensor([0.2, 0.5, 0.3], dtype=torch.float64)


@pytest.mark.parametrize(("kind", "expected"), [("k1", 0.223805), ("k2", 0.265479), ("k3", 0.223805)])
def test_18_10_exact_expectations(kind, expected):
    """§18.10 exact expectations over pi=[.5,.3,.2], ref=[.2,.5,.3]: E[k1]=E[k3]=KL=0.223805, E[k2]=0.265479."""
    k = kl_estimate(PI.log()[None], REF.log()[None], kind)[0]
    assert float((PI * k).sum()) == pytest.approx(expected, abs=ATOL)
    assert float((PI * (PI / REF).log()).sum()) == pytest.approx(0.223805, abs=ATOL)


def _expected_kl_grad(kind):
    """E_{a~pi}[grad_theta k(a)] with the derivative only through log pi_theta(a), summed exactly over a."""
    theta = leaf([0.3, -0.2, 0.1])
    logp = torch.log_softmax(theta, -1)
    k = kl_estimate(logp[None], REF.log()[None], kind)[0]
    return grad_of((logp.exp().detach() * k).sum(), theta)


def _true_kl_grad(forward: bool):
    theta = leaf([0.3, -0.2, 0.1])
    logp = torch.log_softmax(theta, -1)
    kl = (REF * (REF.log() - logp)).sum() if forward else (logp.exp() * (logp - REF.log())).sum()
    return grad_of(kl, theta)


def test_18_10_k1_expected_gradient_is_zero():
    """§16/§18.10: E[grad k1] = 0 — a k1 loss regularises nothing in expectation."""
    close(_expected_kl_grad("k1"), [0.0, 0.0, 0.0], atol=1e-12)


def test_18_10_k2_expected_gradient_is_reverse_kl_gradient():
    """§18.10: E[grad k2] = [0.230323,-0.214500,-0.015823] = grad KL(pi||ref)."""
    g = _expected_kl_grad("k2")
    close(g, [0.230323, -0.214500, -0.015823])
    close(g, _true_kl_grad(forward=False), atol=1e-12)


def test_18_10_k3_expected_gradient_is_forward_kl_gradient():
    """§18.10: E[grad k3] = [0.212327,-0.249911,0.037585] = grad KL(ref||pi) (not the reverse-KL gradient)."""
    g = _expected_kl_grad("k3")
    close(g, [0.212327, -0.249911, 0.037585])
    close(g, _true_kl_grad(forward=True), atol=1e-12)
    assert not torch.allclose(g, _true_kl_grad(forward=False), atol=1e-3)


@pytest.mark.parametrize("kind", ["k1+", "k3+"])
def test_16_plus_estimators_have_k2_gradient(kind):
    """§16: `k1+`/`k3+` use the k2 gradient via straight-through, so E[grad] = grad KL(pi||ref)."""
    close(_expected_kl_grad(kind), [0.230323, -0.214500, -0.015823])


# ------------------------------------------------------------------------------------------------ §18.11


@pytest.mark.parametrize(
    ("logits", "temperature", "expected"),
    [([0.0, 0.0], 1.0, 0.693147), ([2.0, 1.0, 0.0], 1.0, 0.832396), ([2.0, 1.0, 0.0], 0.5, 0.441057)],
)
def test_18_11_entropy(logits, temperature, expected):
    """§18.11 entropy: [0,0] -> ln 2; [2,1,0] -> 0.832396; [2,1,0] at T_s=0.5 -> 0.441057 (logits / T, §1.2)."""
    z = torch.tensor([logits])
    assert float(entropy_from_logits(z / temperature)[0]) == pytest.approx(expected, abs=ATOL)
    logp, ent = logprobs_and_entropy(z[None], torch.zeros(1, 1, dtype=torch.long), temperature=temperature)
    assert float(ent) == pytest.approx(expected, abs=ATOL)
    assert float(logp) == pytest.approx(float(torch.log_softmax(z / temperature, -1)[0, 0]), abs=ATOL)


def test_1_6_entropy_with_minus_inf_vocab_padding():
    """§1.6: vocabulary-padding logits are -inf; they must not turn the entropy into NaN (0 * -inf)."""
    z = torch.tensor([[2.0, 1.0, 0.0, float("-inf"), float("-inf")]])
    assert float(entropy_from_logits(z)[0]) == pytest.approx(0.832396, abs=ATOL)
    logp, ent = logprobs_and_entropy(z[None], torch.zeros(1, 1, dtype=torch.long), temperature=0.5)
    assert float(ent) == pytest.approx(0.441057, abs=ATOL)
    zg = z[None].clone().requires_grad_(True)
    logp, ent = logprobs_and_entropy(zg, torch.zeros(1, 1, dtype=torch.long))
    (logp + ent).sum().backward()
    assert torch.isfinite(zg.grad).all()
    assert torch.equal(zg.grad[0, 0, 3:], torch.zeros(2))


# ------------------------------------------------------------------------------------------------ §18.12


def test_18_12_pass_at_k_advantage():
    """§18.12 N=8, 2 correct, k=4: A_pos = 0.522233, A_neg = -0.174078."""
    rewards = torch.tensor([1.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0])
    a = get_advantage("pass_at_k")(rewards, torch.zeros(8), pass_k=4)
    close(a, [0.522233 if r else -0.174078 for r in rewards.tolist()])


def test_15_3_pass_at_k_zero_sigma_groups():
    """§15.3 edge: sigma = 0 when no sample is correct or N_neg < k (all k-subsets contain a correct one) -> 0."""
    rewards = torch.tensor([0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0])
    a = get_advantage("pass_at_k")(rewards, torch.tensor([0, 0, 0, 0, 1, 1, 1, 1]), pass_k=3)
    assert torch.equal(a, torch.zeros(8))
    with pytest.raises(ValueError):
        get_advantage("pass_at_k")(rewards[:3], torch.zeros(3), pass_k=4)


def test_18_12_pkpo_rewards():
    """§18.12 PKPO effective rewards (N=8, c=2, k=4): correct 0.5, incorrect 0.357143."""
    rewards = torch.tensor([1.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0])
    eff = pkpo_rewards(rewards, torch.zeros(8), pass_k=4)
    close(eff, [0.5 if r else 0.357143 for r in rewards.tolist()])
    # PKPO advantage = effective reward minus its group mean (spec [X] baseline)
    close(get_advantage("pkpo")(rewards, torch.zeros(8), pass_k=4), eff - eff.mean())


# ------------------------------------------------------------------------------------------------ §18.13


def test_18_13_reinforce_pp_baseline():
    """§18.13 rewards [1,0,0,0], lengths [2,1,1,2]: centred [.75,-.25,-.25,-.25]; token-whitened (token order)
    [1.290994,1.290994,-0.645497,-0.645497,-0.645497,-0.645497]."""
    mask = torch.tensor([[1.0, 1.0], [1.0, 0.0], [1.0, 0.0], [1.0, 1.0]])
    adv = get_advantage("reinforce_pp_baseline")(torch.tensor([1.0, 0.0, 0.0, 0.0]), torch.zeros(4), mask=mask)
    close(adv[mask.bool()], [1.290994, 1.290994, -0.645497, -0.645497, -0.645497, -0.645497])
    assert torch.equal(adv[~mask.bool()], torch.zeros(2))


# ------------------------------------------------------------------------------------------------ §18.14


A_COV = torch.tensor([1.0, 1.0, -1.0, -1.0])
LP_COV = torch.tensor([[-0.1], [-2.0], [-0.2], [-3.0]])


def test_18_14_covariance_score():
    """§18.14 A=[1,1,-1,-1], logp=[-0.1,-2,-0.2,-3]: Cov = [1.225,-0.675,-1.125,1.675] (also as one sequence with
    token-level advantages; padding excluded from the means and zeroed)."""
    close(covariance_score(LP_COV, A_COV, torch.ones(4, 1)).flatten(), [1.225, -0.675, -1.125, 1.675])
    lp = torch.tensor([[-0.1, -2.0, -0.2, -3.0, 7.0]])
    adv = torch.tensor([[1.0, 1.0, -1.0, -1.0, 9.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0, 1.0, 0.0]])
    close(covariance_score(lp, adv, mask), [[1.225, -0.675, -1.125, 1.675, 0.0]])


def test_18_14_kl_cov_selects_top1_token_4():
    """§18.14 KL-Cov top-1 selects token 4: only it gets the coef*|logp - old| term; others l = -A r (no clip)."""
    logp = LP_COV.clone().double().requires_grad_(True)
    old = logp.detach() - 0.5  # r = e^0.5 everywhere, far outside any PPO clip range: KL-Cov does not clip
    loss, metrics = get_policy_loss("kl_cov")(
        logp, old, A_COV.double(), torch.ones(4, 1), kl_cov_ratio=0.25, kl_cov_coef=2.0
    )
    r = math.exp(0.5)
    expected = [-1 * r, -1 * r, r, r + 2.0 * 0.5]
    close(loss.flatten(), expected)
    assert metrics["kl_cov_selected_frac"] == 0.25
    close(grad_of(loss.sum(), logp).flatten(), [-r, -r, r, r + 2.0])


def test_18_14_clip_cov_candidates_are_tokens_1_and_4():
    """§18.14 Clip-Cov (omega 1..5): candidates are tokens 1 and 4; with n >= 2 both are detached, with n = 1
    exactly one of them; the others keep the PPO gradient -A r."""
    mask = torch.ones(4, 1)
    for ratio, n_detached in ((1.0, 2), (0.0, 1)):
        for seed in range(5):
            logp = LP_COV.clone().double().requires_grad_(True)
            gen = torch.Generator().manual_seed(seed)
            loss, metrics = get_policy_loss("clip_cov")(
                logp,
                logp.detach(),
                A_COV.double(),
                mask,
                clip_cov_ratio=ratio,
                clip_cov_lb=1.0,
                clip_cov_ub=5.0,
                generator=gen,
            )
            g = grad_of(loss.sum(), logp).flatten()
            detached = (g == 0).nonzero().flatten().tolist()
            assert len(detached) == n_detached
            assert set(detached) <= {0, 3}
            assert metrics["cov_detached_frac"] == n_detached / 4
            close(g[[1, 2]], [-1.0, 1.0])  # non-candidates: gradient -A r with r = 1


def test_14_1_clip_cov_excludes_ppo_clipped_tokens():
    """§14.1: a candidate already clipped by the PPO rule is not a candidate (token 4 clipped -> only token 1)."""
    logp = LP_COV.clone().double().requires_grad_(True)
    old = logp.detach().clone()
    old[3] += 1.0  # token 4: r = e^-1 < 1 - eps_low for A = -1 -> PPO-clipped
    loss, _ = get_policy_loss("clip_cov")(
        logp, old, A_COV.double(), torch.ones(4, 1), eps_low=0.2, eps_high=0.2, clip_cov_ratio=1.0
    )
    g = grad_of(loss.sum(), logp).flatten()
    assert g[0] == 0.0  # token 1 detached by Clip-Cov
    assert g[3] == 0.0  # token 4 zero because of the PPO clip, not Clip-Cov
    assert float(loss[3].detach()) == pytest.approx(0.8, abs=ATOL)  # its PPO clipped loss value is kept
