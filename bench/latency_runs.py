"""Detection latency on real grpokit runs (issue 40 item 2): the tiny random model (`model.name=tiny`) trained by the
real trainer, its reward turned bad at a known step k (`bench/latency_rewards.py`), the live monitor's alerts read
from the run's `alerts.jsonl`, and its `metrics.jsonl` replayed at logging intervals 1, 5, 10 with
`bench/latency.py`'s scoring (the rows `grpokit watch` would feed).

The setup is the healthy run of tests/training/test_failure_injection.py (4 prompts x 8 samples of up to 10 tokens,
learning rate 2e-4, fp32, a random quarter of the vocabulary ending a response so lengths vary, reward: the first
visible character is a vowel), `STEPS` steps, default detector thresholds; from step `K` on the reward is
`vowel_then_zero` (nothing passes: advantage collapse), or that with `zero_then_length` beside it (the correctness
check nobody passes and a reward for the length in characters: a hackable reward takes over; advantage collapse
comes with it, by the accuracy-based zero-variance fraction, as in the failure-injection test of a length reward).
Each run trains in its own process (a fresh reward worker, whose step count starts at 0).
False alarms: the alerts (warning or critical) confirmed before k, in the healthy part.

    flock /tmp/torch.lock .venv/bin/python bench/latency_runs.py              # 2 failures x 3 seeds, ~2 min of CPU
    flock /tmp/torch.lock .venv/bin/python bench/latency_runs.py --seeds 0

Needs torch (and the tokenizer cache the tests use); HF_HUB_OFFLINE=1 is set for the runs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from grpokit import metric_names as mn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from latency import INTERVALS, Injection, Result, read_base, score  # noqa: E402

HERE = Path(__file__).resolve().parent
STEPS, K = 40, 21
PROMPTS, GROUP = 4, 8
OVERRIDES = [
    "model.name=tiny",
    f"rollout.prompts_per_step={PROMPTS}",
    f"rollout.group_size={GROUP}",
    "rollout.max_new_tokens=10",
    "data.eval_size=4",
    "train.eval_every=0",
    "train.save_every=0",
    "train.micro_batch_size=32",
    "train.lr=2e-4",
    "model.precision=fp32",
    f"train.steps={STEPS}",
    "reward.sandbox_env=[LATENCY_K,LATENCY_BATCH]",
]

FAILURES = (
    (
        "vowel_then_zero",
        Injection(
            "advantage collapse (reward 0 from k)",
            "advantage_collapse",
            ("advantage collapse",),
            "abrupt",
            (mn.ZV_ACC_FRAC, mn.ZV_FRAC),
            "nothing passes the verifier from k",
        ),
    ),
    (
        "vowel_then_zero,latency_rewards:zero_then_length",
        Injection(
            "hackable reward (length from k)",
            "noisy_reward",
            ("noisy or hackable reward",),
            "abrupt",
            (mn.REWARD_LENGTH_CORR,),
            "the reward is the response length from k",
        ),
    ),
)


def train_one(reward: str, seed: int, run_dir: Path) -> None:
    """One run in this process (called as `--one`): the trainer with the stop-token quarter of the vocabulary."""
    import torch

    from grpokit.config import build_config
    from grpokit.training import Trainer, fit

    cfg = build_config(
        "grpo", overrides=[*OVERRIDES, f"train.seed={seed}", f"reward.functions=[latency_rewards:{reward}]"]
    )
    trainer = Trainer(cfg, run_dir)
    vocab = trainer.model.config.vocab_size
    ids = torch.randperm(vocab, generator=torch.Generator().manual_seed(0))[: vocab // 4]
    trainer.engine.eos_ids = sorted(set(trainer.engine.eos_ids) | set(ids.tolist()))
    fit(trainer, None, eval_before=False)


def run(reward: str, seed: int, run_dir: Path) -> None:
    env = dict(os.environ, LATENCY_K=str(K), LATENCY_BATCH=str(PROMPTS * GROUP), HF_HUB_OFFLINE="1")
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")])
    cmd = [sys.executable, __file__, "--one", reward, str(seed), str(run_dir)]
    subprocess.run(cmd, env=env, check=True, capture_output=True, text=True)


def live_alerts(run_dir: Path) -> list[dict[str, Any]]:
    path = run_dir / "alerts.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def evaluate(seeds: list[int], work: Path) -> list[tuple[Injection, int, dict[str, Any]]]:
    """Each failure x seed: the live alert (first of the failure's detector confirmed at or after k), the false alarms
    before k, and the replay at every interval."""
    out = []
    for reward, inj in FAILURES:
        for seed in seeds:
            d = work / f"{inj.detector}_{seed}"
            run(reward, seed, d)
            alerts = live_alerts(d)
            mine = [a for a in alerts if a["detector"] == inj.detector and a["fired_at"] >= K]
            false = sorted(
                {(a["detector"], a["severity"], a["fired_at"]) for a in alerts if a["fired_at"] < K}
                - {(a["detector"], "info", a["fired_at"]) for a in alerts}
            )
            base = read_base(d, "", "grpokit")
            assert base is not None, f"{d}: no training step"
            replay: dict[int, Result | None] = {iv: score(inj, base, K, base.raw, iv, None) for iv in INTERVALS}
            first = min(mine, key=lambda a: a["fired_at"]) if mine else None
            out.append((inj, seed, {"live": first, "false": false, "replay": replay}))
    return out


def table(results: list[tuple[Injection, int, dict[str, Any]]]) -> str:
    head = [
        "failure (from step k = 21 of 40)",
        "detector",
        "seed",
        "live alert: step (severity)",
        "live steps after k",
        "alerts before k",
        *[f"replay interval {iv}: steps / rows to alert" for iv in INTERVALS],
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for inj, seed, r in results:
        live = r["live"]
        cells = [
            inj.name,
            f"`{inj.detector}`",
            str(seed),
            "none" if live is None else f"{live['fired_at']} ({live['severity']})",
            "–" if live is None else str(live["fired_at"] - K),
            ", ".join(f"{d} {s} at {st}" for d, s, st in r["false"]) or "none",
        ]
        for iv in INTERVALS:
            x = r["replay"][iv]
            if x is None:
                cells.append("signal not logged")
            elif x.alert is None:
                cells.append("no alert")
            else:
                cells.append(f"{x.alert - K} / {x.rows_to_alert}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--one", nargs=3, metavar=("REWARD", "SEED", "DIR"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.one:
        train_one(args.one[0], int(args.one[1]), Path(args.one[2]))
        return 0
    with tempfile.TemporaryDirectory(prefix="latency_runs_") as tmp:
        print(table(evaluate(args.seeds, Path(tmp))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
