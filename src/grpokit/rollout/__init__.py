"""Rollout engines behind one interface (see `base.py`)."""

from . import hf, hf_generate  # noqa: F401  (register the "hf" and "hf-generate" engines)
from .base import ENGINES, RolloutEngine, RolloutOutput, SamplingParams, make_engine, register_engine

__all__ = ["ENGINES", "RolloutEngine", "RolloutOutput", "SamplingParams", "make_engine", "register_engine"]
