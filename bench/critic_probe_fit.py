"""Value probes for bench/critic_probe.py: ridge and a small MLP on standardized token features, EV and AUC."""

from __future__ import annotations

import math
import os
import random
import sys

import torch
from torch import nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src"))

from grpokit.algos import explained_variance  # noqa: E402

ALPHAS = (0.1, 1.0, 10.0, 100.0, 1e3, 1e4, 1e5, 1e6, 1e7)


def ev(y: torch.Tensor, v: torch.Tensor) -> float:
    return explained_variance(y, v, torch.ones_like(y))


def auc(score: torch.Tensor, label: torch.Tensor) -> float:
    """Mann-Whitney AUC of `score` for the 0/1 `label` (ties count one half)."""
    pos, neg = score[label > 0.5], score[label <= 0.5]
    if not len(pos) or not len(neg):
        return float("nan")
    diff = pos[:, None] - neg[None, :]
    return float(((diff > 0).double() + 0.5 * (diff == 0).double()).mean())


def final_token_auc(v: torch.Tensor, seq: torch.Tensor, reward: torch.Tensor) -> float:
    """AUC of V at each sequence's last completion token for that sequence's reward."""
    last = torch.zeros(len(reward), dtype=torch.long)
    last.scatter_reduce_(0, seq, torch.arange(len(seq)), reduce="amax", include_self=False)
    return auc(v[last].double(), reward)


class Ridge:
    """Closed-form ridge regression on standardized features, float64; fit once per alpha via eigendecomposition."""

    def __init__(self, x: torch.Tensor, y: torch.Tensor) -> None:
        x = x.double()
        self.mu, self.sd = x.mean(0), x.std(0).clamp(min=1e-6)
        z = (x - self.mu) / self.sd
        self.y_mu = y.mean()
        self.evals, self.evecs = torch.linalg.eigh(z.T @ z)
        self.proj = self.evecs.T @ (z.T @ (y - self.y_mu))

    def predict(self, x: torch.Tensor, alpha: float) -> torch.Tensor:
        w = self.evecs @ (self.proj / (self.evals + alpha))
        return ((x.double() - self.mu) / self.sd) @ w + self.y_mu


def by_prompt_split(groups: torch.Tensor, seed: int) -> torch.Tensor:
    """Boolean mask of the validation tokens: every token of a seeded 20% of the prompts."""
    uniq = groups.unique().tolist()
    random.Random(seed).shuffle(uniq)
    val = torch.tensor(uniq[: max(1, len(uniq) // 5)])
    return torch.isin(groups, val)


def fit_ridge(x: torch.Tensor, y: torch.Tensor, val: torch.Tensor) -> tuple[Ridge, float, float]:
    """(model refit on all of x, chosen alpha, validation EV at that alpha)."""
    probe = Ridge(x[~val], y[~val])
    scores = {a: ev(y[val], probe.predict(x[val], a)) for a in ALPHAS}
    alpha = max(scores, key=lambda a: scores[a])
    return Ridge(x, y), alpha, scores[alpha]


def fit_mlp(x: torch.Tensor, y: torch.Tensor, val: torch.Tensor, seed: int, epochs: int = 40) -> tuple:
    """A 2-layer MLP on standardized features, trained on the non-validation prompts; the best epoch by val EV."""
    torch.manual_seed(seed)
    mu, sd = x[~val].mean(0), x[~val].std(0).clamp(min=1e-6)
    z = ((x - mu) / sd).float()
    net = nn.Sequential(nn.Linear(z.shape[1], 256), nn.GELU(), nn.Dropout(0.2), nn.Linear(256, 1))
    opt = torch.optim.AdamW(net.parameters(), lr=1e-3, weight_decay=0.1)
    xt, yt = z[~val], y[~val].float()
    best = (-math.inf, None, 0)
    for epoch in range(epochs):
        net.train()
        for idx in torch.randperm(len(xt)).split(256):
            loss = (net(xt[idx]).squeeze(-1) - yt[idx]).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        net.eval()
        with torch.no_grad():
            score = ev(y[val], net(z[val]).squeeze(-1).double())
        if score > best[0]:
            best = (score, {k: v.clone() for k, v in net.state_dict().items()}, epoch + 1)
    net.load_state_dict(best[1])
    net.eval()

    def predict(xn: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            return net(((xn - mu) / sd).float()).squeeze(-1).double()

    return predict, best[2], best[0]
