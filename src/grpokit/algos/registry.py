"""The algorithm core's registries (grpokit's one registry mechanism, `grpokit.common.registry`). A recipe composes
algorithms by name; nothing branches on method names.

Every registry has one fixed call signature: positional tensors, then keyword-only arguments. The keyword-only
arguments named in the registry's `inputs` are tensors the caller supplies (a mask, values, a generator); every
other keyword-only argument is a **declared hyper-parameter** of the component, with its default taken from the
component's paper (or `REQUIRED` when it has none). `Registry.params(name)` lists them; `AlgoConfig.bind` binds
them once from a recipe (see `algo_config.py`).
"""

from __future__ import annotations

from ..common.registry import REQUIRED, Param, Registry, declared_params

__all__ = [
    "ADVANTAGES",
    "AGGREGATIONS",
    "GROUP_FILTERS",
    "IS_CORRECTIONS",
    "KL_ESTIMATORS",
    "KL_PLACEMENTS",
    "POLICY_LOSSES",
    "REFERENCES",
    "REQUIRED",
    "Param",
    "Registry",
    "declared_params",
]

ADVANTAGES = Registry("advantage estimator", inputs=("valid", "mask", "values", "token_rewards"))
POLICY_LOSSES = Registry("policy loss", inputs=("generator",))
AGGREGATIONS = Registry("aggregation mode", inputs=("denominators",))
KL_ESTIMATORS = Registry("KL estimator")
IS_CORRECTIONS = Registry("importance-sampling correction")
REFERENCES = Registry("reference")  # the KL reference policy's strategies (reference.py)
KL_PLACEMENTS = Registry("KL placement")  # where the KL penalty enters the update (kl_placement.py)
GROUP_FILTERS = Registry("group filter")  # which sampled groups a step trains on (group_filter.py)
