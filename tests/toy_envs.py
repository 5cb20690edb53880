"""Environments used by the multi-turn tests (named as `agent.environment=toy_envs:NAME`)."""

from __future__ import annotations

from typing import Any


class Echo:
    """grpokit's protocol: asks for another turn until the third, then ends the episode with reward 0.5."""

    turns = 3

    def reset(self, example: Any) -> None:
        self.seen = 0

    def step(self, text: str) -> tuple[str | None, bool, float | None]:
        self.seen += 1
        done = self.seen >= self.turns
        return (None if done else f"Again (turn {self.seen + 1})."), done, 0.5 if done else None


class Tally:
    """TRL's environment_factory convention: reset(**row), a public tool method, get_reward()."""

    def reset(self, **row: Any) -> None:
        self.total = 0

    def add(self, n: int) -> str:
        """Add to the running total.

        Args:
            n: the number to add.
        """
        self.total += n
        return str(self.total)

    def get_reward(self) -> float:
        return float(self.total > 0)
