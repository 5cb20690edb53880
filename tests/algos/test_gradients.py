"""Gradients where the methods differ (docs/math.md §18.16.2-8): zero-gradient regions, CISPO's lack of them,
GSPO vs GSPO-token, GMPO's sign-aware per-token clip, Dr. GRPO vs GRPO token weights, the on-policy PPO = PG
identity, gradient-free IS weights and top-entropy masking."""

from __future__ import annotations

import math

import pytest
import torch

from grpokit.algos import (
    AlgoConfig,
    LossInputs,
    aggregate,
    compute_loss,
    get_policy_loss,
    is_weights,
    top_entropy_mask,
    top_entropy_threshold,
)

pytestmark = pytest.mark.filterwarnings("ignore:Converting a tensor with requires_grad=True:UserWarning")


def _tok_grad(name, log_ratio, adv, mode="token-mean", logp0=-1.0, **params):
    """Per-token gradient d Agg(loss) / d logp for one [N,T] batch with the given log-ratios (mask all ones)."""
    log_ratio = torch.as_tensor(log_ratio, dtype=torch.float64)
    logp = torch.full_like(log_ratio, logp0).requires_grad_(True)
    mask = torch.ones_like(log_ratio)
    tok, metrics = get_policy_loss(name)(
        logp, logp.detach() - log_ratio, torch.as_tensor(adv, dtype=torch.float64), mask, **params
    )
    loss = aggregate(tok, mask, mode, l_norm=float(log_ratio.shape[1]))
    (g,) = torch.autograd.grad(loss, logp)
    return g, loss.detach(), metrics


# ------------------------------------------------------------------------------------------ §18.16.2 / §9


@pytest.mark.parametrize("log_r", [3.0, -3.0, 0.0, 0.1])
@pytest.mark.parametrize("adv", [1.0, -1.0])
def test_9_cispo_has_no_zero_gradient_region(log_r, adv):
    """§9 / §18.16.2: CISPO gradient = -sg(r_hat) A grad logp for every token, even with r far outside any clip
    range (r = e^±3), where PPO's gradient is 0 for the clipped side."""
    r = math.exp(log_r)
    g, _, _ = _tok_grad("cispo", [[log_r]], [adv], cispo_eps_high=0.2)
    r_hat = min(r, 1.2)  # no lower clip (cispo_eps_low unset, the paper's setting)
    assert float(g) == pytest.approx(-r_hat * adv, rel=1e-12)
    g_abs, _, _ = _tok_grad("cispo", [[log_r]], [adv], cispo_cap_mode="absolute", cispo_cap=5.0)
    assert float(g_abs) == pytest.approx(-min(r, 5.0) * adv, rel=1e-12)
    g_ppo, _, _ = _tok_grad("ppo_clip", [[log_r]], [adv])
    ppo_clipped = (adv > 0 and r > 1.2) or (adv < 0 and r < 0.8)
    assert (float(g_ppo) == 0.0) == ppo_clipped


def test_9_cispo_lower_clip_when_set():
    """§9 verl form: r_hat = clip(r, 1 - eps_low, 1 + eps_high) — with eps_low 0.2, r = e^-3 gets weight 0.8."""
    g, _, _ = _tok_grad("cispo", [[-3.0]], [-1.0], cispo_eps_low=0.2, cispo_eps_high=0.2)
    assert float(g) == pytest.approx(0.8, rel=1e-12)


def test_9_cispo_compute_loss_default_has_no_lower_clip():
    """§9 via compute_loss: the recipe-wide eps_low (PPO's 0.2) must not leak into CISPO's lower bound."""
    logp = torch.tensor([[-1.0]], dtype=torch.float64, requires_grad=True)
    cfg = AlgoConfig(policy_loss="cispo", eps_low=0.2)
    loss, _ = compute_loss(
        LossInputs(logp=logp, mask=torch.ones(1, 1), advantages=torch.tensor([-1.0]), old_logp=logp.detach() + 3.0),
        cfg,
    )
    (g,) = torch.autograd.grad(loss, logp)
    assert float(g) == pytest.approx(math.exp(-3.0), rel=1e-12)


# ------------------------------------------------------------------------------------------ §7 GSPO


def test_7_gspo_whole_sequence_zero_gradient_when_clipped():
    """§7 / §18.16.2: when s_i is clipped the whole sequence gets zero gradient; an unclipped sequence's tokens
    all share the weight -A s / L."""
    log_ratio = [[0.3, 0.1, 0.2, 0.2], [0.001, -0.001, 0.0, 0.0]]  # s_0 = e^0.2 > 1+eps, s_1 = 1
    g, _, metrics = _tok_grad("gspo", log_ratio, [1.0, 1.0], mode="seq-mean-token-mean", eps_low=0.1, eps_high=0.1)
    assert torch.equal(g[0], torch.zeros(4, dtype=torch.float64))
    torch.testing.assert_close(g[1], torch.full((4,), -1.0 / 4 / 2, dtype=torch.float64))
    assert metrics["clipfrac_high"] == 0.5
    # the same sequence with A < 0 is on the unclipped side: every token gets +s/L
    g, _, _ = _tok_grad("gspo", log_ratio, [-1.0, 1.0], mode="seq-mean-token-mean", eps_low=0.1, eps_high=0.1)
    torch.testing.assert_close(g[0], torch.full((4,), math.exp(0.2) / 4 / 2, dtype=torch.float64))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_7_gspo_token_equals_gspo_with_sequence_advantages(seed):
    """§7 / §18.16.3: GSPO-token with A_{i,t} = A_i equals GSPO in value and gradient (seq-mean-token-mean),
    including clipped sequences and ragged lengths."""
    g = torch.Generator().manual_seed(seed)
    n, t = 6, 7
    logp = (-torch.rand(n, t, generator=g, dtype=torch.float64) * 2).requires_grad_(True)
    old = logp.detach() + 0.15 * torch.randn(n, t, generator=g, dtype=torch.float64)
    mask = (torch.arange(t)[None] < torch.tensor([7, 3, 1, 5, 7, 2])[:, None]).double()
    adv = torch.randn(n, generator=g, dtype=torch.float64)
    out = {}
    for name, a in (("gspo", adv), ("gspo_token", adv[:, None].expand(n, t))):
        tok, m = get_policy_loss(name)(logp, old, a, mask, eps_low=0.03, eps_high=0.04)
        loss = aggregate(tok, mask, "seq-mean-token-mean")
        out[name] = (loss.detach(), torch.autograd.grad(loss, logp)[0], m)
    torch.testing.assert_close(out["gspo"][0], out["gspo_token"][0], rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(out["gspo"][1], out["gspo_token"][1], rtol=1e-12, atol=1e-12)
    clipped = out["gspo"][2]["clipfrac_high"] + out["gspo"][2]["clipfrac_low"]
    assert 0 < clipped < 1  # the case mixes clipped and unclipped sequences


def test_7_gspo_token_allows_token_advantages():
    """§7 GSPO-token: token-specific advantages give token-specific gradients -A_{i,t} s_i / L_i."""
    lr = torch.tensor([[0.02, -0.02, 0.0]], dtype=torch.float64)
    g, _, _ = _tok_grad("gspo_token", lr, [[1.0, -2.0, 0.5]], mode="seq-mean-token-mean", eps_low=0.2, eps_high=0.2)
    torch.testing.assert_close(g[0], torch.tensor([-1.0, 2.0, -0.5], dtype=torch.float64) / 3)


# ------------------------------------------------------------------------------------------ §8 GMPO


def test_8_gmpo_sign_aware_per_token_zero_gradient():
    """§8 / §18.16.2: GMPO clips per token and one-sided by the sign of A, before the geometric mean: clipped
    tokens get zero gradient, the others -A s_bar / L; d > c is only clipped for A > 0, d < -c only for A < 0."""
    d = [[0.5, -0.5, 0.1], [0.5, -0.5, 0.1]]
    g, _, _ = _tok_grad("gmpo", d, [1.0, -1.0], mode="seq-mean-token-mean", clip_c=0.4)
    s_pos = math.exp((0.4 - 0.5 + 0.1) / 3)  # A>0: d=0.5 -> 0.4
    s_neg = math.exp((0.5 - 0.4 + 0.1) / 3)  # A<0: d=-0.5 -> -0.4
    torch.testing.assert_close(g[0], torch.tensor([0.0, -s_pos / 3 / 2, -s_pos / 3 / 2], dtype=torch.float64))
    torch.testing.assert_close(g[1], torch.tensor([s_neg / 3 / 2, 0.0, s_neg / 3 / 2], dtype=torch.float64))


def test_8_gmpo_asymmetric_clip_widths():
    """§8: separate c_low / c_high bounds: A>0 uses c_high only, A<0 uses c_low only."""
    g, _, _ = _tok_grad("gmpo", [[0.3, 0.1]], [1.0], mode="seq-mean-token-mean", clip_c_high=0.2, clip_c_low=5.0)
    assert g[0, 0] == 0.0 and g[0, 1] != 0.0
    g, _, _ = _tok_grad("gmpo", [[-0.3, -0.1]], [-1.0], mode="seq-mean-token-mean", clip_c_high=0.01, clip_c_low=0.2)
    assert g[0, 0] == 0.0 and g[0, 1] != 0.0


# ------------------------------------------------------------------------------------------ §2 PPO regions


@pytest.mark.parametrize(
    ("log_r", "adv", "params", "zero"),
    [
        (math.log(5.0), -1.0, {"dual_clip_c": 3.0}, True),  # dual-clip cap: A<0, r>c
        (math.log(2.5), -1.0, {"dual_clip_c": 3.0}, False),  # A<0, 1+eps < r < c: still gradient -A r
        (math.log(5.0), -1.0, {}, False),  # no dual clip: unbounded loss, gradient 5
        (math.log(5.0), 1.0, {"dual_clip_c": 3.0}, True),  # A>0, r>1+eps: ordinary clip
        (math.log(1.25), 1.0, {"eps_high": 0.28}, False),  # clip-higher lets it through
        (math.log(1.25), 1.0, {"eps_high": 0.2}, True),
        (math.log(0.75), 1.0, {"eps_high": 0.28}, False),  # A>0, r<1-eps: not clipped (min keeps r A)
        (math.log(0.75), -1.0, {"eps_high": 0.28}, True),  # A<0, r<1-eps_low
        (0.3, 0.0, {}, True),  # A = 0
    ],
)
def test_2_ppo_zero_gradient_regions(log_r, adv, params, zero):
    """§2 / §18.16.2 zero-gradient regions of PPO-clip, clip-higher (§5) and dual-clip; elsewhere -A r."""
    g, _, _ = _tok_grad("ppo_clip", [[log_r]], [adv], **params)
    if zero:
        assert float(g) == 0.0
    else:
        assert float(g) == pytest.approx(-adv * math.exp(log_r), rel=1e-12)


def test_2_ppo_two_sided_delta_bound():
    """§2 (INTELLECT-2 / TRL delta): r' = min(r, delta) on the unclipped branch: A<0, r > delta -> zero gradient."""
    g, loss, _ = _tok_grad("ppo_clip", [[math.log(5.0)]], [-1.0], delta=4.0)
    assert float(g) == 0.0 and float(loss) == pytest.approx(4.0)
    with pytest.raises(ValueError):
        _tok_grad("ppo_clip", [[0.0]], [-1.0], delta=1.1)


# ------------------------------------------------------------------------------------------ §18.16.4


def test_4_dr_grpo_token_weight_vs_grpo():
    """§18.16.4: Dr. GRPO (constant-norm) gives every token weight 1/(|B| L_norm) regardless of L_i; GRPO
    (seq-mean-token-mean) gives 1/(|B+| L_i) — shorter sequences get larger per-token updates."""
    lengths = [1, 2, 4, 0]
    n, t, l_norm = 4, 4, 16.0
    mask = (torch.arange(t)[None] < torch.tensor(lengths)[:, None]).double()
    adv = torch.tensor([1.0, 1.0, 1.0, 1.0], dtype=torch.float64)
    grads = {}
    for mode in ("constant-norm", "seq-mean-token-mean"):
        logp = torch.full((n, t), -1.0, dtype=torch.float64, requires_grad=True)
        cfg = AlgoConfig(policy_loss="ppo_clip", loss_agg=mode, l_norm=l_norm)
        loss, _ = compute_loss(LossInputs(logp=logp, mask=mask, advantages=adv), cfg)  # on-policy: r = 1
        grads[mode] = torch.autograd.grad(loss, logp)[0]
    dr = grads["constant-norm"]
    torch.testing.assert_close(dr, -mask / (n * l_norm))  # |B| = 4 counts the empty sequence
    grpo = grads["seq-mean-token-mean"]
    expected = torch.zeros(n, t, dtype=torch.float64)
    for i, length in enumerate(lengths):
        expected[i, :length] = -1.0 / (3 * length) if length else 0.0  # |B+| = 3
    torch.testing.assert_close(grpo, expected)


# ------------------------------------------------------------------------------------------ §18.16.6


@pytest.mark.parametrize("mode", ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "constant-norm"])
@pytest.mark.parametrize("params", [{}, {"eps_high": 0.28, "dual_clip_c": 3.0}, {"eps_low": 0.01, "eps_high": 0.01}])
def test_18_16_6_first_on_policy_minibatch_equals_plain_pg(mode, params):
    """§18.16.6: with pi_theta = pi_old numerically (r = 1, no clipping active) PPO/GRPO/DAPO gradients equal the
    plain policy gradient -Agg(A grad logp), whatever the clip settings."""
    g = torch.Generator().manual_seed(3)
    logp = -torch.rand(5, 6, generator=g, dtype=torch.float64)
    mask = (torch.arange(6)[None] < torch.tensor([6, 2, 4, 1, 5])[:, None]).double()
    adv = torch.randn(5, 6, generator=g, dtype=torch.float64)
    grads = []
    for name, extra in (("ppo_clip", params), ("pg", {})):
        lp = logp.clone().requires_grad_(True)
        tok, m = get_policy_loss(name)(lp, lp.detach(), adv, mask, **extra)
        grads.append(torch.autograd.grad(aggregate(tok, mask, mode, l_norm=6.0), lp)[0])
        if name == "ppo_clip":
            assert m["clipfrac_high"] == 0.0 and m["clipfrac_low"] == 0.0 and m["ratio_mean"] == 1.0
    torch.testing.assert_close(grads[0], grads[1], rtol=1e-12, atol=1e-14)


# ------------------------------------------------------------------------------------------ §18.16.7 / §10


@pytest.mark.parametrize("mode", ["token_truncate", "token_mask", "sequence_truncate", "sequence_mask"])
def test_10_is_weights_carry_no_gradient(mode):
    """§10 / §18.16.7: IS weights are computed without gradient, even if old_logp / samp_logp require grad."""
    old = torch.tensor([[-1.0, -0.5]], requires_grad=True)
    samp = torch.tensor([[-1.2, -0.4]], requires_grad=True)
    w = is_weights(old, samp, torch.ones(1, 2), mode, is_c_max=2.0)
    assert not w.requires_grad


def test_10_is_weight_applied_after_clipped_surrogate():
    """§10 / §18.16.7: l^TIS = min(rho, C) * l^clip — the weight multiplies the clipped loss value and gradient
    (clipped token: value -1.2 * 2, zero gradient; unclipped token: gradient -w A r)."""
    log_r = torch.tensor([[math.log(1.5), math.log(1.1)]], dtype=torch.float64)
    logp = torch.full((1, 2), -1.0, dtype=torch.float64, requires_grad=True)
    old = logp.detach() - log_r
    samp = old - torch.tensor([[0.9, math.log(1.5)]], dtype=torch.float64)  # rho = [e^0.9 -> C=2, 1.5]
    mask = torch.ones(1, 2)
    cfg = AlgoConfig(policy_loss="ppo_clip", loss_agg="token-mean", is_correction="token_truncate", is_c_max=2.0)
    loss, metrics = compute_loss(
        LossInputs(logp=logp, mask=mask, advantages=torch.tensor([1.0]), old_logp=old, samp_logp=samp), cfg
    )
    assert float(loss) == pytest.approx((2.0 * -1.2 + 1.5 * -1.1) / 2, rel=1e-12)
    (g,) = torch.autograd.grad(loss, logp)
    torch.testing.assert_close(g, torch.tensor([[0.0, -1.5 * 1.1 / 2]], dtype=torch.float64))
    assert metrics["mismatch/rho_max"] == pytest.approx(math.exp(0.9))


# ------------------------------------------------------------------------------------------ §18.16.8 / §14.2


def test_14_2_top_entropy_mask_keeps_rho_and_uses_unmasked_denominator():
    """§14.2 / §18.16.8: keep = 1[H >= quantile_{1-rho}(H over valid tokens)] keeps ~rho of valid tokens (never
    padding); the loss keeps the ORIGINAL token-mean denominator sum(m), not sum(keep)."""
    g = torch.Generator().manual_seed(0)
    n, t = 20, 50
    ent = torch.rand(n, t, generator=g, dtype=torch.float64)
    mask = (torch.arange(t)[None] < torch.randint(10, t + 1, (n,), generator=g)[:, None]).double()
    ent = torch.where(mask.bool(), ent, torch.full_like(ent, 100.0))  # padding has huge entropy: must not count
    for rho in (0.2, 0.5):
        keep = top_entropy_mask(ent, mask, rho)
        n_valid = int(mask.sum())
        frac = float(keep.sum()) / n_valid
        assert abs(frac - rho) <= 1.0 / n_valid + 1e-9
        assert torch.equal(keep * (1 - mask), torch.zeros_like(keep))
        tau = top_entropy_threshold(ent, mask, rho)
        assert float(ent[keep.bool()].min()) >= tau
    keep = top_entropy_mask(ent, mask, 0.2)
    logp = torch.full((n, t), -1.0, dtype=torch.float64, requires_grad=True)
    adv = torch.randn(n, generator=g, dtype=torch.float64)
    loss, metrics = compute_loss(
        LossInputs(logp=logp, mask=mask, advantages=adv, keep=keep),
        AlgoConfig(policy_loss="ppo_clip", loss_agg="token-mean"),
    )
    expected = -(adv[:, None] * keep).sum() / mask.sum()
    assert float(loss) == pytest.approx(float(expected), rel=1e-12)
    (grad,) = torch.autograd.grad(loss, logp)
    torch.testing.assert_close(grad, -adv[:, None] * keep / mask.sum())
    assert metrics["actor/entropy_keep_frac"] == pytest.approx(float(keep.sum() / mask.sum()))


def test_14_2_top_entropy_rho_edges():
    """§14.2: rho = 1 keeps every valid token (no-op); rho = 0 keeps only the maximum; no valid token -> empty."""
    ent = torch.tensor([[0.1, 0.5, 0.3, 9.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0]])
    assert torch.equal(top_entropy_mask(ent, mask, 1.0), mask)
    assert torch.equal(top_entropy_mask(ent, mask, 0.0), torch.tensor([[0.0, 1.0, 0.0, 0.0]]))
    assert torch.equal(top_entropy_mask(ent, torch.zeros(1, 4), 0.2), torch.zeros(1, 4))
