"""What scoring a batch returns: combined rewards, per-reward values, failures and metrics."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from ..common.errors import GrpokitError
from ..common.safe_text import safe_text

FAILURE_KINDS = ("exception", "nan", "wrong_count", "timeout", "sandbox")
COMPLETION_CHARS = 200
MESSAGE_CHARS = 2000  # a reward's exception message past this keeps its head and tail (a 20 MB one is not stored)


@dataclass
class RewardFailure:
    """One sample one reward could not score. `kind` is one of FAILURE_KINDS: "nan" covers +-inf and values
    beyond the manager's `max_abs_value`; "sandbox" is a reward stopped by a sandbox limit (the message names it).
    A sample no reward applies to (every reward returned None) is no failure: see `RewardResult.not_applicable`.

    The completion and the message are the policy's and the reward's text, not grpokit's: they are stored made safe
    (`common.safe_text`: control characters escaped, so printing a record never writes a terminal sequence) and
    bounded (a completion to about `COMPLETION_CHARS`, a message to `MESSAGE_CHARS`, its head and tail)."""

    reward: str
    index: int
    completion: str  # its first 200 characters (the manager cuts it), control characters escaped
    kind: str
    message: str  # one line, at most MESSAGE_CHARS

    def __post_init__(self) -> None:
        self.reward = safe_text(self.reward, limit=200)
        self.completion = safe_text(self.completion, limit=2 * COMPLETION_CHARS, multiline=True)
        self.message = safe_text(self.message, limit=MESSAGE_CHARS)


@dataclass
class RewardResult:
    """Scores of one batch. Samples with any failed reward get `rewards[i] = nan` (excluded from training).
    `not_applicable` lists the samples no reward applies to (every reward returned None): not failures; their
    reward is the manager's `not_applicable` policy's (0, or NaN to leave them out).

    `per_reward[name]` holds the unweighted values (NaN where that reward failed or returned None, "not
    applicable"); `accuracy` is the correctness reward's values (NaN where it failed or did not apply).
    """

    rewards: list[float]
    accuracy: list[float]
    per_reward: dict[str, list[float]]
    failures: list[RewardFailure] = field(default_factory=list)
    metrics: dict[str, float] = field(default_factory=dict)
    not_applicable: list[int] = field(default_factory=list)


class RewardFailureError(GrpokitError, RuntimeError):
    """Too many samples of a batch could not be scored; `failures` holds what was found."""

    def __init__(self, message: str, failures: list[RewardFailure]) -> None:
        super().__init__(message)
        self.failures = failures


def failure_error(
    rewards: list[str], failures: list[RewardFailure], n: int, max_fail_frac: float, complete: bool = True
) -> RewardFailureError:
    """The error for failures on more than `max_fail_frac` of `n` samples, with an example and the fixes."""
    failed = len({f.index for f in failures})
    kinds = Counter(f.kind for f in failures)
    first = failures[0]
    names = ", ".join(repr(r) for r in rewards)
    count = f"{failed} of {n}" if complete else f"at least {failed} of {n}"
    slow = " (or --set reward.timeout_s=<seconds> if it is only slow)" if kinds["timeout"] else ""
    message = (
        f"reward {names} failed on {count} samples, more than reward.max_fail_frac={max_fail_frac:g}: "
        f"{', '.join(f'{c} {k}' for k, c in kinds.most_common())}. "
        f"First: sample {first.index} ({first.kind}) {safe_text(first.message, limit=MESSAGE_CHARS)}; "
        f"completion: {first.completion[:120]!r}. "
        f"Fix the reward function{slow}, or tolerate more failed samples with "
        f"--set reward.max_fail_frac=<0..1>."
    )
    return RewardFailureError(message, failures)
