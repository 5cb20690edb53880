"""Claim 3 (issue 14; DAPO, Dr. GRPO): sample-level loss normalisation (GRPO's seq-mean-token-mean) "biases the
model against long chain-of-thought" and lets wrong answers grow long, while token-level normalisation (DAPO's
token-mean) and Dr. GRPO's constant normaliser "better control response lengths".

Arms, all from the `grpo` advantage family on the embedded model, KL off in every arm so only the aggregation (and,
for Dr. GRPO, its mean-only advantage) differs: `grpo` with `loss_agg=seq-mean-token-mean`, `grpo` with
`loss_agg=token-mean`, and the `dr_grpo` recipe (`constant-norm`, no std). Figures, from each step's
`length/correct_mean` and `length/incorrect_mean`: the gap incorrect - correct averaged over the steps that have
both, the incorrect length over the last quarter, the mean length, held-out accuracy. Verdict: reproduced when the
seq-mean-token-mean arm's gap is the largest of the three in every seed; opposite when it is the smallest in every
seed; otherwise not at this scale.

    python bench/claims/c3_length_bias.py --seeds 0 --lock /tmp/torch.lock
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

import common

CORRECT, INCORRECT = "length/correct_mean", "length/incorrect_mean"


def gap(rows: list[dict[str, Any]]) -> float:
    """Mean over steps of incorrect - correct response length (steps with both kinds of responses)."""
    d = [r[INCORRECT] - r[CORRECT] for r in common.step_rows(rows) if None not in (r.get(INCORRECT), r.get(CORRECT))]
    d = [x for x in d if x == x]  # NaN when a step had no correct response
    return statistics.fmean(d) if d else float("nan")


def main() -> None:
    ap = common.parser("c3_length_bias", __doc__)
    ap.set_defaults(seeds=[0])
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--max-new-tokens", type=int, default=48)
    ap.add_argument("--lr", default="2e-5")
    args = ap.parse_args()
    out = Path(args.out)
    base = [
        *common.SMALL_BATCH,
        f"rollout.max_new_tokens={args.max_new_tokens}",
        f"train.lr={args.lr}",
        "train.save_every=0",
        "algo.kl_coef=0.0",
        "algo.reference=none",
    ]
    n = args.steps
    # label -> (directory stem, recipe, steps, overrides)
    arm_sets = {
        "seq-mean-token-mean (GRPO)": ("seq_mean_token_mean", "grpo", n, [*base, "algo.loss_agg=seq-mean-token-mean"]),
        "token-mean (DAPO)": ("token_mean", "grpo", n, [*base, "algo.loss_agg=token-mean"]),
        "Dr. GRPO (constant-norm, no std)": ("dr_grpo", "dr_grpo", n, base),
    }
    arms, dirs = common.run_arms(out, arm_sets, args.seeds, model=args.model, lock=args.lock)
    common.compare(dirs, out / "compare", "steps", args.lock)
    late = max(args.steps // 4, 1)
    figures = {
        "incorrect - correct length (mean over steps)": gap,
        f"incorrect length, last {late} steps": lambda r: common.last_mean(common.step_rows(r), INCORRECT, late),
        f"correct length, last {late} steps": lambda r: common.last_mean(common.step_rows(r), CORRECT, late),
        "mean length, first 2 steps": lambda r: common.last_mean(common.step_rows(r)[:2], "length/mean", 2),
        f"mean length, last {late} steps": lambda r: common.last_mean(common.step_rows(r), "length/mean", late),
        "held-out acc (end)": lambda r: common.final(r, "eval/accuracy"),
    }
    labels = list(arm_sets)
    per_seed = list(zip(*(arms[a] for a in labels)))  # (seq-mean, token-mean, dr) per seed
    largest = all(gap(s) > max(gap(t), gap(d)) for s, t, d in per_seed)
    smallest = all(gap(s) < min(gap(t), gap(d)) for s, t, d in per_seed)
    verdict = "reproduced" if largest else "opposite" if smallest else "not at this scale"
    common.write_result(
        out,
        "Claim 3: token-level loss and Dr. GRPO control length",
        [
            f"Setting: `{args.model}` on add1, 4 prompts x 8 samples x {args.max_new_tokens} tokens, lr {args.lr}, "
            f"{args.steps} steps, KL off, seeds {args.seeds}; mean (min-max) across seeds. Lengths in tokens. "
            f"Curves: `{out / 'compare'}`.",
            "",
            *common.arms_table(arms, figures),
            "",
            f"Verdict: **{verdict}** (the seq-mean-token-mean arm's incorrect - correct gap against the other two).",
            "",
            "Regenerate: `python bench/claims/c3_length_bias.py --seeds " + " ".join(map(str, args.seeds)) + "`",
        ],
    )


if __name__ == "__main__":
    main()
