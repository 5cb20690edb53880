"""Advantage estimators (docs/math.md §2, §3, §4, §6, §11, §13, §15).

Outcome estimators take `(rewards[N], group_ids[N], *, <params>)` and return advantages `[N]`; the token-level
ones (REINFORCE++, GAE family) also take `mask[N,T]` and return `[N,T]`. All are registered in `ADVANTAGES`
and reached through `grpokit.algos.get_advantage(name)`. The keyword-only arguments other than the tensor inputs
(`valid`, `mask`, `values`, `token_rewards`) are the estimator's declared hyper-parameters, defaults from its
paper (its docs/math.md section in each docstring).
"""

from __future__ import annotations

import math

import torch

from .masked import group_index, group_stats, last_token_index, masked_mean, masked_whiten
from .registry import ADVANTAGES


def _valid(rewards: torch.Tensor, valid: torch.Tensor | None) -> torch.Tensor:
    ok = torch.isfinite(rewards)
    return ok if valid is None else ok & valid.bool()


@ADVANTAGES.register("grpo")
def grpo_advantage(
    rewards: torch.Tensor,
    group_ids: torch.Tensor,
    *,
    adv_scale: str = "group",
    adv_eps: float = 1e-6,
    valid: torch.Tensor | None = None,
) -> torch.Tensor:
    """GRPO group normalisation (docs/math.md §3): A_i = (R_i - mean_g) / (std_g + eps).

    `adv_scale`: "group" divides by the Bessel std of the group (§1.3), "batch" by the std of all rewards in the
    batch (TRL `scale_rewards="batch"`), "none" keeps A_i = R_i - mean_g (Dr. GRPO, §4).
    Groups of size 1 get A = 0 (spec [X]; verl would give A = R). Unscorable samples (`valid`=False or a
    non-finite reward) are left out of their group's statistics and get A = 0 (TRL's NaN-aware behaviour).
    Parameters (docs/math.md §3 defaults): adv_scale "group", adv_eps 1e-6 (verl; TRL uses 1e-4, GMPO 1e-8).
    """
    ok = _valid(rewards, valid)
    r = torch.where(ok, rewards.to(torch.float64), torch.zeros_like(rewards, dtype=torch.float64))
    mean, std, cnt, spread = group_stats(r, group_ids, ok)
    centred = r - mean
    if adv_scale == "group":
        adv = centred / (std + adv_eps)
    elif adv_scale == "batch":
        adv = centred / (r[ok].std() + adv_eps if int(ok.sum()) > 1 else 1.0)
    elif adv_scale == "none":
        adv = centred
    else:
        raise ValueError(f"adv_scale={adv_scale!r} is not one of 'group', 'batch', 'none'")
    # zero-variance groups get exactly 0 (docs/math.md §1.3, §19.1), not the rounding residue of r - mean
    adv = torch.where(ok & (cnt >= 2) & (spread > 0), adv, torch.zeros_like(adv))
    return adv.to(torch.float32)


@ADVANTAGES.register("dr_grpo")
def dr_grpo_advantage(
    rewards: torch.Tensor, group_ids: torch.Tensor, *, valid: torch.Tensor | None = None
) -> torch.Tensor:
    """Dr. GRPO (docs/math.md §4): A_i = R_i - mean_g, no std division. Groups of size 1 get 0."""
    return grpo_advantage(rewards, group_ids, adv_scale="none", valid=valid)


@ADVANTAGES.register("rloo")
def rloo_advantage(
    rewards: torch.Tensor, group_ids: torch.Tensor, *, valid: torch.Tensor | None = None
) -> torch.Tensor:
    """RLOO (docs/math.md §15.1): A_i = R_i - mean_{j != i} R_j = K/(K-1) (R_i - mean_g). K = 1 gives 0 (TRL)."""
    ok = _valid(rewards, valid)
    r = torch.where(ok, rewards.to(torch.float64), torch.zeros_like(rewards, dtype=torch.float64))
    mean, _, cnt, spread = group_stats(r, group_ids, ok)
    adv = cnt / (cnt - 1).clamp(min=1) * (r - mean)
    return torch.where(ok & (cnt >= 2) & (spread > 0), adv, torch.zeros_like(adv)).to(torch.float32)


def gpg_alpha(rewards: torch.Tensor, group_ids: torch.Tensor, tol: float = 0.0) -> tuple[float, int, int]:
    """GPG correction alpha = B / (B - M) (docs/math.md §6), M = responses in zero-variance groups (or size-1 groups).

    Returns (alpha, B, M); alpha = 0.0 when B == M (spec [X]: the update is skipped and logged).
    This is the paper's definition; verl's B / #{R_i != 0} differs (docs/math.md §19).
    """
    _, _, cnt, spread = group_stats(rewards, group_ids)
    degenerate = (spread <= tol) | (cnt < 2)
    b, m = int(rewards.numel()), int(degenerate.sum())
    return (b / (b - m) if b > m else 0.0), b, m


@ADVANTAGES.register("gpg")
def gpg_advantage(
    rewards: torch.Tensor,
    group_ids: torch.Tensor,
    *,
    gpg_std_norm: bool = False,
    gpg_alpha_correction: bool = True,
    valid: torch.Tensor | None = None,
) -> torch.Tensor:
    """GPG (docs/math.md §6): A_i = alpha * (R_i - mean_g) / F_norm, alpha = B / (B - M).

    F_norm = 1 (default) or std_g + 1e-4 (`gpg_std_norm`). With B == M every advantage is 0 (skip, [X]).
    Parameters (docs/math.md §6 defaults, the paper's best ablation): gpg_std_norm False, gpg_alpha_correction True.
    """
    ok = _valid(rewards, valid)
    r = torch.where(ok, rewards.to(torch.float64), torch.zeros_like(rewards, dtype=torch.float64))
    mean, std, cnt, spread = group_stats(r, group_ids, ok)
    adv = (r - mean) / (std + 1e-4) if gpg_std_norm else r - mean
    alpha = gpg_alpha(r, group_ids)[0] if gpg_alpha_correction else 1.0
    adv = torch.where(ok & (cnt >= 2) & (spread > 0), adv * alpha, torch.zeros_like(adv))
    return adv.to(torch.float32)


def _to_token_rewards(rewards: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Place outcome reward R_i at the last valid token t*_i (docs/math.md §2); [N,T] rewards pass through."""
    if rewards.dim() == 2:
        return rewards.to(torch.float32) * mask
    out = torch.zeros(mask.shape, dtype=torch.float32, device=mask.device)
    last = last_token_index(mask)
    rows = torch.nonzero(last >= 0).squeeze(1)
    out[rows, last[rows]] = rewards[rows].to(torch.float32)
    return out


@ADVANTAGES.register("reinforce_pp")
def reinforce_pp_advantage(
    rewards: torch.Tensor,
    group_ids: torch.Tensor,
    *,
    mask: torch.Tensor,
    gamma: float = 1.0,
    token_rewards: torch.Tensor | None = None,
) -> torch.Tensor:
    """REINFORCE++ (docs/math.md §15.2): r_t = 1[t=t*] R - beta k_t; G_t = sum_{t'>=t} gamma^(t'-t) r_t';
    A = global token whitening of G over all valid tokens (no group baseline).

    `token_rewards` [N,T] adds per-token terms such as -beta * k1 (KL in reward, §16).
    Parameters (docs/math.md §15.2): gamma 1.0.
    """
    r = _to_token_rewards(rewards, mask)
    if token_rewards is not None:
        r = r + token_rewards * mask
    m = mask.to(r.dtype)
    ret = torch.zeros_like(r)
    run = torch.zeros(r.shape[0], dtype=r.dtype, device=r.device)
    for t in reversed(range(r.shape[1])):
        # masked positions inside a sequence carry the running return through undiscounted (docs/math.md §2, as `gae`)
        run = m[:, t] * (r[:, t] + gamma * run) + (1 - m[:, t]) * run
        ret[:, t] = run
    return masked_whiten(ret, mask)


@ADVANTAGES.register("reinforce_pp_baseline")
def reinforce_pp_baseline_advantage(
    rewards: torch.Tensor,
    group_ids: torch.Tensor,
    *,
    mask: torch.Tensor,
    token_rewards: torch.Tensor | None = None,
) -> torch.Tensor:
    """REINFORCE++-baseline (docs/math.md §15.2): c_i = R_i - mean_g broadcast to tokens, then global token whitening
    (c - mu_tok) / sqrt(s^2_tok + 1e-8). Note: zero-variance groups do NOT get 0 after whitening (§19.1).

    `token_rewards` [N,T] (e.g. -beta * k1, KL in the reward, §16) enter as their per-sequence sum before the
    group mean is taken, R_i <- R_i + sum_t m_t r_t, as verl scores the summed token-level rewards.
    """
    r = rewards.to(torch.float64)
    if token_rewards is not None:
        r = r + (token_rewards.to(torch.float64) * mask.to(torch.float64)).sum(1)
    mean, _, _, _ = group_stats(r, group_ids)
    c = (r - mean).to(torch.float32)
    return masked_whiten(c[:, None].expand_as(mask.float()).clone(), mask)


@ADVANTAGES.register("grpo_passk")
def grpo_passk_advantage(
    rewards: torch.Tensor, group_ids: torch.Tensor, *, passk_std_norm: bool = True, adv_eps: float = 1e-6
) -> torch.Tensor:
    """verl `grpo_passk` (docs/math.md §15.3): only each group's best response gets A = R_(1) - R_(2) (optionally
    divided
    by std_g + eps); all others 0. Requires every group to have G >= 2.
    Parameters (docs/math.md §15.3, verl defaults): passk_std_norm True, adv_eps 1e-6."""
    idx, q = group_index(group_ids)
    adv = torch.zeros_like(rewards, dtype=torch.float32)
    _, std, _, _ = group_stats(rewards, group_ids)
    for g in range(q):
        members = torch.nonzero(idx == g).squeeze(1)
        if members.numel() < 2:
            raise ValueError("grpo_passk needs at least 2 responses per group (docs/math.md §15.3)")
        vals, order = torch.sort(rewards[members].to(torch.float64), descending=True)
        a = vals[0] - vals[1]
        if passk_std_norm:
            a = a / (std[members[0]] + adv_eps)
        adv[members[order[0]]] = float(a)
    return adv


@ADVANTAGES.register("pass_at_k")
def pass_at_k_advantage(rewards: torch.Tensor, group_ids: torch.Tensor, *, pass_k: int = 4) -> torch.Tensor:
    """Analytical pass@k group advantage (Chen et al., docs/math.md §15.3 [X]) for binary rewards.

    Rbar = 1 - C(Nneg,k)/C(N,k), sigma = sqrt(Rbar(1-Rbar)); A_pos = (1-Rbar)/sigma,
    A_neg = (1 - Rbar - C(Nneg-1,k-1)/C(N-1,k-1))/sigma; sigma = 0 gives all zeros. Requires k <= N.
    Parameters: pass_k 4 (docs/math.md gives no default; §15.3 requires k <= N).
    """
    idx, q = group_index(group_ids)
    adv = torch.zeros_like(rewards, dtype=torch.float32)
    for g in range(q):
        members = torch.nonzero(idx == g).squeeze(1)
        n = int(members.numel())
        if pass_k > n:
            raise ValueError(f"pass_k={pass_k} exceeds the group size {n} (docs/math.md §15.3 needs k <= N)")
        pos = rewards[members] > 0.5
        n_neg = int((~pos).sum())
        rbar = 1.0 - math.comb(n_neg, pass_k) / math.comb(n, pass_k)
        sigma = math.sqrt(max(rbar * (1 - rbar), 0.0))
        if sigma == 0.0:
            continue
        a_pos = (1 - rbar) / sigma
        a_neg = (1 - rbar - math.comb(n_neg - 1, pass_k - 1) / math.comb(n - 1, pass_k - 1)) / sigma
        adv[members] = torch.where(pos, torch.tensor(a_pos), torch.tensor(a_neg)).float()
    return adv


def pkpo_rewards(rewards: torch.Tensor, group_ids: torch.Tensor, *, pass_k: int = 4) -> torch.Tensor:
    """PKPO effective rewards (docs/math.md §15.3) for binary rewards with c correct of n:
    correct -> k/n, incorrect -> (k/n) * rho(n-1, c, k-1), rho(n,c,k) = 1 - C(n-c,k)/C(n,k)."""

    def rho(n: int, c: int, k: int) -> float:
        return 1.0 - math.comb(n - c, k) / math.comb(n, k) if k <= n else 1.0

    idx, q = group_index(group_ids)
    out = torch.zeros_like(rewards, dtype=torch.float32)
    for g in range(q):
        members = torch.nonzero(idx == g).squeeze(1)
        n = int(members.numel())
        pos = rewards[members] > 0.5
        c = int(pos.sum())
        out[members] = torch.where(
            pos, torch.tensor(pass_k / n), torch.tensor(pass_k / n * rho(n - 1, c, pass_k - 1))
        ).float()
    return out


@ADVANTAGES.register("pkpo")
def pkpo_advantage(rewards: torch.Tensor, group_ids: torch.Tensor, *, pass_k: int = 4) -> torch.Tensor:
    """PKPO (docs/math.md §15.3): effective pass@k rewards with a group-mean baseline (spec [X] baseline choice).
    Parameters: pass_k 4 (no paper default)."""
    return dr_grpo_advantage(pkpo_rewards(rewards, group_ids, pass_k=pass_k), group_ids)


# ----------------------------------------------------------------------------------------------- GAE family


def length_adaptive_lambda(lengths: torch.Tensor, gae_alpha: float = 0.05) -> torch.Tensor:
    """VAPO length-adaptive lambda (docs/math.md §11): lambda = 1 - 1/(alpha * L), clamped to [0, 1] ([X])."""
    lengths = lengths.to(torch.float64).clamp(min=1e-9)
    return (1.0 - 1.0 / (gae_alpha * lengths)).clamp(0.0, 1.0)


def gae(
    token_rewards: torch.Tensor,
    values: torch.Tensor,
    mask: torch.Tensor,
    *,
    gamma: float = 1.0,
    lam: float | torch.Tensor = 1.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalised advantage estimation (docs/math.md §2), returns (advantages[N,T], returns[N,T]).

    delta_t = r_t + gamma V(s_{t+1}) - V(s_t);  A_t = delta_t + gamma lambda A_{t+1};  V after t* is 0 (no
    bootstrap, also for truncated responses); masked positions inside a sequence carry the running value and
    advantage through unchanged (verl). `lam` may be a float or a per-sequence tensor [N] (length-adaptive GAE).
    Returns G_t = A_t + V(s_t).
    """
    n, t_len = mask.shape
    m = mask.to(torch.float64)
    r = token_rewards.to(torch.float64) * m
    v = values.detach().to(torch.float64) * m
    lam_t = torch.as_tensor(lam, dtype=torch.float64, device=mask.device).expand(n)
    next_v = torch.zeros(n, dtype=torch.float64, device=mask.device)
    last = torch.zeros(n, dtype=torch.float64, device=mask.device)
    adv = torch.zeros(n, t_len, dtype=torch.float64, device=mask.device)
    for t in reversed(range(t_len)):
        delta = r[:, t] + gamma * next_v - v[:, t]
        new = delta + gamma * lam_t * last
        next_v = v[:, t] * m[:, t] + (1 - m[:, t]) * next_v
        last = new * m[:, t] + (1 - m[:, t]) * last
        adv[:, t] = last
    ret = (adv + v) * m
    return (adv * m).to(torch.float32), ret.to(torch.float32)


@ADVANTAGES.register("gae")
def gae_advantage(
    rewards: torch.Tensor,
    group_ids: torch.Tensor,
    *,
    values: torch.Tensor,
    mask: torch.Tensor,
    gamma: float = 1.0,
    lam: float = 1.0,
    token_rewards: torch.Tensor | None = None,
    adv_whiten: bool = True,
) -> torch.Tensor:
    """PPO advantages by GAE (docs/math.md §2) from outcome rewards placed at t*, plus optional per-token rewards
    (e.g. -beta * k1 for KL in reward); whitened over valid tokens when `adv_whiten` (verl always does).
    Critic targets come from `value_targets` with the critic's own lambda (decoupled GAE, §11).
    Parameters (docs/math.md §2 defaults, verl): gamma 1.0, lam 1.0, adv_whiten True."""
    r = _to_token_rewards(rewards, mask) + (0 if token_rewards is None else token_rewards * mask)
    adv, _ = gae(r, values, mask, gamma=gamma, lam=lam)
    return masked_whiten(adv, mask) if adv_whiten and int(mask.sum()) >= 2 else adv


@ADVANTAGES.register("vapo_gae", "length_adaptive_gae")
def length_adaptive_gae_advantage(
    rewards: torch.Tensor,
    group_ids: torch.Tensor,
    *,
    values: torch.Tensor,
    mask: torch.Tensor,
    gamma: float = 1.0,
    gae_alpha: float = 0.05,
    token_rewards: torch.Tensor | None = None,
    adv_whiten: bool = True,
) -> torch.Tensor:
    """VAPO length-adaptive GAE (docs/math.md §11): per-sequence lambda_i = clamp(1 - 1/(alpha L_i), 0, 1) for the
    policy advantages; the critic keeps its own lambda (decoupled GAE, see `value_targets`).
    Parameters (docs/math.md §11 defaults): gamma 1.0, gae_alpha 0.05 (VAPO), adv_whiten True."""
    lam = length_adaptive_lambda(mask.sum(1), gae_alpha)
    r = _to_token_rewards(rewards, mask) + (0 if token_rewards is None else token_rewards * mask)
    adv, _ = gae(r, values, mask, gamma=gamma, lam=lam)
    return masked_whiten(adv, mask) if adv_whiten and int(mask.sum()) >= 2 else adv


def value_targets(
    rewards: torch.Tensor,
    values: torch.Tensor,
    mask: torch.Tensor,
    *,
    gamma: float = 1.0,
    lam_critic: float = 1.0,
    token_rewards: torch.Tensor | None = None,
) -> torch.Tensor:
    """Critic targets G_t = A_t + V_t from a GAE pass with the critic's lambda (decoupled GAE, docs/math.md §11).
    lam_critic = 1 gives Monte-Carlo returns (= R_i on every token for a terminal reward and gamma = 1).
    Parameters (docs/math.md §11: VC-PPO/VAPO's critic lambda = 1): gamma 1.0, lam_critic 1.0. Bound as the `critic`
    component of a recipe that has a critic (`AlgoConfig.uses_critic`)."""
    r = _to_token_rewards(rewards, mask) + (0 if token_rewards is None else token_rewards * mask)
    return gae(r, values, mask, gamma=gamma, lam=lam_critic)[1]


EV_MIN_RELATIVE_STD = 1e-2


def explained_variance(returns: torch.Tensor, values: torch.Tensor, mask: torch.Tensor) -> float:
    """EV = 1 - Var(G - V) / Var(G) over valid tokens (docs/math.md §2 failure signals).

    NaN (undefined, not bad) when the returns barely vary: std(G) < 1e-2 * max(rms(G), 1). That is a batch with one
    outcome everywhere (every answer right, or every answer wrong), whose returns under a KL penalty in the reward
    (ppo) differ only by the penalty's crumbs: on claim 5's ppo runs such steps read EV -4968 to -77073 for a critic
    with value loss about 0.02, i.e. std(G) about 1e-3. One wrong answer among 32 gives std(G) about 0.17, far above
    the cut. A NaN skips the step in plots and in value pretraining's stopping rule.
    """
    g = returns[mask.bool()].double()
    v = values[mask.bool()].double()
    if g.numel() < 2:
        return float("nan")
    var_g = float(g.var())
    scale = max(float(g.pow(2).mean().sqrt()), 1.0)
    if var_g**0.5 < EV_MIN_RELATIVE_STD * scale:
        return float("nan")
    return float(1 - (g - v).var() / var_g)


def broadcast_advantages(adv: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """[N] -> [N,T] (same value on every token); [N,T] passes through."""
    return adv[:, None].expand(mask.shape) if adv.dim() == 1 else adv


def sequence_advantages(adv: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """[N,T] -> [N] by the masked token mean (verl's sequence-level advantage); [N] passes through."""
    return adv if adv.dim() == 1 else masked_mean(adv, mask, dim=1)
