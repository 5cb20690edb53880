"""Held-out evaluation: accuracy, length and truncation of samples at `rollout.eval_temperature`, shared by
training (before, every `train.eval_every` steps, after) and `grpokit eval`."""

from __future__ import annotations

import time

import torch

from . import metric_names as mn
from .phases.scoring import completion_id_lists
from .session import Session


@torch.no_grad()
def evaluate(session: Session, n_samples: int = 1, *, seed: int = 0) -> dict[str, float]:
    """Sample `n_samples` completions per held-out prompt and score them with the run's rewards.

    Sampling draws from its own RNG stream seeded by `seed` and restores the global one afterwards, so
    evaluating never changes a training trajectory.
    """
    if not session.data.held_out_tokens:
        return {}
    t0 = time.perf_counter()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        out = session.engine.generate(
            session.data.held_out_tokens,
            session.sampling_params(n=n_samples, temperature=session.cfg.rollout.eval_temperature),
        )
    examples = [session.data.held_out[int(i)] for i in out.prompt_index]
    res = session.rewards.score(out.texts, examples, completion_ids=completion_id_lists(out))
    acc = torch.tensor(res.accuracy, dtype=torch.float64).nan_to_num(0.0)
    return {
        mn.EVAL_ACCURACY: float(acc.mean()),
        mn.EVAL_LENGTH: float(out.lengths.double().mean()),
        mn.EVAL_TRUNCATION_RATE: float(out.truncated.double().mean()),
        mn.EVAL_N: float(len(out.texts)),
        mn.TIME_EVAL: time.perf_counter() - t0,
    }
