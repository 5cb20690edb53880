"""Rescue (issue 40 item 4): does `grpokit train --autopilot` save a run that is failing?

Each failure the seeds name is caused on the embedded model (SmolLM2-135M-Instruct, `add1`), and the run is trained
twice, without and with `--autopilot`, over several seeds; the healthy run is the baseline. The figure is the final
held-out accuracy (the 20 held-out `add1` prompts x `--eval-samples` samples, at `rollout.eval_temperature`); the
target is the autopilot arm within 10 points of the healthy run.

The common setting: `dapo` with dynamic sampling off (`algo.group_filter=all`: so that the autopilot can switch it
on), 4 prompts x 8 samples x 32 new tokens, lr 2e-5, `--steps` steps (12: the healthy run learns `add1` in about 12
steps, and a run here takes one to two minutes on two CPU cores). The entropy detector's patience is 2 steps in every
arm, healthy included (`monitor.thresholds`; the default, 50 steps, is longer than these runs); every other
threshold is the default. The failures:

- **entropy collapse, learning rate x10**: lr 2e-4;
- **entropy collapse, learning rate x10, watched**: the same with a frozen reference whose k3 KL is in the loss at
  0.001 only (grpokit measures KL to a reference only when it has a coefficient): the KL it logs is the signal the
  run without a reference lacks;
- **entropy collapse, cold sampler**: `rollout.temperature=0.3` (the learner scores at the same temperature);
- **advantage collapse, unsolvable prompts mixed in**: 3 of 4 training prompts are products of two 5-digit numbers,
  which the model never gets right (every group of them is all-wrong); the held-out set is `add1`'s, as in every arm;
- **KL drift, high learning rate with a reference**: lr 2e-4 with a frozen reference and the k3 KL in the loss at
  0.04 (GRPO's), which the healthy baseline does not have.

Each arm's row gives the held-out accuracy (mean and min-max across seeds), its gap to the healthy run, the alerts
raised (the step each was raised at), and for the autopilot arms the interventions it made (`interventions.jsonl`:
the action, the step and the alert that caused it) or what it said it would need.

    python bench/rescue.py --seeds 0 1 2 --lock /tmp/torch.lock      # runs into runs/rescue, writes result.md
    python bench/rescue.py --arms healthy kl_drift --seeds 0          # a subset

A finished run of the same settings in `--out` is reused, so the script can be re-run to add seeds or arms.
"""

from __future__ import annotations

import json
import random
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent / "claims"))

import common  # noqa: E402  (bench/claims/common.py: launching runs, reading rows)

from grpokit.data.arithmetic import ADD1  # noqa: E402

BASE = [*common.SMALL_BATCH[:3], "algo.group_filter=all", "train.eval_every=0", "train.save_every=0"]
PATIENCE = "monitor.thresholds={entropy_collapse: {patience: 2}}"
REFERENCE = ["algo.kl_coef=0.04", "algo.reference=frozen", "algo.kl_estimator=k3", "algo.kl_placement=loss"]
TARGET = 0.10  # the autopilot arm within 10 points of the healthy run

#: arm -> (what is broken, its overrides); the data of `advantage_collapse` is written by `mixed_data`
FAILURES: dict[str, tuple[str, list[str]]] = {
    "entropy_lr": ("entropy collapse, learning rate x10 (2e-4)", ["train.lr=2e-4"]),
    "entropy_lr_watched": (
        "entropy collapse, lr x10, with a reference at k3 0.001 (watching, hardly pulling)",
        ["train.lr=2e-4", *REFERENCE[1:], "algo.kl_coef=0.001"],
    ),
    "entropy_cold": ("entropy collapse, cold sampler (T=0.3)", ["rollout.temperature=0.3"]),
    "advantage_collapse": ("advantage collapse, 3 of 4 prompts unsolvable", []),
    "kl_drift": ("KL drift, lr x10 with a reference (k3 in the loss, 0.04)", ["train.lr=2e-4", *REFERENCE]),
}


def mixed_data(out: Path) -> list[str]:
    """`add1`'s training prompts, each beside three it cannot solve (a product of two 5-digit numbers), and `add1`'s
    held-out prompts for evaluation, as JSONL files; the overrides that train on them."""
    out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(0)
    rows = []
    for ex in ADD1.examples("train"):
        rows.append({"prompt": ex.prompt, "answer": ex.answer})
        for _ in range(3):
            a, b = rng.randrange(10_000, 100_000), rng.randrange(10_000, 100_000)
            rows.append({"prompt": f"What is {a} * {b}? Answer with just the number.", "answer": str(a * b)})
    held_out = [{"prompt": ex.prompt, "answer": ex.answer} for ex in ADD1.examples("test")]
    train, test = out / "mixed_train.jsonl", out / "add1_test.jsonl"
    train.write_text("".join(json.dumps(r) + "\n" for r in rows))
    test.write_text("".join(json.dumps(r) + "\n" for r in held_out))
    return [f"data.eval_data={test}", "reward.functions=[exact_numeric]", f"data.task={train}"]


def held_out(run_dir: Path) -> float:
    """The final held-out accuracy of a finished run (its last `eval/accuracy`)."""
    return common.final(common.read_rows(run_dir), "eval/accuracy")


def jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def alerts_fired(run_dir: Path) -> str:
    """Each failure mode that raised a warning or critical alert, with the step it was raised at (the step the
    autopilot could act at)."""
    first: dict[str, int] = {}
    for a in jsonl(run_dir / "alerts.jsonl"):
        if a.get("severity") in ("warning", "critical") and a.get("mode"):
            first.setdefault(a["mode"], int(a.get("fired_at", a["step"])))
    return ", ".join(f"{m} ({s})" for m, s in first.items()) or "none"


def autopilot_said(run_dir: Path) -> str:
    """The autopilot's interventions (action at step, because) and what it said it would need."""
    parts = []
    for r in jsonl(run_dir / "interventions.jsonl"):
        if r.get("kind") == "intervention":
            parts.append(f"`{r['action']}` at step {r['step']}")
        elif r.get("kind") == "unable":
            parts.append(f"could not act on {r.get('mode')} at step {r['step']}")
    return "; ".join(parts) or "nothing"


def arm_runs(
    args: Any, out: Path, arm: str, autopilot: bool, sets: list[str], task: str = "add1"
) -> list[tuple[int, Path]]:
    runs = []
    for seed in args.seeds:
        d = out / f"{arm}{'_autopilot' if autopilot else ''}_s{seed}"
        extra = ["--eval-samples", str(args.eval_samples), *(["--autopilot"] if autopilot else [])]
        common.train(
            d, "dapo", sets, steps=args.steps, seed=seed, model=args.model, lock=args.lock, task=task, extra=extra
        )
        runs.append((seed, d))
    return runs


def row(label: str, runs: list[tuple[int, Path]], healthy: float | None, autopilot: bool) -> str:
    accs = [held_out(d) for _, d in runs]
    mean = statistics.fmean(accs)
    gap = "" if healthy is None else f"{100 * (mean - healthy):+.1f}"
    verdict = ""
    if healthy is not None and autopilot:
        verdict = "within 10 points" if mean >= healthy - TARGET else "not rescued"
    fired = "<br>".join(f"s{s}: {alerts_fired(d)}" for s, d in runs)
    said = "<br>".join(f"s{s}: {autopilot_said(d)}" for s, d in runs) if autopilot else ""
    cells = [label, common.spread(accs), gap, verdict, fired, said]
    return "| " + " | ".join(cells) + " |"


def main() -> None:
    ap = common.parser("rescue", __doc__)
    ap.set_defaults(out=str(common.ROOT / "runs" / "rescue"), seeds=[0, 1, 2])
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--eval-samples", type=int, default=4)
    ap.add_argument("--arms", nargs="+", default=["healthy", *FAILURES], choices=["healthy", *FAILURES])
    args = ap.parse_args()
    out = Path(args.out)
    base = [*BASE, "train.lr=2e-5", PATIENCE]
    healthy_runs = arm_runs(args, out, "healthy", False, base)
    healthy = statistics.fmean(held_out(d) for _, d in healthy_runs)
    lines = [
        "| arm | held-out accuracy | vs healthy (points) | autopilot | alerts raised (step) | autopilot did |",
        "|---|---|---|---|---|---|",
        row("healthy", healthy_runs, None, False),
    ]
    plan = [a for a in args.arms if a != "healthy"]
    rows: dict[tuple[str, bool], str] = {}
    for autopilot in (False, True):  # every failure without the autopilot first: its runs do not depend on it
        for arm in plan:
            label, sets = FAILURES[arm]
            data = mixed_data(out / "data") if arm == "advantage_collapse" else []
            runs = arm_runs(args, out, arm, autopilot, [*base, *sets, *data])
            rows[arm, autopilot] = row(f"{label}{', autopilot' if autopilot else ''}", runs, healthy, autopilot)
    lines += [rows[arm, autopilot] for arm in plan for autopilot in (False, True)]  # each failure's pair together
    setting = (
        f"Setting: `{args.model}` on `add1`, `dapo` with dynamic sampling off, 4 prompts x 8 samples x 32 tokens, "
        f"lr 2e-5, {args.steps} steps, entropy patience 2; held-out accuracy after the last step over 20 prompts x "
        f"{args.eval_samples} samples; seeds {args.seeds}; mean (min-max) across seeds."
    )
    command = f"Regenerate: `python bench/rescue.py --seeds {' '.join(map(str, args.seeds))} --lock /tmp/torch.lock`"
    common.write_result(out, "Rescue: the autopilot against each failure", [setting, "", *lines, "", command])


if __name__ == "__main__":
    main()
