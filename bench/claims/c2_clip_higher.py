"""Claim 2 (issue 14; DAPO): clip-higher (eps_high 0.28 vs 0.2) "counteracts entropy collapse and maintains policy
diversity".

Arms: `dapo` with eps_high = 0.2 and 0.28 (eps_low 0.2 both), dynamic sampling off (to isolate the clip), four
mini-batches per step so the ratio leaves 1 and the clip can act (with one update per batch nothing clips). Figures:
token entropy over the last steps, the share of tokens clipped above, held-out accuracy and pass@4 at the end.
Verdict: reproduced when the 0.28 arm's late entropy is higher than the 0.2 arm's in the mean and every seed pair,
without lower held-out accuracy (within 0.05).

    python bench/claims/c2_clip_higher.py --seeds 0 1 --lock /tmp/torch.lock
"""

from __future__ import annotations

from pathlib import Path

import common


def main() -> None:
    ap = common.parser("c2_clip_higher", __doc__)
    ap.add_argument("--steps", type=int, default=24)
    ap.add_argument("--task", default="add1")
    args = ap.parse_args()
    out = Path(args.out)
    base = [*common.SMALL_BATCH, "train.lr=2e-5", "train.mini_batches=4", "train.save_every=0", "algo.eps_low=0.2"]
    arms: dict[str, list] = {}
    dirs = []
    for eps in ("0.2", "0.28"):
        for seed in args.seeds:
            d = out / f"eps_high_{eps}_s{seed}"
            rows = common.train(
                d,
                "dapo",
                [*base, f"algo.eps_high={eps}"],
                steps=args.steps,
                seed=seed,
                model=args.model,
                lock=args.lock,
                task=args.task,
                extra=["--eval-samples", "4"],
            )
            arms.setdefault(f"eps_high={eps}", []).append(rows)
            dirs.append(d)
    common.compare(dirs, out / "compare", "steps", args.lock)
    late = max(args.steps // 3, 1)
    figures = {
        f"entropy, last {late} steps": lambda r: common.last_mean(common.step_rows(r), "entropy/token_mean", late),
        "entropy, first 3 steps": lambda r: (
            common.step_rows(r) and common.last_mean(common.step_rows(r)[:3], "entropy/token_mean", 3)
        ),
        "clipped above (mean)": lambda r: common.last_mean(common.step_rows(r), "actor/clipfrac_high", args.steps),
        "held-out acc (end)": lambda r: common.final(r, "eval/accuracy"),
        "pass@4 (end)": lambda r: common.final(r, "eval/pass@4"),
    }
    ent = {
        a: [common.last_mean(common.step_rows(r), "entropy/token_mean", late) for r in runs] for a, runs in arms.items()
    }
    acc = common.arm_means(arms, lambda r: common.final(r, "eval/accuracy"))
    lo, hi = ent["eps_high=0.2"], ent["eps_high=0.28"]
    higher = all(h > low for h, low in zip(hi, lo))
    mean_higher = sum(hi) / len(hi) > sum(lo) / len(lo)
    no_loss = acc["eps_high=0.28"] >= acc["eps_high=0.2"] - 0.05
    if higher and no_loss:
        verdict = "reproduced"
    elif mean_higher:
        verdict = "not at this scale (higher in the mean, not in every seed pair or at a cost in accuracy)"
    else:
        verdict = "opposite" if not higher and all(h < low for h, low in zip(hi, lo)) else "not at this scale"
    common.write_result(
        out,
        "Claim 2: clip-higher keeps entropy up",
        [
            f"Setting: `{args.model}` on `{args.task}`, `dapo` (token-mean, no KL), 4 prompts x 8 samples x 32 "
            f"tokens, lr 2e-5, 4 mini-batches per step, {args.steps} steps, dynamic sampling off, seeds "
            f"{args.seeds}; figures are mean (min-max) across seeds. Curves: `{out / 'compare'}`.",
            "",
            *common.arms_table(arms, figures),
            "",
            f"Verdict: **{verdict}**.",
            "",
            "Regenerate: `python bench/claims/c2_clip_higher.py --seeds " + " ".join(map(str, args.seeds)) + "`",
        ],
    )


if __name__ == "__main__":
    main()
