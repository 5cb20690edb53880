"""Micro-batch split invariance (docs/math.md §1.5 rule 2, §18.16.1).

Splitting an optimizer mini-batch into micro-batches of unequal sizes (one of them holding a fully-masked
sequence) and accumulating `compute_loss(..., denominators=<global sums>)` gradients must reproduce the
single-batch gradient exactly (up to float64 rounding), for every aggregation mode and policy loss.
"""

from __future__ import annotations

import pytest
import torch

from grpokit.algos import AlgoConfig, LossInputs, compute_loss, loss_denominators, top_entropy_threshold
from grpokit.algos.registry import AGGREGATIONS

pytestmark = pytest.mark.filterwarnings("ignore:Converting a tensor with requires_grad=True:UserWarning")

N, T = 9, 6
LENGTHS = [6, 2, 0, 5, 1, 6, 3, 4, 6]  # sequence 2 is fully masked (e.g. overlong-filtered)
SPLITS = [[0, 1, 2], [3], [4, 5, 6, 7, 8]]  # unequal sizes; the first holds the empty sequence
MODES = AGGREGATIONS.names()
LOSSES = {
    "ppo_clip": dict(policy_loss="ppo_clip", eps_high=0.28, dual_clip_c=3.0),
    "pg": dict(policy_loss="pg"),
    "gspo": dict(policy_loss="gspo", eps_low=0.05, eps_high=0.05),
    "gspo_token": dict(policy_loss="gspo_token", eps_low=0.05, eps_high=0.05),
    "gmpo": dict(policy_loss="gmpo", clip_c=0.2),
    "cispo": dict(policy_loss="cispo", cispo_eps_high=0.1),
}


def _data(seed=0):
    g = torch.Generator().manual_seed(seed)
    mask = (torch.arange(T)[None] < torch.tensor(LENGTHS)[:, None]).double()
    logp = -torch.rand(N, T, generator=g, dtype=torch.float64) * 2
    return {
        "logp": logp,
        "old_logp": logp - 0.4 * torch.randn(N, T, generator=g, dtype=torch.float64),  # many tokens clip
        "ref_logp": logp - 0.3 * torch.randn(N, T, generator=g, dtype=torch.float64),
        "samp_logp": logp - 0.5 * torch.randn(N, T, generator=g, dtype=torch.float64),
        "entropy": torch.rand(N, T, generator=g, dtype=torch.float64) * 3,
        "values": torch.randn(N, T, generator=g, dtype=torch.float64),
        "old_values": torch.randn(N, T, generator=g, dtype=torch.float64),
        "returns": torch.randn(N, T, generator=g, dtype=torch.float64),
        "advantages": torch.randn(N, generator=g, dtype=torch.float64),
        "positive": torch.rand(N, generator=g) > 0.5,
        "mask": mask,
    }


GRAD_KEYS = ("logp", "entropy", "values")


def _grads(data, cfg, splits, global_dens=True, keep_threshold=None, vf_coef=0.0):
    leaves = {k: data[k].clone().requires_grad_(True) for k in GRAD_KEYS}
    dens = None
    if global_dens:
        parts = [loss_denominators(data["mask"][idx], data["positive"][idx]) for idx in splits]
        dens = {k: sum((p[k] for p in parts[1:]), parts[0][k]) for k in parts[0]}
    total = 0.0
    for idx in splits:
        kw = {k: (leaves[k] if k in leaves else data[k])[idx] for k in data}
        if keep_threshold is not None:
            kw["keep"] = ((data["entropy"][idx] >= keep_threshold) * data["mask"][idx]).double()
        loss, _ = compute_loss(LossInputs(**kw), cfg, denominators=dens, vf_coef=vf_coef)
        loss.backward()
        total += float(loss.detach())
    return total, {k: leaves[k].grad for k in GRAD_KEYS}


def _assert_same(a, b):
    (la, ga), (lb, gb) = a, b
    assert la == pytest.approx(lb, abs=1e-12)
    for k in GRAD_KEYS:
        if ga[k] is None or gb[k] is None:
            assert ga[k] is None and gb[k] is None, k
        else:
            torch.testing.assert_close(ga[k], gb[k], rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("loss_name", list(LOSSES))
def test_1_5_rule2_policy_loss_split_invariance(loss_name, mode):
    """§1.5 rule 2 / §18.16.1: accumulated micro-batch gradient == single-batch gradient, every mode x loss."""
    data = _data()
    cfg = AlgoConfig(loss_agg=mode, l_norm=float(T), **LOSSES[loss_name])
    full = _grads(data, cfg, [list(range(N))], global_dens=False)
    split = _grads(data, cfg, SPLITS)
    assert full[1]["logp"].abs().sum() > 0
    assert torch.equal(full[1]["logp"][2], torch.zeros(T, dtype=torch.float64))  # the empty sequence
    _assert_same(split, full)


@pytest.mark.parametrize("mode", MODES)
def test_1_5_rule2_all_terms_split_invariance(mode):
    """§1.5 rule 2 with every optional term of compute_loss on: KL loss, entropy bonus, value loss, VAPO NLL on
    positive sequences, TIS weights and a top-entropy keep mask whose threshold is computed on the whole batch."""
    data = _data(seed=1)
    cfg = AlgoConfig(
        loss_agg=mode,
        l_norm=float(T),
        policy_loss="ppo_clip",
        eps_high=0.28,
        kl_coef=0.05,
        entropy_coef=0.01,
        value_clip=0.2,
        nll_coef=0.1,
        is_correction="token_truncate",
        is_c_max=1.5,
    )
    tau = top_entropy_threshold(data["entropy"], data["mask"], 0.5)
    full = _grads(data, cfg, [list(range(N))], global_dens=False, keep_threshold=tau, vf_coef=0.5)
    split = _grads(data, cfg, SPLITS, keep_threshold=tau, vf_coef=0.5)
    for k in GRAD_KEYS:
        assert full[1][k].abs().sum() > 0, k
    _assert_same(split, full)


@pytest.mark.parametrize("splits", [[[0], [1], [2], [3], [4], [5], [6], [7], [8]], [[8, 0, 4], [1, 2, 3, 5, 6, 7]]])
def test_1_5_rule2_any_split_any_order(splits):
    """§1.5 rule 2: singletons and a permuted split give the same gradient too (seq-mean-token-mean, GSPO-token)."""
    data = _data(seed=2)
    cfg = AlgoConfig(loss_agg="seq-mean-token-mean", **LOSSES["gspo_token"], kl_coef=0.1)
    _assert_same(_grads(data, cfg, splits), _grads(data, cfg, [list(range(N))], global_dens=False))


@pytest.mark.parametrize("mode", ["token-mean", "seq-mean-token-mean", "constant-norm"])
def test_1_5_rule2_local_denominators_are_not_invariant(mode):
    """§1.5 rule 2 (why global denominators matter): averaging per-micro-batch losses computed with *local*
    denominators over unequal micro-batches gives a different gradient — the test above can fail."""
    data = _data()
    cfg = AlgoConfig(loss_agg=mode, l_norm=float(T), policy_loss="pg")
    full = _grads(data, cfg, [list(range(N))], global_dens=False)
    local = _grads(data, cfg, SPLITS, global_dens=False)
    local_mean = local[1]["logp"] / len(SPLITS)  # the usual "divide by gradient-accumulation steps"
    assert not torch.allclose(local_mean, full[1]["logp"], atol=1e-6)
