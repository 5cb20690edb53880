"""The `Task` interface and the seeded sampling shared by the built-in tasks."""

from __future__ import annotations

import logging
import random
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import TypeVar

from .example import Example

log = logging.getLogger(__name__)
T = TypeVar("T")

SPLITS = ("train", "test")
_SPLIT_ALIASES = {"eval": "test", "val": "test", "validation": "test", "heldout": "test", "held_out": "test"}


def normalize_split(split: str) -> str:
    """Map a split name (or an alias such as "eval") to "train" or "test"; ValueError otherwise."""
    s = _SPLIT_ALIASES.get(split, split)
    if s not in SPLITS:
        known = ", ".join(SPLITS)
        raise ValueError(f"unknown split {split!r}; use one of {known} (aliases: eval, validation)")
    return s


def sample_pool(pool: Sequence[T], n: int | None, seed: int, *, cycle: bool) -> list[T]:
    """Seeded sample of `n` items from `pool`; `n=None` gives the whole pool in its own order.

    With `cycle`, `n` larger than the pool walks through reshuffled copies (each item appears
    ceil(n/len) or floor(n/len) times); without it `n` is capped at the pool size with a warning.
    """
    if n is None:
        return list(pool)
    if n < 0:
        raise ValueError(f"n must be >= 0 or None, got {n}")
    rng = random.Random(seed)
    if n > len(pool) and not cycle:
        log.warning("asked for %d examples but only %d exist; returning %d", n, len(pool), len(pool))
        n = len(pool)
    out: list[T] = []
    while len(out) < n:
        order = list(pool)
        rng.shuffle(order)
        out.extend(order[: n - len(out)])
    return out


class Task(ABC):
    """A built-in verifiable task: a name, a one-line description, the reward that checks it, and examples."""

    name: str
    description: str
    default_reward: str

    @abstractmethod
    def examples(self, split: str = "train", n: int | None = None, seed: int = 0) -> list[Example]:
        """Deterministic examples of `split` ("train" or "test"): the same (split, n, seed), the same list."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, default_reward={self.default_reward!r})"
