"""What a sample no reward applies to gets: `reward.not_applicable`, one of `NOT_APPLICABLE`.

A reward returns None for a sample it does not apply to (TRL's convention: a math verifier given a code task). The
sample is left out of that reward's weighted sum; when *every* reward returned None, no reward applies to it. That
is not a failure (nothing broke, `reward.max_fail_frac` does not count it): it is counted in `reward/na_frac`.

- `zero` (default): the sample's reward is 0. TRL's GRPOTrainer does this: it sums the weighted rewards with
  `nansum` (None -> NaN -> 0) and warns "All reward functions returned None for the following kwargs".
- `exclude`: the sample's reward is NaN, so it is left out of the advantages and the loss like a failed sample
  (the advantage code skips NaN rewards; docs/math.md §3), but it is not reported as a failure.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

from .. import metric_names as mn
from ..common.registry import Registry

log = logging.getLogger("grpokit.rewards.manager")  # the manager's log: one place to silence reward noise


@dataclass(frozen=True)
class NotApplicable:
    """One policy for samples no reward applies to: the reward they get, and what that means for training."""

    value: float
    description: str

    @property
    def trains(self) -> bool:
        """Whether such a sample stays in the batch (a finite reward) or is left out (NaN)."""
        return math.isfinite(self.value)


NOT_APPLICABLE = Registry.of(
    "not-applicable policy",
    {
        "zero": NotApplicable(0.0, "the sample's reward is 0, as TRL's GRPOTrainer scores it (nansum over rewards)"),
        "exclude": NotApplicable(math.nan, "the sample's reward is NaN: left out of the advantages and the loss"),
    },
)


def not_applicable_policy(name: str) -> NotApplicable:
    """The policy `name`; ValueError naming `reward.not_applicable`, the value and the choices otherwise."""
    if name not in NOT_APPLICABLE:
        choices = "; ".join(f"{n} ({p.description})" for n, p in NOT_APPLICABLE.items())
        raise ValueError(f"reward.not_applicable={name!r} is invalid: use {choices}")
    return NOT_APPLICABLE[name]


class NotApplicableCount:
    """A manager's policy for samples no reward applies to, and their count over every batch it scored: the first
    batch that has any logs one warning with the count (later ones a debug line), closing logs the total."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.policy = not_applicable_policy(name)
        self.samples = 0

    def record(self, na: list[int], n: int, completions: list[str]) -> None:
        """Count the batch's not-applicable samples `na` (of `n`); warn the first time, once per run."""
        first = not self.samples
        self.samples += len(na)
        log.log(
            logging.WARNING if first else logging.DEBUG,
            "%d of %d samples: no reward applies (every reward returned None), e.g. sample %d %r; %s "
            "(reward.not_applicable=%s), counted in %s, not as failures%s",
            len(na),
            n,
            na[0],
            completions[na[0]][:80],
            "scored 0 (as TRL does)" if self.policy.trains else "left out of training",
            self.name,
            mn.REWARD_NA_FRAC,
            "; this warning is shown once, the total is logged when the rewards close" if first else "",
        )

    def close(self) -> None:
        """Log the total once, and start counting afresh."""
        if self.samples:
            log.info("%d sample(s) in all had no applicable reward (%s)", self.samples, mn.REWARD_NA_FRAC)
        self.samples = 0
