"""Shared-prompt computation (grpokit/models/prefix.py): the prompt computed once per group gives the same log-probs
and gradients as separate full-sequence passes, with prompts of different lengths (left padding) in one batch."""

from __future__ import annotations

import torch

from grpokit.models import load_model_and_tokenizer
from grpokit.models.forward import completion_forward


def test_shared_prefix_forward_matches_plain_forward_values_and_gradients() -> None:
    torch.manual_seed(0)
    model, tok = load_model_and_tokenizer("tiny")
    p_len, t_len = 7, 5
    prompts = [torch.randint(100, 1000, (5,)), torch.randint(100, 1000, (7,))]
    pids = torch.full((6, p_len), tok.pad_token_id)
    pmask = torch.zeros(6, p_len, dtype=torch.long)
    for i in range(6):
        p = prompts[i // 3]
        pids[i, p_len - len(p) :] = p
        pmask[i, p_len - len(p) :] = 1
    cids = torch.randint(100, 1000, (6, t_len))
    cmask = torch.ones(6, t_len)
    cmask[1, 3:] = 0
    cmask[4, 2:] = 0
    results = []
    for shared in (False, True):
        model.zero_grad()
        lp, ent, _ = completion_forward(model, pids, pmask, cids, cmask, shared_prefix=shared)
        (lp * cmask).sum().backward()
        grad = torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])
        results.append((lp.detach(), ent.detach(), grad))
    (lp0, ent0, g0), (lp1, ent1, g1) = results
    torch.testing.assert_close(lp1 * cmask, lp0 * cmask, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(ent1 * cmask, ent0 * cmask, rtol=1e-5, atol=1e-5)
    assert float((g1 - g0).norm() / g0.norm()) < 1e-5
