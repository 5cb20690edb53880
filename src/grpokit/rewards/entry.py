"""One reward of a `RewardManager` (its name, spec, weight, function and where it runs), and the failure kind a
reward call's exception records."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from ..common.safe_text import safe_text
from .conventions import AUTO, describe
from .isolation import RewardCallError, RewardCallLimit, RewardCallTimeout
from .reward_model import RewardModel
from .signature import AdaptedReward
from .worker import WorkerSpec, load_reward_spec

# the failure kind (of FAILURE_KINDS) a reward call's exception records, first match in this order
CALL_FAILURE_KINDS: dict[type[Exception], str] = {
    RewardCallTimeout: "timeout",
    RewardCallLimit: "sandbox",
    RewardCallError: "exception",
}
CALL_FAILURES = tuple(CALL_FAILURE_KINDS)


@dataclass
class RewardEntry:
    """One (reward, weight) of a manager: what its metrics call it, its spec, its function, and where it runs."""

    name: str  # key in per_reward and metrics: the built-in name, or the function name of a user spec
    spec: str
    weight: float
    fn: AdaptedReward | RewardModel | None  # None: a spec only the worker imports (see `in_worker`)
    isolated: bool
    convention: str = ""  # a row of conventions.CONVENTIONS, from the declaration (the worker reports its specs')
    declared: str = AUTO  # reward.convention: the convention the user named for it, or auto

    def describe(self, worker: str) -> str:
        """`name: what it is, its weight, where it runs` for the manager's start lines."""
        where = worker if self.isolated else "in-process"
        what = describe(self.convention)
        if isinstance(self.fn, RewardModel):
            what, where = f"reward model ({self.fn.architecture})", f"in-process on {self.fn.device}"
        return f"{self.name}: {what}, weight {self.weight:g}, {where}"

    @property
    def in_worker(self) -> str | WorkerSpec | None:
        """The spec the worker imports and inspects itself, never the trainer (with the convention the user named
        for it); None for a function given."""
        if self.fn is not None:
            return None
        if self.declared == AUTO:
            return self.spec
        return WorkerSpec(self.spec, functools.partial(load_reward_spec, convention=self.declared))


def failure_kind(e: Exception) -> str:
    """The failure kind of a reward call that raised `e` (one of `CALL_FAILURES`): timeout, sandbox or exception."""
    return next(kind for cls, kind in CALL_FAILURE_KINDS.items() if isinstance(e, cls))


def failure_reason(kind: str, message: str) -> str:
    """`kind: message` for a log line, the message (a user library's text) escaped and cut, so that a handler of the
    library user's own, not only the CLI's filter, gets no terminal escape and no megabyte line."""
    return f"{kind}: {safe_text(message, limit=500)}"
