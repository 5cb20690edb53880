"""How much EV is there to explain? Ceilings for bench/critic_probe.py.

* `oracle_features`: privileged features that read the reference answer (NOT a critic input): whether the text so
  far (completion tokens < t) already scores 1 under exact_numeric, whether it holds any number, and position.
* `mc_values`: Monte-Carlo values of held-out states. For states s_t at a few positions t, K continuations are
  sampled from s_t with the remaining budget (max_new_tokens - t); V_hat(s_t) is their mean reward. With
  V*(s_t) = E[G | s_t], the best critic leaves E[V*(1 - V*)] of squared error per token at position t, estimated
  without bias by K/(K-1) * V_hat (1 - V_hat). So the ceiling on EV at position t is

      EV*_t = 1 - mean_states(K/(K-1) V_hat (1 - V_hat)) / Var_t(G),

  and over all tokens, each position is charged the residual of the nearest measured position before it (`step
  before`, pessimistic: along one trajectory V*_t is a martingale, so its residual only shrinks with t) or after it
  (`step after`, optimistic). Both are estimates: the set of sequences still running changes with t.
"""

from __future__ import annotations

import os
import random
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src"))

from grpokit.rewards.numeric import exact_numeric, last_number  # noqa: E402
from grpokit.rollout import SamplingParams  # noqa: E402


def oracle_features(roll: dict[str, torch.Tensor], examples: list, tok) -> torch.Tensor:
    """[N,T,3]: (prefix already correct, prefix has a number, t / T) from the decoded completion tokens < t."""
    n, t_max = roll["completion_ids"].shape
    out = torch.zeros(n, t_max, 3)
    lengths = roll["completion_mask"].sum(1).tolist()
    for i in range(n):
        ids = roll["completion_ids"][i].tolist()
        ex = examples[int(roll["group"][i])]
        for t in range(int(lengths[i])):
            text = tok.decode(ids[:t], skip_special_tokens=True)
            out[i, t, 0] = exact_numeric([text], [ex])[0]
            out[i, t, 1] = float(last_number(text) is not None)
            out[i, t, 2] = t / t_max
    return out


def _states(roll: dict[str, torch.Tensor], t: int, n_states: int, seed: int) -> list[int]:
    alive = (roll["completion_mask"].sum(1) > t).nonzero().squeeze(1).tolist()
    random.Random(seed + t).shuffle(alive)
    return sorted(alive[:n_states])


@torch.no_grad()
def mc_values(engine, tok, roll: dict, examples: list, positions: tuple[int, ...], n_states: int, k: int, max_new: int):
    """{t: (sequence rows, V_hat [S])}: K continuations of each chosen state s_t at each position t."""
    out = {}
    for t in positions:
        rows = _states(roll, t, n_states, seed=0)
        prompts = []
        for i in rows:
            p = roll["prompt_ids"][i][roll["prompt_mask"][i].bool()].tolist()
            prompts.append(p + roll["completion_ids"][i, :t].tolist())
        res = engine.generate(prompts, SamplingParams(n=k, max_new_tokens=max_new - t, temperature=1.0))
        texts, exs = [], []
        for j, i in enumerate(res.prompt_index.tolist()):
            cont = res.completion_ids[j, : int(res.completion_mask[j].sum())].tolist()
            full = roll["completion_ids"][rows[i], :t].tolist() + cont
            texts.append(tok.decode(full, skip_special_tokens=True))
            exs.append(examples[int(roll["group"][rows[i]])])
        v_hat = torch.tensor(exact_numeric(texts, exs)).view(len(rows), k).mean(1)
        out[t] = (torch.tensor(rows), v_hat)
    return out


def ceiling_rows(roll: dict[str, torch.Tensor], mc: dict, k: int) -> tuple[list[dict], dict]:
    """Per-position EV*_t and the token-level lower / upper bounds (see the module docstring)."""
    m = roll["completion_mask"].bool()
    g = roll["reward"].double()
    var_g = float(g[:, None].expand_as(m)[m].var())
    rows, resid = [], {}
    for t, (seq, v_hat) in sorted(mc.items()):
        r = float((v_hat * (1 - v_hat)).mean()) * k / (k - 1)
        alive = m[:, t]
        var_t = float(g[alive].var())
        resid[t] = r
        rows.append({"t": t, "states": len(seq), "mean_v_hat": float(v_hat.mean()), "ev_star_t": 1 - r / var_t})
    ts = sorted(resid)
    n_t = m.sum(0).double()
    mean_g = float(g[:, None].expand_as(m)[m].mean())
    total = float(((g[:, None] - mean_g) ** 2 * m).sum())
    lower = upper = 0.0
    for pos in range(m.shape[1]):
        before = max([t for t in ts if t <= pos], default=ts[0])
        after = min([t for t in ts if t >= pos], default=ts[-1])
        lower += float(n_t[pos]) * resid[before]
        upper += float(n_t[pos]) * resid[after]
    bounds = {"var_g": var_g, "ev_star_lower": 1 - lower / total, "ev_star_upper": 1 - upper / total}
    return rows, bounds
