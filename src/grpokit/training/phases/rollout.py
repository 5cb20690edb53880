"""Rollout phase: take k prompts from the seeded stream and sample G completions for each with the engine."""

from __future__ import annotations

import torch

from ...rollout import RolloutEngine, RolloutOutput, SamplingParams


class PromptStream:
    """Endless, seeded, epoch-shuffled stream over training examples; its position is checkpointed.

    Under torchrun, rank r of W reads global positions r, r+W, r+2W, ...: the ranks' prompts never overlap within
    an epoch, and each rank's `position` (its own count) is checkpointed per rank. W=1 is the plain stream."""

    def __init__(self, n: int, seed: int, position: int = 0, rank: int = 0, world: int = 1) -> None:
        self.n, self.seed, self.position = n, seed, position
        self.rank, self.world = rank, world

    def take(self, k: int) -> list[int]:
        out = []
        for _ in range(k):
            epoch, i = divmod(self.position * self.world + self.rank, self.n)
            perm = torch.randperm(self.n, generator=torch.Generator().manual_seed(self.seed + epoch))
            out.append(int(perm[i]))
            self.position += 1
        return out


def sample_groups(
    engine: RolloutEngine, prompt_tokens: list[list[int]], idx: list[int], params: SamplingParams
) -> RolloutOutput:
    """G completions (`params.n`) for each prompt of `idx`, by the engine (`grpokit.rollout`)."""
    return engine.generate([prompt_tokens[i] for i in idx], params)
