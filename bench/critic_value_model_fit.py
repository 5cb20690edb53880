"""Is the value model short of data or of capacity? A separate value model fitted offline on a fixed buffer (issue 9).

`critic.kind=model` (a copy of the embedded SmolLM2-135M-Instruct with a zero-initialised linear head, exactly
grpokit's `Critic`) is trained by regression on a fixed buffer of add1 rollouts of the initial policy, for several
epochs, and after each epoch its explained variance is measured on rollouts of prompts it never saw:

    loss = mean over completion tokens of (V(s_t) - G_t)^2,  G_t = R (gamma = lambda = 1, docs/math.md §2, §11)
    EV   = 1 - Var(G - V) / Var(G)   over held-out completion tokens (grpokit.algos.explained_variance)

Online value pretraining (`phases/value_pretrain.py`) sees each batch `critic.ppo_epochs` times and then moves on;
this probe instead reuses one buffer many times, so it tells apart "needs more rollouts" from "cannot fit at all".
Prompts are split as in `critic_probe.py` (fit = `--fit-prompts` train pairs; held-out = the rest of train plus the
whole test split); `fresh` is new samples of the fit prompts (held-out rollouts of prompts the critic has seen, as
in training). Also printed: EV on the fit buffer and the AUC of V at each sequence's last token.

What it measured: docs/benchmarks.md, "A value model fitted offline".

Run from the repository root, one torch job at a time (about 20 CPU minutes on 2 cores for 6 epochs: 145 s each):

    .venv/bin/python bench/critic_value_model_fit.py --cache runs/critic_value_fit.pt
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import random
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src"))

from critic_probe import add_rollout_args, sample, split_prompts  # noqa: E402
from critic_probe_fit import auc  # noqa: E402

from grpokit.algos import explained_variance  # noqa: E402
from grpokit.models import load_model_and_tokenizer  # noqa: E402
from grpokit.rollout import SamplingParams, make_engine  # noqa: E402
from grpokit.training.critic import Critic

KEYS = ("prompt_ids", "prompt_mask", "completion_ids", "completion_mask")


def rollouts(args: argparse.Namespace, model, tok) -> dict[str, dict[str, torch.Tensor]]:
    """Rollouts of the initial policy (cached in --cache): `fit`, `heldout` (prompts never fitted on) and `fresh`
    (new samples of the fit prompts), each split sampled in one call under its own seed."""
    cached = bool(args.cache) and os.path.exists(args.cache)
    out: dict[str, dict[str, torch.Tensor]] = torch.load(args.cache) if cached else {}
    splits = split_prompts(args.fit_prompts, args.seed)
    splits["fresh"] = splits["fit"]
    missing = [k for k in splits if k not in out]
    if not missing:
        return out
    engine = make_engine("hf", model=model, tokenizer=tok)
    params = SamplingParams(n=args.samples, max_new_tokens=args.max_new_tokens, temperature=args.temperature)
    for k, split in enumerate(splits):
        if split in missing:
            torch.manual_seed(args.seed + 1000 * k)
            out[split] = sample(engine, tok, splits[split], params)
            out[split]["reward"] = out[split]["reward"].float()
    if args.cache:
        os.makedirs(os.path.dirname(args.cache) or ".", exist_ok=True)
        torch.save(out, args.cache)
    return out


def values(critic: Critic, d: dict[str, torch.Tensor], idx: torch.Tensor) -> torch.Tensor:
    cols = [d[k][idx] for k in KEYS]
    return critic.values(*cols)


@torch.no_grad()
def evaluate(critic: Critic, d: dict[str, torch.Tensor], batch: int) -> dict[str, float]:
    """Token EV over all rows of `d` and the AUC of V at each row's last completion token."""
    critic.eval()
    n = len(d["reward"])
    v = torch.cat([values(critic, d, torch.arange(s, min(s + batch, n))) for s in range(0, n, batch)])
    critic.train()
    m = d["completion_mask"].float()
    g = d["reward"][:, None].expand_as(m)
    last = (m.sum(1) - 1).clamp(min=0).long()
    return {
        "ev": explained_variance(g, v, m),
        "auc": auc(v.gather(1, last[:, None]).squeeze(1).double(), d["reward"].double()),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_rollout_args(ap, fit_prompts=60)
    ap.add_argument("--epochs", type=int, default=6)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--trunk-lr", type=float, default=1e-5)
    ap.add_argument("--head-lr", type=float, default=1e-3)
    ap.add_argument("--max-grad-norm", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cache", default="", help="save the rollouts here, or load them when the file exists")
    ap.add_argument("--json", default="", help="write the per-epoch rows as JSON here")
    args = ap.parse_args()
    torch.set_num_threads(os.cpu_count() or 1)
    model, tok = load_model_and_tokenizer("smollm2-135m-instruct")
    data = rollouts(args, model, tok)
    fit, tests = data["fit"], {"held": data["heldout"], "fresh": data["fresh"]}
    for name, d in data.items():
        print(f"{name}: {len(d['reward'])} rollouts, accuracy {d['reward'].mean():.3f}")
    critic = Critic("model", int(model.config.hidden_size), trunk=copy.deepcopy(model).train())
    opt = torch.optim.AdamW(
        [
            {"params": critic.trunk.parameters(), "lr": args.trunk_lr},
            {"params": critic.head.parameters(), "lr": args.head_lr},
        ],
        weight_decay=0.0,
    )
    rows = [{"epoch": 0}]
    print(json.dumps(rows[-1]))
    gen = random.Random(args.seed)
    for epoch in range(1, args.epochs + 1):
        t0, order, losses = time.time(), list(range(len(fit["reward"]))), []
        gen.shuffle(order)
        for s in range(0, len(order), args.batch):
            idx = torch.tensor(order[s : s + args.batch])
            m = fit["completion_mask"][idx].float()
            v = values(critic, fit, idx)
            loss = (((v - fit["reward"][idx][:, None]) ** 2) * m).sum() / m.sum()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(critic.parameters(), args.max_grad_norm)
            opt.step()
            losses.append(loss.item())
        row = {"epoch": epoch, "loss": sum(losses) / len(losses), "s": round(time.time() - t0, 1)}
        for name, d in {**tests, "fit": fit}.items():
            row.update({f"{name}_{k}": round(v, 4) for k, v in evaluate(critic, d, 64).items()})
        rows.append(row)
        print(json.dumps(row), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
