"""What a checkpoint must hold before a resume trusts it: numbers a run can have written, per-rank states as plain
numbers, and optimizer states shaped like the parameters they belong to.

A state.json is text anyone can edit (or a disk can damage). A step of 10^18, a prompt position of -5 or 10^18, a
NaN KL coefficient were resumed as they stood: the run trained on from nonsense, or hung skipping prompts. Each
number is checked against what a run can reach: the step within `train.steps`' cap, positions and group counters
within that many steps of the most prompts a step takes, the coefficients finite and within their keys' ranges
(`grpokit.config.ranges`). An optimizer state of another model (a moment tensor shaped unlike its parameter, or
another count of parameters) is refused too, before anything is restored: torch would load it and fail at the
first update. Every refusal is a `CheckpointError` naming the file, the field and the value.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import torch

from ..common.errors import GrpokitError
from . import rng

MAX_STEP = 10_000_000  # train.steps' cap (grpokit.config.ranges.BIG)
MAX_POSITION = MAX_STEP * 65_536  # that many steps of the most prompts a step takes (rollout.prompts_per_step)
MAX_COEF = 1_000_000.0  # algo.kl_coef / algo.entropy_coef's cap (grpokit.config.ranges.HUGE)
RANGES: dict[str, tuple[float, float]] = {
    "step": (0, MAX_STEP),
    "data_position": (0, MAX_POSITION),
    "group_counter": (0, MAX_POSITION),
    "kl_coef": (0.0, MAX_COEF),
    "entropy_coef": (0.0, MAX_COEF),
}
FIX = "the file was edited or damaged: resume from an earlier checkpoint (move this one aside), or start a new run"


class CheckpointError(GrpokitError, RuntimeError):
    """A checkpoint that cannot be read."""


def _is_a(value: Any, types: type | tuple[type, ...]) -> bool:
    return isinstance(value, types) and not isinstance(value, bool)


def check_ranges(state: dict[str, Any], rel: Path | str, where: str = "") -> None:
    """CheckpointError naming the first field of `RANGES` in `state` (when it is a number) outside its range."""
    for key, (low, high) in RANGES.items():
        value = state.get(key)
        if not _is_a(value, (int, float)):
            continue  # absent or not a number: `read_state`'s `require` says so where it matters
        if not (isinstance(value, int) or math.isfinite(value)) or not low <= value <= high:
            raise CheckpointError(
                f"{rel}: {where}{key} is {value!r}, outside [{low:g}, {high:g}] that a run can reach; {FIX}"
            )


def check_ranks(ranks: Any, rel: Path) -> None:
    """Each rank's entry of state.json: its prompt position, group counter and RNG state as plain numbers in
    range. A base64 pickle (what grpokit wrote before) is refused, never unpickled: unpickling runs code."""
    if not isinstance(ranks, list) or not ranks:
        raise CheckpointError(f"{rel}: 'ranks' is not a list of per-rank states")
    for i, entry in enumerate(ranks):
        if not isinstance(entry, dict) or not all(_is_a(entry.get(k), int) for k in ("data_position", "group_counter")):
            raise CheckpointError(f"{rel}: ranks[{i}] lacks an integer data_position or group_counter")
        check_ranges({k: entry[k] for k in ("data_position", "group_counter")}, rel, f"ranks[{i}].")
        if isinstance(entry.get("rng"), str):
            raise CheckpointError(
                f"{rel}: ranks[{i}].rng is a pickled RNG state (written before grpokit stored plain numbers); it is "
                "never unpickled, since unpickling runs code: resume it with the grpokit that wrote it, or start anew"
            )
        try:
            rng.check(entry.get("rng"))
        except ValueError as e:
            raise CheckpointError(f"{rel}: ranks[{i}]: {e}") from e


def _mismatch(saved: Any, optimizer: torch.optim.Optimizer) -> str | None:
    """Why the optimizer state dict `saved` does not fit `optimizer`'s parameters; None when it does."""
    groups, state = saved.get("param_groups"), saved.get("state")
    if not isinstance(groups, list) or not isinstance(state, dict):
        return "no param_groups list and state mapping"
    if len(groups) != len(optimizer.param_groups):
        return f"{len(groups)} parameter group(s), the optimizer has {len(optimizer.param_groups)}"
    for g, (group, live) in enumerate(zip(groups, optimizer.param_groups, strict=True)):
        ids = group.get("params") if isinstance(group, dict) else None
        if not isinstance(ids, list) or len(ids) != len(live["params"]):
            have = len(ids) if isinstance(ids, list) else "no"
            return f"group {g} holds {have} parameter(s), the model has {len(live['params'])}"
        for pid, param in zip(ids, live["params"], strict=True):
            entry = state.get(pid, {})
            for name, t in entry.items() if isinstance(entry, dict) else ():
                if isinstance(t, torch.Tensor) and t.dim() > 0 and tuple(t.shape) != tuple(param.shape):
                    return f"{name} of parameter {pid} has shape {list(t.shape)}, the parameter {list(param.shape)}"
    return None


def check_optimizer(saved: Any, optimizer: Any, rel: Path | str, name: str = "optimizer") -> None:
    """CheckpointError when `saved` (a state dict) does not fit `optimizer`, a torch optimizer (any other object,
    e.g. a sharded learner's state, is left to its own `load_state_dict`)."""
    if not isinstance(optimizer, torch.optim.Optimizer):
        return
    why = _mismatch(saved, optimizer) if isinstance(saved, dict) else "not a mapping"
    if why is not None:
        raise CheckpointError(
            f"{rel}: the {name} state does not fit this model ({why}): a checkpoint of another model, or an edited "
            "one; resume from a checkpoint of this run, or start a new run"
        )
