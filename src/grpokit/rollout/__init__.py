"""Rollout engines behind one interface (see `base.py`)."""

from . import hf, hf_generate, vllm  # noqa: F401  (register the "hf", "hf-generate" and "vllm" engines)
from .base import (
    ENGINES,
    RolloutEngine,
    RolloutOutput,
    SamplingParams,
    build_engine,
    check_engine,
    make_engine,
)

__all__ = [
    "ENGINES",
    "RolloutEngine",
    "RolloutOutput",
    "SamplingParams",
    "build_engine",
    "check_engine",
    "make_engine",
]
