"""`grpokit preflight`: measure the starting model on the training data before spending compute on RL.

It samples G completions for a seeded sample of training prompts with the recipe's rollout settings, scores
them with the run's rewards, and reports:

- per-prompt pass rates, and the expected fraction of zero-variance groups (no learning signal: all correct
  or all wrong) for several group sizes, from the binomial formula P(zv) = p^G + (1-p)^G averaged over
  prompts, with a recommended G;
- a difficulty-filtered JSONL of the sampled prompts that were neither always nor never solved;
- the model's token entropy at the sampling temperature (is it too peaked to explore?);
- completion lengths, truncation rate, and a recommended `rollout.max_new_tokens` / `algo.overlong_cache`;
- the estimated seconds per training step on this machine.

Pass rates are plug-in estimates from G samples, so with small G they are coarse (a prompt solved 4/4 counts
as p = 1 at every group size); sample more prompts or a larger G for sharper numbers.
"""

from __future__ import annotations

from ..common.lazy import lazy_exports

# imported on first use: `grpokit --help` imports this package and must not import torch through it
__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "command": ("cmd_preflight",),
        "estimates": (
            "CACHE_FRACTION",
            "GROUP_SIZES",
            "LENGTH_MARGIN",
            "LOW_ENTROPY_NATS",
            "NEAR_UNIFORM",
            "RELATIVE_LOW",
            "ZV_TARGET",
            "entropy_verdict",
            "histogram",
            "percentiles",
            "recommend_group_size",
            "recommend_length",
            "zero_variance",
        ),
        "measure": (
            "run_preflight",
            "write_outputs",
        ),
        "render": ("render",),
    },
)
__all__ = __dir__()  # the names of the table above, each listed once
