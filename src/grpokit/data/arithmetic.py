"""Small arithmetic tasks over a finite set of operand pairs with a fixed held-out share."""

from __future__ import annotations

import json
import operator
import random
from collections.abc import Callable
from functools import cached_property

from .example import Example
from .task import Task, normalize_split, sample_pool

HOLDOUT_FRAC = 0.2
HOLDOUT_SEED = 20240607  # fixed: the train/test partition never depends on the caller's seed


class PairTask(Task):
    """`What is a <op> b?` for every (a, b) in a range; a fixed seeded 20% of the pairs is the test split.

    The partition is a function of the task alone, so train and test never share a pair whatever `seed`
    is passed to `examples`. Train sampling with `n` above the pool size cycles through reshuffled copies;
    test is capped at its pool size.
    """

    def __init__(
        self, name: str, description: str, symbol: str, op: Callable[[int, int], int], lo: int, hi: int
    ) -> None:
        self.name = name
        self.description = description
        self.default_reward = "exact_numeric"
        self.symbol = symbol
        self.op = op
        self.lo, self.hi = lo, hi

    @cached_property
    def _splits(self) -> dict[str, list[tuple[int, int]]]:
        pairs = [(a, b) for a in range(self.lo, self.hi + 1) for b in range(self.lo, self.hi + 1)]
        random.Random(f"{self.name}:{HOLDOUT_SEED}").shuffle(pairs)
        k = round(len(pairs) * HOLDOUT_FRAC)
        return {"test": sorted(pairs[:k]), "train": sorted(pairs[k:])}

    def example(self, a: int, b: int) -> Example:
        """The example for one operand pair."""
        prompt = f"What is {a} {self.symbol} {b}? Answer with just the number."
        meta = {"task": self.name, "a": a, "b": b}
        eid = f"{self.name}/{a}{self.symbol}{b}"
        return Example(prompt=prompt, answer=str(self.op(a, b)), meta=meta, id=eid)

    def examples(self, split: str = "train", n: int | None = None, seed: int = 0) -> list[Example]:
        """Examples of `split`; `n=None` gives the whole split in a fixed order."""
        s = normalize_split(split)
        pairs = sample_pool(self._splits[s], n, seed, cycle=s == "train")
        return [self.example(a, b) for a, b in pairs]


ADD1 = PairTask("add1", "single-digit addition (0-9 + 0-9); answer: a number", "+", operator.add, 0, 9)
ADD2 = PairTask("add2", "two-digit addition (10-99 + 10-99); answer: a number", "+", operator.add, 10, 99)
MUL1 = PairTask("mul1", "single-digit multiplication (0-9 * 0-9); answer: a number", "*", operator.mul, 0, 9)


class ToolPairTask(PairTask):
    """A `PairTask` to be solved with tools: each prompt brings worked demonstrations of a calculator call (for each:
    question, call, result, answer) before its own question. SmolLM2-135M-Instruct, shown the tool alone, tries a
    call in 2-8% of its answers; with one demonstration in ~10%, with three in ~75% (docs/agents.md, "The
    showcase")."""

    tools = ("calculator",)
    demos = ((21, 47), (35, 18), (62, 29))

    def example(self, a: int, b: int) -> Example:
        ex = super().example(a, b)
        messages: list[dict[str, str]] = []
        for da, db in self.demos:
            args = {"name": "calculator", "arguments": {"expression": f"{da} {self.symbol} {db}"}}
            result = str(self.op(da, db))
            messages += [
                {"role": "user", "content": f"What is {da} {self.symbol} {db}? Answer with just the number."},
                {"role": "assistant", "content": f"<tool_call>{json.dumps(args)}</tool_call>"},
                {"role": "tool", "name": "calculator", "content": result},
                {"role": "assistant", "content": result},
            ]
        ex.messages = [*messages, {"role": "user", "content": ex.prompt}]
        return ex


ADD2_TOOL = ToolPairTask(
    "add2-tool",
    "two-digit addition with a calculator tool (multi-turn; one worked call in each prompt); answer: a number",
    "+",
    operator.add,
    10,
    99,
)
