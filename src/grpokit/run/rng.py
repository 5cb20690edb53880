"""The random number generators' states (torch, CUDA, numpy, Python) as plain JSON data: lists of integers.

A checkpoint carries them (`trainer_state/optimizer.pt` for the whole run, `state.json` for each rank under
torchrun), and a checkpoint may come from elsewhere: reading it back must never run code. So the states are
written as numbers, not pickled objects, and `restore` checks their shape before setting anything (a
`ValueError` in one line otherwise):

    {"torch": [5056 ints 0..255], "cuda": [[ints], ...] or None,
     "numpy": ["MT19937", [624 ints], pos, has_gauss, cached_gaussian],
     "python": [version, [625 ints], gauss_next or None]}

`plain` turns the objects older grpokit versions stored (tensors, numpy arrays, tuples) into this form.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import torch

MT_WORDS = 624  # numpy's MT19937 key; Python's state has one more entry (the position)


def capture() -> dict[str, Any]:
    """This process's RNG states as plain data."""
    np_state = np.random.get_state()
    version, internal, gauss = random.getstate()
    return {
        "torch": torch.get_rng_state().tolist(),
        "cuda": [s.tolist() for s in torch.cuda.get_rng_state_all()] if torch.cuda.is_available() else None,
        "numpy": [str(np_state[0]), [int(x) for x in np_state[1]], *(_number(x) for x in np_state[2:])],
        "python": [version, list(internal), gauss],
    }


def _number(x: Any) -> int | float:
    return int(x) if isinstance(x, (int, np.integer)) else float(x)


def plain(state: Any) -> Any:
    """`state` with tensors and numpy arrays as lists and tuples as lists (the form older checkpoints used)."""
    if isinstance(state, torch.Tensor):
        return state.tolist()
    if isinstance(state, np.ndarray):
        return state.tolist()
    if isinstance(state, (np.integer, np.floating)):
        return state.item()
    if isinstance(state, dict):
        return {k: plain(v) for k, v in state.items()}
    if isinstance(state, (list, tuple)):
        return [plain(v) for v in state]
    return state


def _ints(value: Any, what: str, n: int | None = None, high: int = 2**32) -> list[int]:
    """`value` checked to be a list of `n` integers in [0, high)."""
    ok = isinstance(value, list) and all(isinstance(x, int) and not isinstance(x, bool) for x in value)
    if not ok or (n is not None and len(value) != n) or any(not 0 <= x < high for x in value):
        size = f"{n} " if n is not None else ""
        raise ValueError(f"the {what} RNG state is not a list of {size}integers in [0, {high})")
    return value


def _torch_state(value: Any, what: str = "torch") -> torch.Tensor:
    return torch.tensor(_ints(value, what, high=256), dtype=torch.uint8)


def _numpy_state(value: Any) -> tuple[Any, ...]:
    if not (isinstance(value, list) and len(value) == 5 and value[0] == "MT19937"):
        raise ValueError("the numpy RNG state is not ['MT19937', key, pos, has_gauss, cached_gaussian]")
    key = np.array(_ints(value[1], "numpy", MT_WORDS), dtype=np.uint32)
    pos, has_gauss, gauss = value[2:]
    if not (isinstance(pos, int) and isinstance(has_gauss, int) and isinstance(gauss, (int, float))):
        raise ValueError("the numpy RNG state's position and cached gaussian are not numbers")
    return ("MT19937", key, pos, has_gauss, float(gauss))


def _python_state(value: Any) -> tuple[Any, ...]:
    if not (isinstance(value, list) and len(value) == 3 and isinstance(value[0], int)):
        raise ValueError("the Python RNG state is not [version, internal state, gauss_next]")
    internal = tuple(_ints(value[1], "Python", MT_WORDS + 1, high=2**32 + 1))
    if value[2] is not None and not isinstance(value[2], (int, float)):
        raise ValueError("the Python RNG state's gauss_next is not a number")
    return (value[0], internal, value[2])


def check(state: Any) -> tuple[torch.Tensor, list[torch.Tensor] | None, tuple[Any, ...], tuple[Any, ...]]:
    """The states of `state` (plain data, see the module docstring) ready to set; ValueError naming what is
    wrong."""
    if not isinstance(state, dict) or not {"torch", "numpy", "python"} <= set(state):
        raise ValueError("the RNG state is not a mapping with torch, numpy and python states")
    cuda = state.get("cuda")
    if cuda is not None and not isinstance(cuda, list):
        raise ValueError("the CUDA RNG state is not a list of device states")
    cuda_states = None if cuda is None else [_torch_state(s, "CUDA") for s in cuda]
    return _torch_state(state["torch"]), cuda_states, _numpy_state(state["numpy"]), _python_state(state["python"])


def restore(state: Any) -> None:
    """Set this process's RNG states from `state` (checked first: nothing is set when it is malformed)."""
    torch_state, cuda_states, numpy_state, python_state = check(state)
    torch.set_rng_state(torch_state)
    np.random.set_state(numpy_state)
    random.setstate(python_state)
    if cuda_states is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(cuda_states)
