"""The overrides of a few-second training run of the tiny model, shared by the trainer-level tests.

Each test module states only where its run differs (`tiny_overrides("model.precision=fp32", ...)`), so what a
module pins (precision, lengths, reward) stays visible where its numbers are asserted."""

from __future__ import annotations

import os

# the seed of every tiny run (model init, prompts, sampling): `scripts/kernel_matrix.py` sets GRPOKIT_TEST_SEED to
# run the tests that train under several seeds and kernel sets; plain `make test` runs seed 0
SEED = int(os.environ.get("GRPOKIT_TEST_SEED", "0"))

# 2 prompts x 4 samples of at most 6 tokens, one micro-batch, no evaluation or checkpoints, a reward that varies
# within every group (so each step has a gradient)
TINY: dict[str, str] = {
    "model.name": "tiny",
    "rollout.prompts_per_step": "2",
    "rollout.group_size": "4",
    "rollout.max_new_tokens": "6",
    "data.eval_size": "4",
    "train.eval_every": "0",
    "train.save_every": "0",
    "train.micro_batch_size": "8",
    "reward.functions": "[toy_rewards:vowel_frac]",
    "train.seed": str(SEED),
}

# on top of TINY, where the tiny model clearly learns vowel_frac within TINY_LEARNING_STEPS: 4 prompts x 8 samples
# of up to 8 tokens in one micro-batch, a high learning rate, no KL penalty. The random tiny model starts almost
# uniform over 49152 tokens (entropy 10.79 nats) and how soon it breaks out depends on the random stream: at lr 2e-2
# and 14 steps it learned under one seed of five; at 5e-2 and 20 steps the reward rose by > 0.1 under seeds 0-4
# with either sampler draw (inverse CDF or torch.multinomial).
TINY_LEARNING_STEPS = 20
TINY_LEARNING = [
    "train.lr=5e-2",
    "rollout.prompts_per_step=4",
    "rollout.group_size=8",
    "rollout.max_new_tokens=8",
    "algo.kl_coef=0.0",
    "train.micro_batch_size=32",
]


def tiny_overrides(*changes: str, drop: tuple[str, ...] = ()) -> list[str]:
    """`key=value` overrides: `TINY`, each `key=value` of `changes` replacing its key's value there (or added
    after it), without the keys in `drop` (the recipe's defaults then apply)."""
    merged = dict(TINY)
    for change in changes:
        key, value = change.split("=", 1)
        merged[key] = value
    for key in drop:
        del merged[key]
    return [f"{key}={value}" for key, value in merged.items()]
