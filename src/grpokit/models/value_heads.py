"""The value heads a critic can have (`critic.kind`), registered by name (docs/math.md §2, §11).

* `head` — a linear value head on the policy's last hidden state, detached (the value loss never moves the
  policy); the cheapest, a linear probe of the policy's features.
* `mlp` — a two-layer MLP head on the same detached features.
* `model` — a separate value model (VC-PPO / VAPO / verl style): a copy of the policy's transformer (or the
  causal LM at `critic.model`) with a linear head, trained end to end.

The output layer starts at zero (V = 0 everywhere), so advantages start as Monte-Carlo returns.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from torch import nn

from ..common.registry import Registry


def zero_last(layer: nn.Linear) -> nn.Linear:
    """`layer` with weight and bias at zero (the value starts at 0)."""
    nn.init.zeros_(layer.weight)
    nn.init.zeros_(layer.bias)
    return layer


@dataclass(frozen=True)
class ValueHead:
    """A kind of critic: how its head is built from the width of the features it reads, and whether it runs a
    transformer of its own (else it reads the policy's detached hidden states)."""

    build: Callable[[int, int], nn.Module]  # (hidden_size, mlp_hidden) -> head
    own_trunk: bool
    description: str


def _linear(hidden: int, mlp_hidden: int) -> nn.Module:
    return zero_last(nn.Linear(hidden, 1))


def _mlp(hidden: int, mlp_hidden: int) -> nn.Module:
    return nn.Sequential(nn.Linear(hidden, mlp_hidden), nn.GELU(), zero_last(nn.Linear(mlp_hidden, 1)))


CRITIC_KINDS = Registry.of(
    "critic kind",
    {
        "head": ValueHead(_linear, False, "a linear head on the policy's detached last hidden state"),
        "mlp": ValueHead(_mlp, False, "a two-layer MLP head on the policy's detached last hidden state"),
        "model": ValueHead(_linear, True, "a separate value model: a transformer of its own with a linear head"),
    },
)
