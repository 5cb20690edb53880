"""grpokit — RL post-training of language models with the GRPO family, with training that explains itself.

The algorithm core lives in `grpokit.algos` (pure torch); the trainer, rollout engines, data and rewards build on it.
"""

__version__ = "0.1.0"
