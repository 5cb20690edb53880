"""Which state features let a critic predict add1 correctness on held-out rollouts? (issue 9, item 2)

Samples rollouts of the embedded SmolLM2-135M-Instruct on `add1` with grpokit's `hf` engine, scores them with the
task's reward (`exact_numeric`, 0/1), and fits value probes on the tokens of the fit rollouts. With gamma = lambda
= 1 every completion token's return is its sequence's final reward, so the target of V(s_t) is that reward, and

    EV = 1 - Var(G - V) / Var(G)      over completion tokens (docs/math.md §2; grpokit.algos.explained_variance).

V(s_t) is read where grpokit's critic reads it: at the position that predicts completion token t, so the state is
the prompt plus tokens < t. Feature sets (all functions of that state under the current policy):

* ``last``  the policy's last hidden state (what critic.kind=head/mlp reads today)
* ``mid``   the output of decoder layer L//2 (via a forward hook on the same forward)
* ``conf``  prefix confidence: entropy of pi(.|s_t); log-prob of token t-1; running min / mean / sum of the chosen
            tokens' log-probs over tokens < t; running mean / max entropy over positions < t; position t, log(1+t).
            ("EOS reached" is always 0 on completion tokens, whose states never include the EOS, so it is left out.)
* ``conf+cur``  NOT a valid V input, for reference only: adds the log-prob of token t itself and stats that include
            it. That is a function of (s_t, a_t), so it makes the baseline depend on the action (biased gradient).
* combinations of the above.

Probes: ridge (features standardized on the fit tokens; alpha chosen on a by-prompt 80/20 split of the fit prompts,
then refit on all fit tokens) and a small MLP (256 GELU units, AdamW, early stopping on the same split). Held-out
sets: `heldout` = prompts never fitted on (the 20 test-split pairs plus the train pairs left out of the fit set);
`fresh` = new samples of the fit prompts. AUC: predicting each sequence's correctness from V at its last token.
Reference rows: `const` (the fit mean) and `group-loo` (the mean reward of the other samples of the same prompt:
GRPO's baseline, which sees other rollouts, so not a critic).

Ceilings (`critic_probe_ceiling.py`): privileged `oracle` features that read the reference answer, and a Monte-Carlo
estimate of the best achievable EV from K continuations of held-out states. Probes live in `critic_probe_fit.py`.

Run from the repository root (about 16 CPU minutes on 2 cores the first time: sampling and features 5 min, Monte
Carlo 3 min, oracle decoding and fits the rest; from the cache about 2 min per run):

    .venv/bin/python bench/critic_probe.py --cache runs/critic_probe.pt
    .venv/bin/python bench/critic_probe.py --cache runs/critic_probe.pt --fit-on-fresh   # 2x the fit rollouts
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src"))

from critic_probe_ceiling import ceiling_rows, mc_values, oracle_features  # noqa: E402
from critic_probe_fit import by_prompt_split, ev, final_token_auc, fit_mlp, fit_ridge  # noqa: E402

from grpokit.data import get_task, render_prompt  # noqa: E402
from grpokit.models import load_model_and_tokenizer  # noqa: E402
from grpokit.models.forward import completion_forward
from grpokit.rewards.numeric import exact_numeric  # noqa: E402
from grpokit.rollout import SamplingParams, make_engine  # noqa: E402

RIDGE_SETS = ("last", "mid", "conf", "conf+cur", "last+mid", "last+conf", "mid+conf", "last+mid+conf", "text+mid+conf")
MLP_SETS = ("last", "conf", "last+conf", "mid+conf", "last+mid+conf", "oracle", "oracle+mid+conf")
ORACLE_SETS = ("oracle", "oracle+conf", "oracle+mid+conf")  # privileged (read the answer): ceilings, not critics
MC_POSITIONS = (0, 2, 4, 8, 12, 16, 24, 31)


def split_prompts(n_fit: int, seed: int) -> dict[str, list]:
    """Fit examples (n_fit train pairs) and held-out examples (the other train pairs plus the whole test split)."""
    task = get_task("add1")
    train = task.examples("train")
    random.Random(seed).shuffle(train)
    return {"fit": train[:n_fit], "heldout": train[n_fit:] + task.examples("test")}


def add_rollout_args(ap: argparse.ArgumentParser, fit_prompts: int) -> None:
    """The add1 rollout flags shared by the critic probes: prompts to fit on, samples, length, temperature."""
    ap.add_argument("--fit-prompts", type=int, default=fit_prompts, help="add1 train pairs to fit on (of 80)")
    ap.add_argument("--samples", type=int, default=8, help="completions per prompt")
    ap.add_argument("--max-new-tokens", type=int, default=32)
    ap.add_argument("--temperature", type=float, default=1.0)


def sample(engine, tok, examples: list, params: SamplingParams) -> dict[str, torch.Tensor]:
    """Rollouts of `examples` (n per prompt) with their 0/1 exact_numeric rewards."""
    prompts = [tok(render_prompt(tok, ex), add_special_tokens=False)["input_ids"] for ex in examples]
    out = engine.generate(prompts, params)
    ex_rows = [examples[int(i)] for i in out.prompt_index]
    reward = torch.tensor(exact_numeric(out.texts, ex_rows))
    return {
        "prompt_ids": out.prompt_ids, "prompt_mask": out.prompt_mask, "completion_ids": out.completion_ids,
        "completion_mask": out.completion_mask, "reward": reward, "group": out.prompt_index.clone(),
    }  # fmt: skip


@torch.no_grad()
def policy_features(model, roll: dict[str, torch.Tensor], mid_layer: int, batch: int = 64) -> None:
    """Adds logp, entropy [N,T], last and mid hidden states [N,T,H] to `roll` (one forward, a hook on mid)."""
    layer = model.get_decoder().layers[mid_layer]
    grabbed: list[torch.Tensor] = []
    hook = layer.register_forward_hook(lambda m, a, o: grabbed.append(o[0] if isinstance(o, tuple) else o))
    parts: dict[str, list[torch.Tensor]] = {"logp": [], "entropy": [], "h_last": [], "h_mid": []}
    try:
        for s in range(0, roll["reward"].numel(), batch):
            sl = slice(s, s + batch)
            grabbed.clear()
            p_ids, p_mask = roll["prompt_ids"][sl], roll["prompt_mask"][sl]
            lp, ent, h = completion_forward(
                model, p_ids, p_mask, roll["completion_ids"][sl], roll["completion_mask"][sl],
                shared_prefix=False, return_hidden=True,
            )  # fmt: skip
            lead = int((p_mask.sum(0) == 0).long().cumprod(0).sum())
            p, t_used = p_ids.shape[1] - lead, max(int(roll["completion_mask"][sl].sum(1).max()), 1)
            mid = grabbed[0][:, p - 1 : p - 1 + t_used].float()
            parts["logp"].append(lp)
            parts["entropy"].append(ent)
            parts["h_last"].append(h.float())
            parts["h_mid"].append(
                torch.cat([mid, mid.new_zeros(mid.shape[0], h.shape[1] - mid.shape[1], mid.shape[2])], 1)
            )
    finally:
        hook.remove()
    t_max = roll["completion_ids"].shape[1]
    for k, v in parts.items():
        roll[k] = torch.cat([torch.cat([x, x.new_zeros(x.shape[0], t_max - x.shape[1], *x.shape[2:])], 1) for x in v])


def _prefix_stats(x: torch.Tensor, m: torch.Tensor, prefix_only: bool) -> list[torch.Tensor]:
    """Running sum, mean, min and max of x [N,T] over positions < t (prefix_only) or <= t, under mask m."""
    xm = x * m
    csum = xm.cumsum(1)
    cnt = m.cumsum(1)
    big = torch.where(m.bool(), x, torch.full_like(x, float("inf")))
    cmin = torch.cummin(big, 1).values
    cmax = torch.cummax(torch.where(m.bool(), x, torch.full_like(x, float("-inf"))), 1).values
    if prefix_only:
        shift = lambda y, fill: torch.cat([torch.full_like(y[:, :1], fill), y[:, :-1]], 1)  # noqa: E731
        csum, cnt, cmin, cmax = shift(csum, 0.0), shift(cnt, 0.0), shift(cmin, float("inf")), shift(cmax, float("-inf"))
    mean = csum / cnt.clamp(min=1)
    cmin = torch.where(torch.isfinite(cmin), cmin, torch.zeros_like(cmin))
    cmax = torch.where(torch.isfinite(cmax), cmax, torch.zeros_like(cmax))
    return [csum, mean, cmin, cmax]


def confidence_features(roll: dict[str, torch.Tensor], with_current: bool) -> torch.Tensor:
    """[N,T,F] prefix-confidence features of s_t (see the module docstring); with_current adds token t's own."""
    lp, ent = roll["logp"].float(), roll["entropy"].float()
    m = roll["completion_mask"].float()
    t = torch.arange(lp.shape[1], dtype=torch.float32)[None, :].expand_as(lp)
    prev_lp = torch.cat([torch.zeros_like(lp[:, :1]), lp[:, :-1]], 1)
    lp_sum, lp_mean, lp_min, _ = _prefix_stats(lp, m, prefix_only=True)
    _, ent_mean, _, ent_max = _prefix_stats(ent, m, prefix_only=True)
    cols = [ent, prev_lp, lp_sum, lp_mean, lp_min, ent_mean, ent_max, t, torch.log1p(t), (t == 0).float()]
    if with_current:
        cur_sum, cur_mean, cur_min, _ = _prefix_stats(lp, m, prefix_only=False)
        cols += [lp, cur_sum, cur_mean, cur_min]
    return torch.stack(cols, -1)


def feature_sets(roll: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Every named feature set, flattened to completion tokens [n_tokens, F]."""
    m = roll["completion_mask"].bool()
    base = {
        "last": roll["h_last"][m], "mid": roll["h_mid"][m].float(),
        "conf": confidence_features(roll, False)[m], "conf+cur": confidence_features(roll, True)[m],
    }  # fmt: skip
    out = dict(base)
    base["oracle"] = roll["oracle"][m]
    base["text"] = roll["oracle"][m][:, 1:]  # has-a-number-so-far and t / T: read no answer, so legitimate
    for name in set(RIDGE_SETS) | set(MLP_SETS) | set(ORACLE_SETS):
        if name not in out:
            out[name] = torch.cat([base[p] for p in name.split("+")], 1)
    return out


def token_targets(roll: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(return per token, group per token, sequence per token) over completion tokens."""
    m = roll["completion_mask"].bool()
    n, t = m.shape
    g = roll["reward"][:, None].expand(n, t)[m].double()
    return g, roll["group"][:, None].expand(n, t)[m], torch.arange(n)[:, None].expand(n, t)[m]


def reference_rows(sets: dict[str, dict]) -> list[dict]:
    """`const` (fit mean) and `group-loo` (mean of the other samples of the same prompt) on each held-out set."""
    y_fit = sets["fit"]["y"]
    rows = []
    for name in ("const", "group-loo"):
        row: dict = {"probe": "ref", "features": name}
        for split in ("heldout", "fresh"):
            d = sets[split]
            if name == "const":
                v = torch.full_like(d["y"], float(y_fit.mean()))
            else:
                r, grp = d["reward"].double(), d["roll"]["group"]
                tot = torch.zeros(int(grp.max()) + 1, dtype=torch.float64).index_add_(0, grp, r)
                cnt = torch.bincount(grp).double()
                seq_v = (tot[grp] - r) / (cnt[grp] - 1).clamp(min=1)
                v = seq_v[d["seq"]]
            row[f"{split}_ev"] = ev(d["y"], v)
            row[f"{split}_auc"] = final_token_auc(v, d["seq"], d["reward"])
        rows.append(row)
    return rows


def probe_rows(sets: dict[str, dict], seed: int, n_test_groups: int) -> list[dict]:
    """Ridge on every feature set and the MLP on MLP_SETS: validation, fit and held-out EV, final-token AUC."""
    fit = sets["fit"]
    val = by_prompt_split(fit["groups"], seed)
    rows = []
    jobs = [("ridge", n) for n in RIDGE_SETS + ORACLE_SETS] + [("mlp", n) for n in MLP_SETS]
    for probe, name in jobs:
        t0 = time.perf_counter()
        x = fit["x"][name]
        if probe == "ridge":
            model, alpha, val_ev = fit_ridge(x, fit["y"], val)
            predict, hyper = (lambda xn, m=model, a=alpha: m.predict(xn, a)), f"alpha={alpha:g}"
        else:
            predict, epoch, val_ev = fit_mlp(x, fit["y"], val, seed)
            hyper = f"epoch={epoch}"
        row = {"probe": probe, "features": name, "dim": x.shape[1], "hyper": hyper, "val_ev": val_ev}
        row["fit_ev"] = ev(fit["y"], predict(x))
        for split in ("heldout", "fresh"):
            d = sets[split]
            v = predict(d["x"][name])
            row[f"{split}_ev"] = ev(d["y"], v)
            row[f"{split}_auc"] = final_token_auc(v, d["seq"], d["reward"])
            if split == "heldout":
                test = d["groups"] >= n_test_groups
                row["test_ev"] = ev(d["y"][test], v[test])
                row["ev_by_t"] = {t: ev(d["y"][d["pos"] == t], v[d["pos"] == t]) for t in MC_POSITIONS}
        row["seconds"] = round(time.perf_counter() - t0, 1)
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def sample_all(args: argparse.Namespace, model, tok, engine, exs: dict[str, list]) -> dict:
    """Rollouts with policy features for fit / heldout (other prompts) / fresh (new samples of the fit prompts)."""
    torch.manual_seed(args.seed)
    params = SamplingParams(n=args.samples, max_new_tokens=args.max_new_tokens, temperature=args.temperature)
    mid = args.mid_layer if args.mid_layer >= 0 else len(model.get_decoder().layers) // 2
    rolls: dict[str, dict] = {}
    for split in ("fit", "heldout", "fresh"):
        t0 = time.perf_counter()
        roll = sample(engine, tok, exs[split], params)
        t1 = time.perf_counter()
        policy_features(model, roll, mid)
        print(f"{split}: {len(exs[split])} prompts x {args.samples}, accuracy {float(roll['reward'].mean()):.3f}, "
              f"mean length {float(roll['completion_mask'].sum(1).float().mean()):.1f}, "
              f"sample {t1 - t0:.0f}s, features {time.perf_counter() - t1:.0f}s", flush=True)  # fmt: skip
        rolls[split] = roll
    n_test = len(get_task("add1").examples("test"))
    return {"rolls": rolls, "mid_layer": mid, "n_heldout_train": len(exs["heldout"]) - n_test}


def collect(args: argparse.Namespace) -> dict:
    """Rollouts, policy features, oracle features and Monte-Carlo values; what --cache holds is not recomputed."""
    data = torch.load(args.cache, weights_only=False) if args.cache and os.path.exists(args.cache) else {}
    exs = split_prompts(args.fit_prompts, args.seed)
    exs["fresh"] = exs["fit"]
    want_mc = args.mc_states > 0 and "mc" not in data
    if "rolls" not in data or want_mc:
        model, tok = load_model_and_tokenizer("smollm2-135m-instruct")
        model.eval()
        engine = make_engine("hf", model=model, tokenizer=tok)
        if "rolls" not in data:
            data.update(sample_all(args, model, tok, engine, exs))
        if want_mc:
            t0 = time.perf_counter()
            torch.manual_seed(args.seed + 1)
            data["mc"] = mc_values(engine, tok, data["rolls"]["heldout"], exs["heldout"], MC_POSITIONS,
                                   args.mc_states, args.mc_k, args.max_new_tokens)  # fmt: skip
            print(f"Monte-Carlo values: {time.perf_counter() - t0:.0f}s", flush=True)
    tok = None
    for split, roll in data["rolls"].items():
        if "oracle" not in roll:
            tok = tok or load_model_and_tokenizer("smollm2-135m-instruct")[1]
            roll["oracle"] = oracle_features(roll, exs[split], tok)
    if args.cache:
        torch.save(data, args.cache)
    return data


def prepared(data: dict) -> dict[str, dict]:
    """Feature sets and token targets of each split."""
    sets = {}
    for split, roll in data["rolls"].items():
        y, groups, seq = token_targets(roll)
        sets[split] = {
            "x": feature_sets(roll),
            "y": y,
            "groups": groups,
            "seq": seq,
            "reward": roll["reward"],
            "roll": roll,
            "pos": torch.arange(roll["completion_mask"].shape[1])[None, :].expand_as(roll["completion_mask"])[
                roll["completion_mask"].bool()
            ],
        }
    return sets


def print_table(rows: list[dict], cols: tuple[str, ...]) -> None:
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for r in rows:
        cells = [f"{r[c]:.3f}" if isinstance(r.get(c), float) else str(r.get(c, "")) for c in cols]
        print("| " + " | ".join(cells) + " |")


def print_report(data: dict, sets: dict, rows: list[dict], k: int) -> None:
    """The probe table, EV at each measured position, and the Monte-Carlo ceiling."""
    print(f"mid layer {data['mid_layer']}; tokens fit {len(sets['fit']['y'])}, heldout {len(sets['heldout']['y'])}, "
          f"fresh {len(sets['fresh']['y'])}")  # fmt: skip
    main_cols = ("probe", "features", "dim", "hyper", "val_ev", "fit_ev", "heldout_ev", "test_ev", "heldout_auc")
    print_table(rows, (*main_cols, "fresh_ev", "fresh_auc"))
    by_t = [{"probe": r["probe"], "features": r["features"], **{f"t={t}": e for t, e in r["ev_by_t"].items()}}
            for r in rows if "ev_by_t" in r]  # fmt: skip
    if "mc" in data:
        ceil, bounds = ceiling_rows(data["rolls"]["heldout"], data["mc"], k)
        by_t.append({"probe": "MC", "features": "EV* ceiling", **{f"t={c['t']}": c["ev_star_t"] for c in ceil}})
        print(f"\nMonte-Carlo ceiling on held-out token EV (K={k}): step-before {bounds['ev_star_lower']:.3f}, "
              f"step-after {bounds['ev_star_upper']:.3f}")  # fmt: skip
        print_table(ceil, ("t", "states", "mean_v_hat", "ev_star_t"))
    print("\nheld-out EV at each position t")
    print_table(by_t, ("probe", "features", *[f"t={t}" for t in MC_POSITIONS]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_rollout_args(ap, fit_prompts=64)
    ap.add_argument("--mid-layer", type=int, default=-1, help="decoder layer for `mid` (default: L // 2)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cache", default="", help="save rollouts + features here, or load them when the file exists")
    ap.add_argument("--mc-states", type=int, default=32, help="held-out states per position for the MC ceiling")
    ap.add_argument("--mc-k", type=int, default=8, help="continuations per state for the MC ceiling")
    ap.add_argument("--fit-on-fresh", action="store_true", help="fit on the fit and fresh rollouts together")
    ap.add_argument("--json", default="", help="write the rows as JSON here")
    args = ap.parse_args()
    data = collect(args)
    sets = prepared(data)
    if args.fit_on_fresh:  # twice the fit data (same prompts); the fresh columns are then in-sample
        fit, fresh = sets["fit"], sets["fresh"]
        sets["fit"] = {
            "x": {k: torch.cat([fit["x"][k], fresh["x"][k]]) for k in fit["x"]},
            **{k: torch.cat([fit[k], fresh[k]]) for k in ("y", "groups")},
        }
    n_test_groups = data["n_heldout_train"]
    rows = reference_rows(sets) + probe_rows(sets, args.seed, n_test_groups)
    print_report(data, sets, rows, args.mc_k)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
