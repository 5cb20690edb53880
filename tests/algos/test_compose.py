"""`compute_loss` terms against direct computations (docs/math.md §2 total loss, §16 KL placement, §12 entropy
bonus, §10 IS correction, §2 value loss, §11 VAPO NLL). Reference values are written out with plain torch
formulas, not with the library's own `aggregate`."""

from __future__ import annotations

import math

import pytest
import torch

from grpokit.algos import AlgoConfig, LossInputs, compute_loss, value_loss

pytestmark = pytest.mark.filterwarnings("ignore:Converting a tensor with requires_grad=True:UserWarning")

N, T = 4, 5
LENGTHS = [5, 2, 3, 0]


def _data(seed=0):
    g = torch.Generator().manual_seed(seed)
    mask = (torch.arange(T)[None] < torch.tensor(LENGTHS)[:, None]).double()
    logp = -torch.rand(N, T, generator=g, dtype=torch.float64) * 2
    return dict(
        mask=mask,
        logp=logp,
        old=logp - 0.1 * torch.randn(N, T, generator=g, dtype=torch.float64),
        ref=logp - 0.5 * torch.randn(N, T, generator=g, dtype=torch.float64),
        samp=logp - 0.6 * torch.randn(N, T, generator=g, dtype=torch.float64),
        adv=torch.tensor([1.0, -0.5, 0.25, 2.0], dtype=torch.float64),
        ent=torch.rand(N, T, generator=g, dtype=torch.float64) * 2,
        values=torch.randn(N, T, generator=g, dtype=torch.float64),
        old_values=torch.randn(N, T, generator=g, dtype=torch.float64),
        returns=torch.randn(N, T, generator=g, dtype=torch.float64),
        positive=torch.tensor([True, False, True, True]),
    )


def _agg(x, m, mode, l_norm=float(T)):
    """Direct §1.5 formulas."""
    lens = m.sum(1)
    nonempty = lens > 0
    if mode == "token-mean":
        return (x * m).sum() / m.sum()
    if mode == "seq-mean-token-mean":
        return ((x * m).sum(1)[nonempty] / lens[nonempty]).mean()
    if mode == "seq-mean-token-sum":
        return (x * m).sum(1)[nonempty].mean()
    return (x * m).sum() / (m.shape[0] * l_norm)


def _ppo(d, eps=0.2):
    r = torch.exp(d["logp"] - d["old"])
    a = d["adv"][:, None]
    return torch.maximum(-a * r, -a * r.clamp(1 - eps, 1 + eps))


def _inputs(d, **kw):
    return LossInputs(logp=d["logp"], mask=d["mask"], advantages=d["adv"], old_logp=d["old"], **kw)


MODES = ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "constant-norm"]


@pytest.mark.parametrize("mode", MODES)
def test_2_pg_term_alone(mode):
    """§2: with every optional term off, the total is Agg(l^clip) and is reported as actor/pg_loss."""
    d = _data()
    loss, m = compute_loss(_inputs(d), AlgoConfig(loss_agg=mode, l_norm=float(T)))
    expected = _agg(_ppo(d), d["mask"], mode)
    assert float(loss) == pytest.approx(float(expected), rel=1e-12)
    assert m["actor/pg_loss"] == pytest.approx(float(expected), rel=1e-12)
    assert m["actor/loss"] == pytest.approx(float(expected), rel=1e-12)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kind", ["k1", "k2", "k3"])
def test_16_kl_as_loss_term(kind, mode):
    """§16 KL as loss: L += beta * Agg(k) with the SAME aggregation mode as the policy loss; its gradient flows
    through logp only (ref frozen)."""
    d = _data(1)
    beta = 0.3
    delta = d["logp"] - d["ref"]
    k = {"k1": delta, "k2": 0.5 * delta**2, "k3": torch.exp(-delta) + delta - 1}[kind]
    cfg = AlgoConfig(loss_agg=mode, l_norm=float(T), kl_coef=beta, kl_estimator=kind)
    logp = d["logp"].clone().requires_grad_(True)
    ref = d["ref"].clone().requires_grad_(True)
    inputs = LossInputs(logp=logp, mask=d["mask"], advantages=d["adv"], old_logp=d["old"], ref_logp=ref)
    loss, m = compute_loss(inputs, cfg)
    kl_expected = _agg(k, d["mask"], mode)
    assert m["actor/kl_loss"] == pytest.approx(float(kl_expected), rel=1e-12)
    assert float(loss) == pytest.approx(float(_agg(_ppo(d), d["mask"], mode) + beta * kl_expected), rel=1e-12)
    loss.backward()
    assert ref.grad is None or torch.equal(ref.grad, torch.zeros_like(ref.grad))


def test_16_kl_coef_override_and_reward_placement():
    """§16 placement: kl_placement='reward' adds no loss term; the `kl_coef=` argument (a controller's current
    beta) overrides the config value."""
    d = _data(2)
    base, _ = compute_loss(_inputs(d, ref_logp=d["ref"]), AlgoConfig())
    with_reward, m = compute_loss(_inputs(d, ref_logp=d["ref"]), AlgoConfig(kl_coef=0.5, kl_placement="reward"))
    assert float(with_reward) == float(base) and "actor/kl_loss" not in m
    over, m = compute_loss(_inputs(d, ref_logp=d["ref"]), AlgoConfig(kl_coef=0.5), kl_coef=0.1)
    assert float(over) == pytest.approx(float(base) + 0.1 * m["actor/kl_loss"], rel=1e-12)


def test_16_the_loss_placement_is_a_strategy_like_the_other_two(monkeypatch: pytest.MonkeyPatch):
    """§16: compute_loss asks the chosen placement for its loss term; a placement registered under a new name that
    puts the KL in the loss is used as `loss` is, with no method name tested."""
    from grpokit.algos.kl_placement import KLPlacement
    from grpokit.algos.registry import KL_PLACEMENTS

    d = _data(2)
    monkeypatch.setitem(KL_PLACEMENTS._items, "loss_again", KLPlacement)
    monkeypatch.setitem(KL_PLACEMENTS._primary, "loss_again", "loss_again")
    loss, m = compute_loss(_inputs(d, ref_logp=d["ref"]), AlgoConfig(kl_coef=0.5))
    again, m2 = compute_loss(_inputs(d, ref_logp=d["ref"]), AlgoConfig(kl_coef=0.5, kl_placement="loss_again"))
    assert float(again) == float(loss) and m2["actor/kl_loss"] == m["actor/kl_loss"] > 0
    for name in ("reward", "reward_centered"):
        assert KL_PLACEMENTS[name](AlgoConfig()).loss_term(d["logp"], d["ref"], d["mask"], None) is None


def test_12_entropy_bonus_term():
    """§12: L -= c_H * Agg_tok(H) (token-mean over valid tokens even when the policy loss uses another mode);
    the gradient w.r.t. H is -c_H m / sum(m)."""
    d = _data(3)
    ent = d["ent"].clone().requires_grad_(True)
    cfg = AlgoConfig(loss_agg="seq-mean-token-mean", entropy_coef=0.02)
    loss, m = compute_loss(_inputs(d, entropy=ent), cfg)
    h = (d["ent"] * d["mask"]).sum() / d["mask"].sum()
    assert m["actor/entropy_bonus"] == pytest.approx(float(h), rel=1e-12)
    assert float(loss) == pytest.approx(float(_agg(_ppo(d), d["mask"], "seq-mean-token-mean") - 0.02 * h), rel=1e-12)
    (g,) = torch.autograd.grad(loss, ent)
    torch.testing.assert_close(g, -0.02 * d["mask"] / d["mask"].sum())
    # entropy_coef= argument (adaptive coefficient) overrides the config
    loss2, _ = compute_loss(_inputs(d, entropy=d["ent"]), cfg, entropy_coef=0.1)
    assert float(loss2) == pytest.approx(float(_agg(_ppo(d), d["mask"], "seq-mean-token-mean") - 0.1 * h), rel=1e-12)


@pytest.mark.parametrize(
    ("mode", "c", "c_min"),
    [
        ("token_truncate", 1.2, None),
        ("token_mask", 1.2, 0.5),
        ("sequence_truncate", 0.6, None),
        ("sequence_mask", 0.65, 0.3),
    ],
)
def test_10_is_correction_term(mode, c, c_min):
    """§10: per-token loss multiplied by the (detached) weight from rho = exp(old - samp): token TIS min(rho, C),
    token MIS rho 1[C_min <= rho <= C], sequence variants with the product over the sequence's tokens."""
    d = _data(4)
    lam = (d["old"] - d["samp"]) * d["mask"]
    rho = torch.exp(lam)
    seq = torch.exp(lam.sum(1, keepdim=True)).expand(N, T)
    lo = 0.0 if c_min is None else c_min
    w = {
        "token_truncate": rho.clamp(max=c),
        "token_mask": rho * ((rho <= c) & (rho >= lo)),
        "sequence_truncate": seq.clamp(max=c),
        "sequence_mask": seq * ((seq <= c) & (seq >= lo)),
    }[mode]
    cfg = AlgoConfig(is_correction=mode, is_c_max=c, is_c_min=c_min)
    loss, m = compute_loss(_inputs(d, samp_logp=d["samp"]), cfg)
    assert float(loss) == pytest.approx(float(_agg(w * _ppo(d), d["mask"], "token-mean")), rel=1e-12)
    # the configured bounds matter: the library defaults (C = 2, no C_min) give a different loss here
    default, _ = compute_loss(_inputs(d, samp_logp=d["samp"]), AlgoConfig(is_correction=mode))
    assert abs(float(default) - float(loss)) > 1e-6
    valid = d["mask"].bool()
    assert m["mismatch/rho_max"] == pytest.approx(float(rho[valid].max()), rel=1e-12)
    assert m["mismatch/frac_high"] == pytest.approx(float((rho[valid] > c).double().mean()), rel=1e-12)
    # ESS = 1 / Agg_tok((w / mean w)^2) (§17.6)
    wv = w[valid]
    assert m["mismatch/ess"] == pytest.approx(float(1 / ((wv / wv.mean()) ** 2).mean()), rel=1e-10)


def test_10_is_correction_needs_sampler_logprobs():
    """§10: without samp_logp there is nothing to correct — the loss equals the uncorrected one."""
    d = _data(4)
    a, _ = compute_loss(_inputs(d), AlgoConfig(is_correction="token_truncate"))
    b, _ = compute_loss(_inputs(d), AlgoConfig())
    assert float(a) == float(b)


@pytest.mark.parametrize("mode", ["token-mean", "seq-mean-token-mean"])
@pytest.mark.parametrize("clip", [0.2, None])
def test_2_value_loss_term(mode, clip):
    """§2: L += c_v Agg(0.5 max((V-G)^2, (clip(V, V_old±eps_v) - G)^2)), same mode as the policy loss; value
    gradient from the unclipped or clipped branch as selected by the max."""
    d = _data(5)
    v = d["values"].clone().requires_grad_(True)
    cfg = AlgoConfig(loss_agg=mode, value_clip=clip)
    inputs = _inputs(d, values=v, old_values=d["old_values"], returns=d["returns"])
    loss, m = compute_loss(inputs, cfg, vf_coef=0.7)
    err = (d["values"] - d["returns"]) ** 2
    if clip is None:
        per_tok = 0.5 * err
    else:
        vc = d["old_values"] + (d["values"] - d["old_values"]).clamp(-clip, clip)
        per_tok = 0.5 * torch.maximum(err, (vc - d["returns"]) ** 2)
    v_agg = _agg(per_tok, d["mask"], mode)
    assert m["critic/value_loss"] == pytest.approx(float(v_agg), rel=1e-12)
    assert float(loss) == pytest.approx(float(_agg(_ppo(d), d["mask"], mode) + 0.7 * v_agg), rel=1e-12)
    (g,) = torch.autograd.grad(loss, v)
    vv = d["values"].clone().requires_grad_(True)
    err2 = (vv - d["returns"]) ** 2
    if clip is None:
        ref = 0.5 * err2
    else:
        vc2 = d["old_values"] + (vv - d["old_values"]).clamp(-clip, clip)
        ref = 0.5 * torch.maximum(err2, (vc2 - d["returns"]) ** 2)
    (g_ref,) = torch.autograd.grad(0.7 * _agg(ref, d["mask"], mode), vv)
    torch.testing.assert_close(g, g_ref)


def test_2_value_loss_clip_fraction():
    """§2: value_loss reports the fraction of valid tokens where the clipped branch is the larger one."""
    values = torch.tensor([[1.0, 0.0, 5.0]])
    old = torch.tensor([[0.0, 0.0, 0.0]])
    returns = torch.tensor([[0.0, 0.0, 0.0]])
    loss, m = value_loss(values, old, returns, torch.tensor([[1.0, 1.0, 0.0]]), value_clip=0.5)
    torch.testing.assert_close(loss, torch.tensor([[0.5, 0.0, 0.0]]))
    assert m["value_clipfrac"] == 0.0
    loss, m = value_loss(
        torch.tensor([[1.0]]), torch.tensor([[0.0]]), torch.tensor([[2.0]]), torch.ones(1, 1), value_clip=0.5
    )
    assert float(loss) == pytest.approx(0.5 * 1.5**2) and m["value_clipfrac"] == 1.0


def test_11_nll_term_on_positive_sequences():
    """§11 VAPO: L += mu * L_NLL with L_NLL = -sum_{i in T} sum_t logp / sum_{i in T} |o_i| over correct responses
    only; gradient -mu / sum|o_i| on their valid tokens, 0 elsewhere."""
    d = _data(6)
    logp = d["logp"].clone().requires_grad_(True)
    cfg = AlgoConfig(nll_coef=0.1)
    loss, m = compute_loss(
        LossInputs(
            logp=logp,
            mask=d["mask"],
            advantages=torch.zeros(N, dtype=torch.float64),
            old_logp=d["old"],
            positive=d["positive"],
        ),
        cfg,
    )
    pos_mask = d["mask"] * d["positive"].double()[:, None]
    nll = -(d["logp"] * pos_mask).sum() / pos_mask.sum()
    assert m["actor/nll_loss"] == pytest.approx(float(nll), rel=1e-12)
    assert float(loss) == pytest.approx(0.1 * float(nll), rel=1e-12)  # A = 0: the PG term is 0
    (g,) = torch.autograd.grad(loss, logp)
    torch.testing.assert_close(g, -0.1 * pos_mask / pos_mask.sum())


def test_11_nll_empty_positive_set_is_zero():
    """§11 [X]: no correct response (T empty) -> L_NLL = 0, finite, zero gradient."""
    d = _data(6)
    logp = d["logp"].clone().requires_grad_(True)
    loss, m = compute_loss(
        LossInputs(
            logp=logp,
            mask=d["mask"],
            advantages=torch.zeros(N, dtype=torch.float64),
            positive=torch.zeros(N, dtype=torch.bool),
        ),
        AlgoConfig(nll_coef=0.1),
    )
    assert m["actor/nll_loss"] == 0.0 and float(loss) == 0.0
    (g,) = torch.autograd.grad(loss, logp)
    assert torch.equal(g, torch.zeros_like(g))


def test_2_total_loss_sums_all_terms():
    """§2 total: L = Agg(w l_pi) + beta Agg(k) - c_H Agg_tok(H) + c_v Agg(l_V) + mu L_NLL, each term reported."""
    d = _data(7)
    cfg = AlgoConfig(
        loss_agg="seq-mean-token-mean",
        kl_coef=0.2,
        entropy_coef=0.05,
        value_clip=None,
        nll_coef=0.3,
        is_correction="token_truncate",
        is_c_max=2.0,
    )
    loss, m = compute_loss(
        _inputs(
            d,
            ref_logp=d["ref"],
            samp_logp=d["samp"],
            entropy=d["ent"],
            values=d["values"],
            old_values=d["old_values"],
            returns=d["returns"],
            positive=d["positive"],
        ),
        cfg,
        vf_coef=0.5,
    )
    total = (
        m["actor/pg_loss"]
        + 0.2 * m["actor/kl_loss"]
        - 0.05 * m["actor/entropy_bonus"]
        + 0.5 * m["critic/value_loss"]
        + 0.3 * m["actor/nll_loss"]
    )
    assert float(loss) == pytest.approx(total, rel=1e-12)
    assert m["actor/loss"] == pytest.approx(total, rel=1e-12)
    w = torch.exp((d["old"] - d["samp"]) * d["mask"]).clamp(max=2.0)
    assert m["actor/pg_loss"] == pytest.approx(float(_agg(w * _ppo(d), d["mask"], "seq-mean-token-mean")), rel=1e-12)
    assert all(math.isfinite(v) for v in m.values())
