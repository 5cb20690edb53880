"""Rewards: built-in verifiable rewards, user `module:function` rewards, and the isolating `RewardManager`."""

from __future__ import annotations

from .manager import RewardManager
from .registry import REWARDS, RewardFn, list_rewards, load_reward
from .result import FAILURE_KINDS, RewardFailure, RewardFailureError, RewardResult

__all__ = [
    "FAILURE_KINDS",
    "REWARDS",
    "RewardFailure",
    "RewardFailureError",
    "RewardFn",
    "RewardManager",
    "RewardResult",
    "list_rewards",
    "load_reward",
]
