"""Rollout engines behind one interface (see `base.py`)."""

from . import hf  # noqa: F401  (registers the "hf" engine)
from .base import ENGINES, RolloutEngine, RolloutOutput, SamplingParams, make_engine, register_engine

__all__ = ["ENGINES", "RolloutEngine", "RolloutOutput", "SamplingParams", "make_engine", "register_engine"]
