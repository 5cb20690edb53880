"""Edge cases of docs/math.md §19.1 (and §1.5 rule 1): zero-variance groups, empty masks, groups of size 1,
all-masked batches, and log-ratio overflow."""

from __future__ import annotations

import math

import pytest
import torch

from grpokit.algos import (
    AlgoConfig,
    LossInputs,
    aggregate,
    compute_loss,
    get_advantage,
    get_policy_loss,
    gpg_alpha,
    is_weights,
    kl_estimate,
    list_methods,
    mismatch_stats,
)
from grpokit.algos.registry import AGGREGATIONS, POLICY_LOSSES

pytestmark = pytest.mark.filterwarnings("ignore:Converting a tensor with requires_grad=True:UserWarning")

ALL_LOSSES = POLICY_LOSSES.names()
ALL_MODES = AGGREGATIONS.names()
T = 5


def _batch(n=8, t=T, seed=0, lengths=None):
    g = torch.Generator().manual_seed(seed)
    logp = (-torch.rand(n, t, generator=g, dtype=torch.float64) * 3).requires_grad_(True)
    old = logp.detach() + 0.3 * torch.randn(n, t, generator=g, dtype=torch.float64)  # off-policy: r != 1
    lengths = lengths if lengths is not None else [t, 3, 1, 4, t, 2, 4, 3][:n]
    mask = (torch.arange(t)[None] < torch.tensor(lengths)[:, None]).double()
    return logp, old, mask


def test_registries_list_the_expected_methods():
    """§18/§19: every method the edge-case matrix names is registered (guards the parametrisations below)."""
    m = list_methods()
    for name in (
        "grpo",
        "dr_grpo",
        "rloo",
        "gpg",
        "reinforce_pp",
        "reinforce_pp_baseline",
        "pass_at_k",
        "gae",
    ):
        assert name in m["advantage"]
    for name in ("ppo_clip", "pg", "gspo", "gspo_token", "gmpo", "cispo", "clip_cov", "kl_cov"):
        assert name in m["policy_loss"]
    assert set(m["aggregation"]) == {
        "token-mean",
        "seq-mean-token-mean",
        "seq-mean-token-sum",
        "constant-norm",
    }
    assert {"k1", "k2", "k3"} <= set(m["kl_estimator"])


# ------------------------------------------------------------------------------------------ zero variance

# (advantage, advantage params, AlgoConfig fields) for each algorithm of §18.16.5 / §19.1
ZERO_VAR_METHODS = {
    "grpo": ("grpo", {}, dict(policy_loss="ppo_clip", loss_agg="seq-mean-token-mean")),
    "dr_grpo": ("dr_grpo", {}, dict(policy_loss="ppo_clip", loss_agg="constant-norm", l_norm=float(T))),
    "dapo": ("grpo", {}, dict(policy_loss="ppo_clip", eps_high=0.28, loss_agg="token-mean")),
    "gpg": ("gpg", {}, dict(policy_loss="pg", loss_agg="token-mean")),
    "gspo": ("grpo", {}, dict(policy_loss="gspo", eps_low=0.5, eps_high=0.5, loss_agg="seq-mean-token-mean")),
    "gspo_token": (
        "grpo",
        {},
        dict(policy_loss="gspo_token", eps_low=0.5, eps_high=0.5, loss_agg="seq-mean-token-mean"),
    ),
    "gmpo": ("grpo", {"adv_eps": 1e-8}, dict(policy_loss="gmpo", loss_agg="seq-mean-token-mean")),
    "cispo": ("grpo", {}, dict(policy_loss="cispo", loss_agg="token-mean")),
    "rloo": ("rloo", {}, dict(policy_loss="ppo_clip", loss_agg="token-mean")),
}

# group 0 degenerate with real-valued rewards (exactly equal), group 1 informative
REWARDS = torch.tensor([0.7, 0.7, 0.7, 0.7, 1.0, 0.0, 0.25, 1.0], dtype=torch.float64)
GROUPS = torch.tensor([0, 0, 0, 0, 1, 1, 1, 1])


@pytest.mark.parametrize("method", list(ZERO_VAR_METHODS))
def test_19_1_zero_variance_group_has_zero_policy_gradient(method):
    """§19.1 / §18.16.5: a zero-variance group gets A = 0 exactly and contributes zero policy gradient, even off
    policy (r != 1); the informative group still gets a gradient."""
    adv_name, adv_params, cfg_fields = ZERO_VAR_METHODS[method]
    adv = get_advantage(adv_name)(REWARDS, GROUPS, **adv_params)
    assert torch.equal(adv[:4], torch.zeros(4))
    assert adv[4:].abs().min() > 0
    logp, old, mask = _batch()
    loss, _ = compute_loss(LossInputs(logp=logp, mask=mask, advantages=adv, old_logp=old), AlgoConfig(**cfg_fields))
    (grad,) = torch.autograd.grad(loss, logp)
    assert torch.equal(grad[:4], torch.zeros(4, T, dtype=grad.dtype))
    assert grad[4:].abs().sum() > 0


@pytest.mark.parametrize("value", [9.70053001806553, 0.1, 1 / 3, -2.75])
@pytest.mark.parametrize("name", ["grpo", "dr_grpo", "rloo", "gpg"])
def test_1_3_equal_real_rewards_give_exactly_zero(name, value):
    """§1.3: a group is zero-variance iff its rewards are equal; float64 rewards whose float mean is not exact
    (e.g. 10 copies of 9.70053001806553) must still give A = 0 exactly, not a rounding residue / std."""
    rewards = torch.full((10,), value, dtype=torch.float64)
    assert torch.equal(get_advantage(name)(rewards, torch.zeros(10)), torch.zeros(10))


def test_19_1_grpo_zero_variance_group_keeps_kl_term():
    """§3 / §19.1: with KL-as-loss a zero-variance group contributes only the KL term's gradient."""
    adv = get_advantage("grpo")(REWARDS, GROUPS)
    logp, old, mask = _batch()
    ref = logp.detach() - 0.2
    cfg = AlgoConfig(policy_loss="ppo_clip", loss_agg="seq-mean-token-mean", kl_coef=0.1, kl_estimator="k3")
    loss, _ = compute_loss(LossInputs(logp=logp, mask=mask, advantages=adv, old_logp=old, ref_logp=ref), cfg)
    (grad,) = torch.autograd.grad(loss, logp)
    kl = aggregate(kl_estimate(logp, ref, "k3"), mask, "seq-mean-token-mean")
    (kl_grad,) = torch.autograd.grad(0.1 * kl, logp)
    assert grad[:4].abs().sum() > 0
    torch.testing.assert_close(grad[:4], kl_grad[:4], rtol=0, atol=1e-12)


def test_19_1_reinforce_pp_baseline_zero_variance_group_is_not_zero():
    """§19.1 / §15.2: after global token whitening a zero-variance group gets -mu_tok/s_tok != 0, so it DOES
    contribute a policy gradient (unlike GRPO)."""
    rewards = torch.tensor([1.0, 0.0, 0.0, 0.0, 1.0, 1.0])
    groups = torch.tensor([0, 0, 0, 0, 1, 1])
    mask = torch.tensor([[1.0, 1.0], [1.0, 0.0], [1.0, 0.0], [1.0, 1.0], [1.0, 1.0], [1.0, 0.0]])
    adv = get_advantage("reinforce_pp_baseline")(rewards, groups, mask=mask)
    tok = torch.tensor([0.75, 0.75, -0.25, -0.25, -0.25, -0.25, 0.0, 0.0, 0.0])  # centred values, token order
    expected = -tok.mean() / math.sqrt(tok.var().item() + 1e-8)
    assert expected != 0
    torch.testing.assert_close(adv[4:][mask[4:].bool()], torch.full((3,), expected), rtol=0, atol=1e-6)
    logp = torch.zeros(6, 2, requires_grad=True)
    loss, _ = compute_loss(LossInputs(logp=logp, mask=mask, advantages=adv), AlgoConfig(policy_loss="ppo_clip"))
    (grad,) = torch.autograd.grad(loss, logp)
    assert grad[4:].abs().sum() > 0


def test_19_1_reinforce_pp_whitening_needs_two_tokens():
    """§19.1: REINFORCE++-baseline whitening is undefined with < 2 valid tokens -> error (verl raises)."""
    with pytest.raises(ValueError):
        get_advantage("reinforce_pp_baseline")(
            torch.tensor([1.0, 0.0]), torch.zeros(2), mask=torch.tensor([[1.0, 0.0], [0.0, 0.0]])
        )


def test_19_1_gpg_all_groups_degenerate_skips_update():
    """§6 edge [X]: B == M -> alpha = 0 and every advantage 0 (the update is skipped), never a division by 0."""
    rewards = torch.tensor([1.0, 1.0, 0.0, 0.0])
    groups = torch.tensor([0, 0, 1, 1])
    assert gpg_alpha(rewards, groups) == (0.0, 4, 4)
    adv = get_advantage("gpg")(rewards, groups)
    assert torch.equal(adv, torch.zeros(4))


# ------------------------------------------------------------------------------------------ groups of size 1


@pytest.mark.parametrize("name", ["grpo", "dr_grpo", "rloo", "gpg"])
def test_19_1_group_of_size_one_gets_zero(name):
    """§19.0/§19.1: G_q = 1 -> A = 0 (spec choice; verl would give A = R); other groups are unaffected."""
    rewards = torch.tensor([1.0, 0.0, 5.0, 1.0, 0.0, 0.0, 1.0])
    groups = torch.tensor([0, 0, 1, 2, 2, 2, 2])
    adv = get_advantage(name)(rewards, groups)
    assert adv[2] == 0.0
    ref = get_advantage(name)(rewards[[0, 1, 3, 4, 5, 6]], groups[[0, 1, 3, 4, 5, 6]])
    if name == "gpg":  # the singleton counts as degenerate in M: alpha = 7/(7-1) instead of 6/6
        ref = ref * 7 / 6
    torch.testing.assert_close(adv[[0, 1, 3, 4, 5, 6]], ref)


def test_19_1_gpg_singleton_counts_in_m():
    """§19.1 GPG: a group of size 1 counts as degenerate (in M): B=3, M=1, alpha=1.5."""
    alpha, b, m = gpg_alpha(torch.tensor([1.0, 0.0, 5.0]), torch.tensor([0, 0, 1]))
    assert (alpha, b, m) == (1.5, 3, 1)
    torch.testing.assert_close(
        get_advantage("gpg")(torch.tensor([1.0, 0.0, 5.0]), torch.tensor([0, 0, 1])),
        torch.tensor([0.75, -0.75, 0.0]),
    )


def test_15_3_passk_groups_of_size_one_raise():
    """§19.1 pass@k: verl `grpo_passk` raises for G = 1; the analytical pass@k needs k <= N."""
    with pytest.raises(ValueError):
        get_advantage("grpo_passk")(torch.tensor([1.0, 0.0, 1.0]), torch.tensor([0, 0, 1]))
    with pytest.raises(ValueError):
        get_advantage("pass_at_k")(torch.tensor([1.0]), torch.tensor([0]), pass_k=2)


def test_3_unscorable_rewards_are_left_out():
    """§3 edge: unscorable responses (NaN reward) are excluded from the group stats and get A = 0 (TRL)."""
    rewards = torch.tensor([1.0, 0.0, float("nan"), 0.0, 1.0])
    adv = get_advantage("grpo")(rewards, torch.zeros(5))
    assert adv[2] == 0.0
    torch.testing.assert_close(adv[[0, 1, 3, 4]], get_advantage("grpo")(rewards[[0, 1, 3, 4]], torch.zeros(4)))


# ------------------------------------------------------------------------------------------ empty masks


def _agg_loss(name, mode, logp, old, adv, mask):
    tok, _ = get_policy_loss(name)(logp, old, adv, mask)
    return aggregate(tok, mask, mode, l_norm=float(T))


@pytest.mark.parametrize("mode", ALL_MODES)
@pytest.mark.parametrize("name", ["ppo_clip", "pg", "gspo", "gspo_token", "gmpo", "cispo"])
def test_19_1_fully_masked_sequence_contributes_nothing(name, mode):
    """§1.5 rule 3 / §19.1: a fully-masked sequence (e.g. overlong-filtered) adds 0 to the numerator, gets zero
    gradient and is excluded from |B+| in the seq-mean modes; constant-norm (Dr. GRPO) still counts it in |B|."""
    logp, old, mask = _batch()
    adv = torch.tensor([1.0, -0.5, 2.0, -1.0, 0.3, 0.8, -2.0, 0.4], dtype=torch.float64)
    mask_f = mask.clone()
    mask_f[3] = 0.0
    loss = _agg_loss(name, mode, logp, old, adv, mask_f)
    (grad,) = torch.autograd.grad(loss, logp)
    assert torch.equal(grad[3], torch.zeros(T, dtype=grad.dtype))
    keep = [0, 1, 2, 4, 5, 6, 7]
    ref = _agg_loss(name, mode, logp[keep], old[keep], adv[keep], mask[keep])
    if mode == "constant-norm":
        ref = ref * 7 / 8
    torch.testing.assert_close(loss, ref, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("mode", ALL_MODES)
@pytest.mark.parametrize("name", ALL_LOSSES)
def test_19_1_everything_masked_gives_zero_loss_and_gradient(name, mode):
    """§1.5 rule 1 / §19.1: all tokens masked -> loss exactly 0, gradient exactly 0, nothing NaN — for every
    registered policy loss x every aggregation mode. Masked positions hold garbage (-1e4 log-probs)."""
    logp = torch.full((3, T), -1e4, dtype=torch.float64, requires_grad=True)
    old = torch.full((3, T), -2.0, dtype=torch.float64)
    mask = torch.zeros(3, T, dtype=torch.float64)
    tok, metrics = get_policy_loss(name)(logp, old, torch.tensor([1.0, -1.0, 0.5], dtype=torch.float64), mask)
    loss = aggregate(tok, mask, mode, l_norm=float(T))
    (grad,) = torch.autograd.grad(loss, logp, allow_unused=True)
    assert float(loss) == 0.0
    assert grad is None or torch.equal(grad, torch.zeros_like(grad))
    assert torch.equal(tok.detach(), torch.zeros_like(tok))
    assert all(isinstance(v, float) for v in metrics.values())  # metrics may be NaN (§17), but must exist


@pytest.mark.parametrize("mode", ALL_MODES)
def test_19_1_everything_masked_through_compute_loss(mode):
    """§1.5 rule 1: the composed loss with every optional term on is 0 with zero gradients on an all-masked batch."""
    n = 3
    logp = torch.randn(n, T, dtype=torch.float64).requires_grad_(True)
    ent = torch.rand(n, T, dtype=torch.float64).requires_grad_(True)
    values = torch.randn(n, T, dtype=torch.float64).requires_grad_(True)
    mask = torch.zeros(n, T, dtype=torch.float64)
    inputs = LossInputs(
        logp=logp,
        mask=mask,
        advantages=torch.ones(n, dtype=torch.float64),
        old_logp=logp.detach() - 0.1,
        ref_logp=logp.detach() + 0.2,
        samp_logp=logp.detach() + 0.05,
        entropy=ent,
        values=values,
        old_values=values.detach() + 0.1,
        returns=torch.ones(n, T, dtype=torch.float64),
        positive=torch.tensor([True, False, True]),
    )
    cfg = AlgoConfig(
        loss_agg=mode,
        l_norm=float(T),
        kl_coef=0.1,
        entropy_coef=0.01,
        nll_coef=0.1,
        is_correction="token_truncate",
    )
    loss, metrics = compute_loss(inputs, cfg, vf_coef=0.5)
    grads = torch.autograd.grad(loss, [logp, ent, values], allow_unused=True)
    assert float(loss) == 0.0
    for g in grads:
        assert g is None or torch.equal(g, torch.zeros_like(g))
    assert math.isfinite(metrics["actor/loss"])


def test_19_1_empty_batch_aggregation():
    """§1.5 rule 1: N = 0 sequences (an empty micro-batch) aggregates to 0 in every mode."""
    loss = torch.zeros(0, T, requires_grad=True)
    for mode in ALL_MODES:
        assert float(aggregate(loss, torch.zeros(0, T), mode, l_norm=4.0)) == 0.0


# ------------------------------------------------------------------------------------------ overflow


@pytest.mark.parametrize("name", ALL_LOSSES)
@pytest.mark.parametrize("direction", [1.0, -1.0])
def test_1_2_log_ratio_overflow_is_finite(name, direction):
    """§1.2: log-ratios are clamped before exp — huge logp - old_logp (±1e4) gives finite losses and gradients
    (float32, all policy losses, both advantage signs)."""
    logp = torch.tensor([[0.0, -1e4, -5.0], [-1e4, 0.0, -0.1]], requires_grad=True)
    old = logp.detach() - direction * 1e4
    old[:, 2] = logp.detach()[:, 2]
    mask = torch.ones(2, 3)
    tok, _ = get_policy_loss(name)(logp, old, torch.tensor([1.0, -1.0]), mask)
    for mode in ALL_MODES:
        loss = aggregate(tok, mask, mode, l_norm=3.0)
        (grad,) = torch.autograd.grad(loss, logp, retain_graph=True)
        assert torch.isfinite(loss) and torch.isfinite(grad).all(), (mode, float(loss))


@pytest.mark.parametrize("kind", ["k1", "k2", "k3", "k1+", "k3+"])
def test_16_kl_estimators_overflow_is_finite(kind):
    """§16 edge: delta is clamped before exp (k3 also capped at 10) — huge log-ratios stay finite."""
    logp = torch.tensor([[-1e4, 0.0]], requires_grad=True)
    ref = torch.tensor([[0.0, -1e4]])
    k = kl_estimate(logp, ref, kind)
    (grad,) = torch.autograd.grad(k.sum(), logp)
    assert torch.isfinite(k).all() and torch.isfinite(grad).all()


@pytest.mark.parametrize("mode", ["token_truncate", "token_mask", "sequence_truncate", "sequence_mask"])
def test_10_is_weights_overflow_is_finite(mode):
    """§10 edge: sequence products in log space with log rho clamped to ±20 — no inf/NaN weights; padding -> 0."""
    old = torch.tensor([[0.0, 0.0, 0.0], [-1e4, -1e4, 0.0]])
    samp = torch.tensor([[-1e4, -1e4, 0.0], [0.0, 0.0, 0.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]])
    w = is_weights(old, samp, mask, mode, is_c_max=2.0)
    assert torch.isfinite(w).all()
    assert w[0, 2] == 0.0
    stats = mismatch_stats(old, samp, mask, c=2.0, weights=w)
    assert all(math.isfinite(v) for k, v in stats.items() if k != "ess")


def test_17_metrics_are_nan_on_empty_masks():
    """§17 [X]: statistics with an empty denominator are NaN, not 0."""
    stats = mismatch_stats(torch.zeros(2, 3), torch.zeros(2, 3), torch.zeros(2, 3))
    assert all(math.isnan(v) for v in stats.values())
    _, metrics = get_policy_loss("ppo_clip")(torch.zeros(2, 3), torch.zeros(2, 3), torch.ones(2), torch.zeros(2, 3))
    assert math.isnan(metrics["clipfrac_high"]) and math.isnan(metrics["ppo_kl"])
