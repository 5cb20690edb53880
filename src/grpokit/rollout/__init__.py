"""Rollout engines behind one interface (see `base.py`)."""

from . import hf, sampler  # noqa: F401  (register the "hf-generate" and "hf" engines)
from .base import ENGINES, RolloutEngine, RolloutOutput, SamplingParams, make_engine, register_engine

__all__ = ["ENGINES", "RolloutEngine", "RolloutOutput", "SamplingParams", "make_engine", "register_engine"]
