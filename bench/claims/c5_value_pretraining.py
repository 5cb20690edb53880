"""Claim 5 (issue 14; VC-PPO, VAPO): value pretraining "prevents collapse in output length", and so does
decoupled GAE (lambda_critic = 1 for the critic's targets, lambda < 1 for the policy's advantages).

Arms, on the embedded model: `vapo` with its value pretraining (up to `--pretrain-steps` batches, stopping early at
explained variance 0.5) and with none (`critic.pretrain_max_steps=0`); `ppo` with lambda = lambda_critic = 0.95 and
with the critic's lambda decoupled to 1. Figures: mean response length over the first 2 steps and the last quarter,
their ratio ("length kept"), the shortest batch mean, the critic's explained variance at the end, held-out accuracy.
Verdict per pair (`verdict`): reproduced when the arm with the fix keeps more of its length by > 0.1 in every seed
at no lower accuracy; opposite when it keeps less by > 0.1 in every seed; otherwise not at this scale. On add1 a
short answer is the right one (the embedded model's first answers run ~23 tokens and learned ones ~9), so some
shortening is learning, not collapse: the pair's difference is the figure, not the fall itself.

    python bench/claims/c5_value_pretraining.py --seeds 0 --lock /tmp/torch.lock
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

import common

LEN = "length/mean"
EV = "critic/explained_variance"
PRETRAIN_EV = "critic_pretrain/explained_variance"


def lengths(rows: list[dict[str, Any]]) -> list[float]:
    return [float(r[LEN]) for r in common.step_rows(rows) if r.get(LEN) is not None]


def first_mean(rows: list[dict[str, Any]]) -> float:
    return statistics.fmean(lengths(rows)[:2])


def late_mean(rows: list[dict[str, Any]]) -> float:
    ls = lengths(rows)
    return statistics.fmean(ls[-max(len(ls) // 4, 1) :])


def kept(rows: list[dict[str, Any]]) -> float:
    """Last-quarter mean length over the first 2 steps' mean."""
    return late_mean(rows) / first_mean(rows)


def verdict(without: list[list[dict[str, Any]]], with_fix: list[list[dict[str, Any]]]) -> str:
    """Reproduced when the fixed arm keeps more of its length than the arm without the fix (by > 0.1 in every
    seed) at no lower held-out accuracy (within 0.05); opposite when it keeps less by > 0.1 in every seed."""
    diffs = [kept(b) - kept(a) for a, b in zip(without, with_fix)]
    acc = [common.final(b, "eval/accuracy") - common.final(a, "eval/accuracy") for a, b in zip(without, with_fix)]
    figs = f"length kept, with - without the fix: {', '.join(f'{d:+.2f}' for d in diffs)}"
    if all(d > 0.1 for d in diffs) and all(x >= -0.05 for x in acc):
        return f"reproduced ({figs})"
    if all(d < -0.1 for d in diffs):
        return f"opposite ({figs})"
    return f"not at this scale ({figs})"


def median_defined(rows: list[dict[str, Any]], key: str) -> float:
    """Median of `key` over the rows where it is defined: EV is NaN on a batch whose returns barely vary (every
    answer right), and runs logged before that rule read -1e4 there; the median is robust to either."""
    vals = [float(r[key]) for r in rows if r.get(key) is not None and r[key] == r[key]]
    return statistics.median(vals) if vals else float("nan")


def main() -> None:
    ap = common.parser("c5_value_pretraining", __doc__)
    ap.set_defaults(seeds=[0])
    ap.add_argument("--steps", type=int, default=16)
    ap.add_argument("--pretrain-steps", type=int, default=50, help="vapo's value pretraining cap (VAPO: ~50)")
    ap.add_argument("--lr", default="2e-5")
    args = ap.parse_args()
    out = Path(args.out)
    base = [*common.SMALL_BATCH, f"train.lr={args.lr}", "train.save_every=0"]
    n = args.steps
    # label -> (directory stem, recipe, steps, overrides)
    arm_sets = {
        f"vapo, pretrain <= {args.pretrain_steps}": (
            "vapo_pretrain",
            "vapo",
            n,
            [*base, f"critic.pretrain_max_steps={args.pretrain_steps}"],
        ),
        "vapo, no pretrain": ("vapo_no_pretrain", "vapo", n, [*base, "critic.pretrain_max_steps=0"]),
        "ppo, lambda_critic 0.95": ("ppo_lam_critic_0.95", "ppo", n, [*base, "algo.lam=0.95", "algo.lam_critic=0.95"]),
        "ppo, lambda_critic 1 (decoupled)": (
            "ppo_lam_critic_1",
            "ppo",
            n,
            [*base, "algo.lam=0.95", "algo.lam_critic=1.0"],
        ),
    }
    arms, dirs = common.run_arms(out, arm_sets, args.seeds, model=args.model, lock=args.lock)
    common.compare(dirs, out / "compare", "steps", args.lock)
    figures = {
        "length, first 2 steps": first_mean,
        "length, last quarter": late_mean,
        "length kept (last / first)": kept,
        "shortest step mean": lambda r: min(lengths(r)),
        "value pretrain batches": lambda r: float(sum(1 for x in r if PRETRAIN_EV in x)),
        "critic EV (median over steps)": lambda r: median_defined(common.step_rows(r), EV),
        "held-out acc (end)": lambda r: common.final(r, "eval/accuracy"),
    }
    labels = list(arm_sets)
    common.write_result(
        out,
        "Claim 5: value pretraining and decoupled GAE keep output length",
        [
            f"Setting: `{args.model}` on add1, 4 prompts x 8 samples x 32 tokens, lr {args.lr}, {args.steps} steps, "
            f"critic `head` (recipe defaults: its own AdamW at lr 1e-3), seeds {args.seeds}; mean (min-max) across "
            f"seeds. Curves: `{out / 'compare'}`.",
            "",
            *common.arms_table(arms, figures),
            "",
            f"- Value pretraining keeps length (vapo): **{verdict(arms[labels[1]], arms[labels[0]])}**.",
            f"- Decoupled lambda_critic = 1 keeps length (ppo): **{verdict(arms[labels[2]], arms[labels[3]])}**.",
            "",
            "Regenerate: `python bench/claims/c5_value_pretraining.py --seeds " + " ".join(map(str, args.seeds)) + "`",
        ],
    )


if __name__ == "__main__":
    main()
