"""A reward constant over a whole batch of different completions: worth a warning.

A reward that gives every completion of a batch the same value, when the completions differ, teaches nothing that
batch (every group's advantage is 0) and often means the reward cannot see what it should: a verl scorer that cuts
the response at `Assistant:` in a solution_str that holds no prompt (TinyZero's countdown, which then scores every
right answer 0), a TRL multi-turn reward given only the last message. Every such batch is counted
(`reward/<name>_constant`: 1 on such a batch, 0 otherwise) and closing the manager logs the totals.

The warning (one per reward, with what the reward returned and the likely causes) is kept for a reward that has
never told two completions apart in this run. A reward that gave different values before does see what it scores:
a batch it now scores all alike is the policy's state, not the reward's blindness. At its highest value, every
completion right, that is saturation (the task learned, the demo's batch at step 10, a run whose held-out accuracy
rises); at its lowest, a collapse. The doctor's detectors explain both (advantage collapse, saturation), so this
module only counts them.
"""

from __future__ import annotations

import logging
import math

from .. import metric_names as mn

log = logging.getLogger("grpokit.rewards.manager")  # the manager's log: one place to silence reward noise
MIN_DISTINCT = 2  # different completions (among those the reward scored) for a constant value to be telling


def constant_value(values: list[float], completions: list[str]) -> float | None:
    """The value a reward gave every completion it scored, when it scored at least `MIN_DISTINCT` different ones
    and gave them all the same; None otherwise (NaN values, failed or not applicable, are left out)."""
    scored = [(v, c) for v, c in zip(values, completions) if math.isfinite(v)]
    if len({c for _, c in scored}) < MIN_DISTINCT or len({v for v, _ in scored}) != 1:
        return None
    return scored[0][0]


def metric(name: str) -> str:
    """The metric counting reward `name`'s constant batches (1 on such a batch)."""
    return f"{mn.REWARD_PREFIX}{name}_constant"


def prompt_hint(changed: int) -> str:
    """What the constant-reward warning adds when a verl scorer scored `changed` completions differently once given
    the prompt + response (0: nothing)."""
    if not changed:
        return ""
    return (
        f": given the prompt + response as solution_str (as TinyZero and verl before its reward-manager change pass "
        f"it), it scores {changed} of them differently: set reward.verl_solution_str=prompt+response"
    )


class ConstantCount:
    """Each reward's constant batches over everything a manager scored (see the module docstring)."""

    def __init__(self) -> None:
        self.batches: dict[str, int] = {}
        self.values: dict[str, float] = {}  # a reward's one value so far, while it has given only one
        self.varied: set[str] = set()  # rewards seen to give two different values in this run

    def seen(self, name: str, values: list[float]) -> None:
        """Note the finite values reward `name` gave a batch (whether it has ever told completions apart)."""
        if name in self.varied:
            return
        distinct = {v for v in values if math.isfinite(v)}
        if name in self.values:
            distinct.add(self.values[name])
        if len(distinct) > 1:
            self.varied.add(name)
            self.values.pop(name, None)
        elif distinct:
            self.values[name] = distinct.pop()

    def record(self, name: str, value: float, n: int, hint: str = "") -> None:
        """Count reward `name`'s constant batch of `n` completions; warn the first time for that reward, unless it
        has told completions apart before in this run (module docstring)."""
        first = name not in self.batches
        self.batches[name] = self.batches.get(name, 0) + 1
        blind = name not in self.varied
        log.log(
            logging.WARNING if first and blind else logging.DEBUG,
            "reward %s gave all %d completions of this batch, which differ, the same value %g, and has told no two "
            "apart yet, so the batch teaches nothing through it. If the model really does as well on every one, "
            "the task is too hard or too easy for it (grpokit preflight measures that); if not, the reward does "
            "not see what it scores%s; counted in %s%s",
            name,
            n,
            value,
            hint
            or " (a verl scorer that cuts at 'Assistant:' needs reward.verl_solution_str=prompt+response; a reward "
            "of a multi-turn run may read only the last message)",
            metric(name),
            "; this warning is shown once per reward, the total is logged when the rewards close" if first else "",
        )

    def close(self) -> None:
        """Log the totals once, and start counting afresh."""
        for name, k in self.batches.items():
            log.info("reward %s was constant over %d batch(es) of different completions (%s)", name, k, metric(name))
        self.batches = {}
