"""grpokit — RL post-training of language models with the GRPO family, with training that explains itself.

The algorithm core lives in `grpokit.algos` (pure torch); the trainer, rollout engines, data and rewards build on it.
Every `§N` in grpokit's docstrings is a section of its math reference, docs/math.md.
"""

from .common.version import VERSION

__version__ = VERSION

__all__ = ["TrainResult", "train"]


def __getattr__(name: str) -> object:
    """`grpokit.train` and `grpokit.TrainResult`, imported on first use (importing grpokit stays light)."""
    if name in ("train", "TrainResult"):
        from . import api

        return getattr(api, name)
    raise AttributeError(f"module 'grpokit' has no attribute {name!r}")
