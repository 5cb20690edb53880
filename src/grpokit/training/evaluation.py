"""Held-out evaluation: accuracy, length and truncation of samples at `rollout.eval_temperature`, shared by
training (before, every `train.eval_every` steps, after) and `grpokit eval`."""

from __future__ import annotations

import types

import torch

from .. import metric_names as mn
from .phases.scoring import completion_id_lists, prompt_id_lists
from .session import Session
from .timer import clock

EVAL_SEED_STRIDE = 7919  # Trainer.evaluate seeds step s's evaluation with train.seed + 7919 * (s + 1)


@torch.no_grad()
def evaluate(session: Session, n_samples: int = 1, *, seed: int = 0, step: int | None = None) -> dict[str, float]:
    """Sample `n_samples` completions per held-out prompt and score them with the run's rewards.

    Sampling draws from its own RNG stream seeded by `seed` and restores the global one afterwards, so
    evaluating never changes a training trajectory. TRL-style rewards get `trainer_state` (global_step,
    max_steps) here too, as TRL passes its state in evaluation: `step`, or else the step the seed was drawn for
    (`train.seed + EVAL_SEED_STRIDE * (step + 1)`, Trainer.evaluate's convention; `grpokit eval` is step 0).
    """
    if not session.data.held_out_tokens:
        return {}
    t0 = clock()
    with torch.random.fork_rng(devices=rng_devices()):
        torch.manual_seed(seed)
        out = session.engine.generate(
            session.data.held_out_tokens,
            session.sampling_params(n=n_samples, temperature=session.cfg.rollout.eval_temperature),
        )
    examples = [session.data.held_out[int(i)] for i in out.prompt_index]
    if step is None:
        step = max(0, (seed - session.cfg.train.seed) // EVAL_SEED_STRIDE - 1)
    state = types.SimpleNamespace(global_step=step, max_steps=session.cfg.train.steps)
    res = session.rewards.score(
        out.texts,
        examples,
        completion_ids=completion_id_lists(out),
        trainer_state=state,
        prompt_ids=prompt_id_lists(out),  # as in training: a scorer given the prompt sees the same text
        episodes=out.episodes,
    )
    acc = torch.tensor(res.accuracy, dtype=torch.float64).nan_to_num(0.0)
    return {
        **pass_at_k(out.prompt_index, acc >= 0.5),
        mn.EVAL_ACCURACY: float(acc.mean()),
        mn.EVAL_LENGTH: float(out.lengths.double().mean()),
        mn.EVAL_TRUNCATION_RATE: float(out.truncated.double().mean()),
        mn.EVAL_N: float(len(out.texts)),
        mn.TIME_EVAL: clock() - t0,
    }


def rng_devices() -> list[int]:
    """The CUDA devices whose generators evaluation forks and restores: the current one where CUDA is in use
    (`torch.manual_seed` reseeds it too, so leaving it out would let evaluating change the run), none on CPU."""
    return [torch.cuda.current_device()] if torch.cuda.is_initialized() else []


def pass_at_k(prompt_index: torch.Tensor, correct: torch.Tensor) -> dict[str, float]:
    """`eval/pass@k` for k = 1, 2, 4, ... up to the samples per prompt (when there are several): the unbiased
    estimator of Chen et al. (2021), pass@k = mean over prompts of 1 - C(n - c, k) / C(n, k), for a prompt's n
    samples of which c are correct."""
    from math import comb

    counts: dict[int, list[int]] = {}
    for i, ok in zip(prompt_index.tolist(), correct.tolist()):
        counts.setdefault(int(i), []).append(int(ok))
    n = min((len(v) for v in counts.values()), default=0)
    out: dict[str, float] = {}
    k = 1
    while n > 1 and k <= n:
        vals = [1.0 - comb(len(v) - sum(v), k) / comb(len(v), k) for v in counts.values()]
        out[f"{mn.EVAL_PASS_AT}{k}"] = sum(vals) / len(vals)
        k *= 2
    return out
