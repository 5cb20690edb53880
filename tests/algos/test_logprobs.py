"""Chunked log-probs and entropy (docs/math.md §1.2 temperature, §1.6 entropy): `logprobs_and_entropy` must
equal the naive full-vocabulary computation in value and gradient, with and without a `head`."""

from __future__ import annotations

import pytest
import torch

from grpokit.algos import entropy_from_logits, logprobs_and_entropy

N, T, V, D = 3, 7, 11, 8  # N*T = 21 rows: chunk sizes 4, 5 and 8 do not divide it


def _naive(logits, tokens, temperature=1.0):
    """Reference: log_softmax over the full float32 logits / T_s, gather, entropy = -sum p log p (§1.6)."""
    z = logits.float() / temperature
    logp_all = torch.log_softmax(z, -1)
    logp = logp_all.gather(-1, tokens[..., None]).squeeze(-1)
    ent = -(logp_all.exp() * logp_all).sum(-1)
    return logp, ent


def _inputs(seed=0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(N, T, V, generator=g, dtype=dtype) * 3
    tokens = torch.randint(0, V, (N, T), generator=g)
    w_lp = torch.randn(N, T, generator=g, dtype=dtype)  # random cotangents so both outputs are checked
    w_en = torch.randn(N, T, generator=g, dtype=dtype)
    return logits, tokens, w_lp, w_en


@pytest.mark.parametrize("chunk_size", [1, 4, 5, 8, 21, 1024])
@pytest.mark.parametrize("temperature", [1.0, 0.6, 1.7])
def test_1_6_logprobs_and_entropy_match_naive_without_head(chunk_size, temperature):
    """§1.6/§1.2: values and input gradients of both outputs equal the naive computation on logits / T_s."""
    logits, tokens, w_lp, w_en = _inputs()
    x1 = logits.clone().requires_grad_(True)
    lp, en = logprobs_and_entropy(x1, tokens, temperature=temperature, chunk_size=chunk_size)
    assert lp.shape == en.shape == (N, T) and lp.dtype == torch.float32
    x2 = logits.clone().requires_grad_(True)
    lp_ref, en_ref = _naive(x2, tokens, temperature)
    torch.testing.assert_close(lp, lp_ref, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(en, en_ref, rtol=1e-5, atol=1e-5)
    (g1,) = torch.autograd.grad((lp * w_lp + en * w_en).sum(), x1)
    (g2,) = torch.autograd.grad((lp_ref * w_lp + en_ref * w_en).sum(), x2)
    assert g1.dtype == logits.dtype
    torch.testing.assert_close(g1, g2, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("chunk_size", [1, 5, 8, 64])
@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_1_6_logprobs_and_entropy_with_head(chunk_size, temperature):
    """`head=` (hidden states [N,T,D] + a Linear lm_head) gives the same values and the same gradients for the
    hidden states AND the head's weight/bias as projecting the full logits first."""
    g = torch.Generator().manual_seed(1)
    torch.manual_seed(1)
    head = torch.nn.Linear(D, V).double()
    hidden = torch.randn(N, T, D, generator=g, dtype=torch.float64)
    tokens = torch.randint(0, V, (N, T), generator=g)
    w_lp, w_en = (
        torch.randn(N, T, generator=g, dtype=torch.float64),
        torch.randn(N, T, generator=g, dtype=torch.float64),
    )

    h1 = hidden.clone().requires_grad_(True)
    lp, en = logprobs_and_entropy(h1, tokens, head=head, temperature=temperature, chunk_size=chunk_size)
    grads1 = torch.autograd.grad((lp * w_lp + en * w_en).sum(), [h1, head.weight, head.bias])

    h2 = hidden.clone().requires_grad_(True)
    lp_ref, en_ref = _naive(head(h2), tokens, temperature)
    grads2 = torch.autograd.grad((lp_ref * w_lp + en_ref * w_en).sum(), [h2, head.weight, head.bias])

    torch.testing.assert_close(lp, lp_ref, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(en, en_ref, rtol=1e-5, atol=1e-5)
    for a, b in zip(grads1, grads2):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def test_1_6_head_only_parameters_require_grad():
    """Frozen hidden states (no grad) with a trainable head: the head still receives the full gradient."""
    torch.manual_seed(2)
    head = torch.nn.Linear(D, V)
    hidden = torch.randn(N, T, D)
    tokens = torch.randint(0, V, (N, T))
    lp, en = logprobs_and_entropy(hidden, tokens, head=head, chunk_size=5)
    (gw,) = torch.autograd.grad((lp + en).sum(), [head.weight])
    lp_ref, en_ref = _naive(head(hidden), tokens)
    (gw_ref,) = torch.autograd.grad((lp_ref + en_ref).sum(), [head.weight])
    torch.testing.assert_close(gw, gw_ref, rtol=1e-4, atol=1e-5)


def test_1_6_bf16_logits_are_computed_in_float32():
    """bf16 logits: outputs are float32 and match the naive float32 computation on the same bf16 values; the
    gradient comes back in the input's dtype."""
    logits, tokens, _, _ = _inputs(seed=3, dtype=torch.float32)
    x = logits.to(torch.bfloat16).requires_grad_(True)
    lp, en = logprobs_and_entropy(x, tokens, chunk_size=4)
    lp_ref, en_ref = _naive(x.detach(), tokens)
    assert lp.dtype == en.dtype == torch.float32
    torch.testing.assert_close(lp, lp_ref, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(en, en_ref, rtol=1e-5, atol=1e-5)
    (g,) = torch.autograd.grad(lp.sum(), x)
    assert g.dtype == torch.bfloat16


def test_1_6_no_grad_and_without_entropy():
    """Under no_grad the outputs carry no graph; with_entropy=False returns zeros for the entropy only."""
    logits, tokens, _, _ = _inputs(seed=4)
    x = logits.clone().requires_grad_(True)
    with torch.no_grad():
        lp, en = logprobs_and_entropy(x, tokens, chunk_size=5)
    assert not lp.requires_grad and not en.requires_grad
    lp2, en2 = logprobs_and_entropy(logits, tokens, chunk_size=5, with_entropy=False)
    torch.testing.assert_close(lp2, lp)
    assert torch.equal(en2, torch.zeros_like(en2))


def test_1_6_entropy_from_logits_matches_naive():
    """§1.6: entropy_from_logits = logsumexp(z) - sum softmax(z) z equals -sum p log p on random logits."""
    logits, tokens, _, _ = _inputs(seed=5)
    torch.testing.assert_close(entropy_from_logits(logits), _naive(logits, tokens)[1], rtol=1e-5, atol=1e-5)


def test_1_6_empty_input():
    """Zero rows: empty [N,T] outputs, not an error."""
    lp, en = logprobs_and_entropy(torch.zeros(0, 4, V), torch.zeros(0, 4, dtype=torch.long))
    assert lp.shape == en.shape == (0, 4)
