"""Countdown: reach a target from 3-4 numbers with + - * / and parentheses, each number at most once.

Instances are generated from a seeded RNG by combining all the numbers into a random expression tree whose
intermediate values are positive integers, so every instance is solvable and carries a reference solution in
`meta["solution"]`. `answer` is the JSON `{"numbers": [...], "target": t}` the `countdown` reward checks
against. Train and test are disjoint: an instance belongs to the test split iff the hash of its sorted
numbers and target falls in a fixed 20% bucket, independent of the seed.
"""

from __future__ import annotations

import hashlib
import json
import random
from fractions import Fraction

from .example import Example
from .task import Task, normalize_split

DEFAULT_SIZES = {"train": 2000, "test": 200}
NUM_RANGE = (1, 25)
TARGET_RANGE = (1, 100)
TEST_BUCKETS = 5  # 1 in 5 instances is held out
MAX_TRIES_PER_EXAMPLE = 1000


def split_of(numbers: list[int], target: int) -> str:
    """The split an instance belongs to, from a stable hash of its sorted numbers and target."""
    key = json.dumps([sorted(numbers), target]).encode()
    return "test" if int(hashlib.sha256(key).hexdigest(), 16) % TEST_BUCKETS == 0 else "train"


Item = tuple[Fraction, str]  # (value, expression text)


def _combine(rng: random.Random, a: Item, b: Item) -> Item | None:
    """Combine two (value, expression) items with a random operator keeping values positive integers."""
    (va, ea), (vb, eb) = a, b
    op = rng.choice("+-*/")
    if op in "-/" and va < vb:
        (va, ea), (vb, eb) = (vb, eb), (va, ea)
    if op == "+":
        v = va + vb
    elif op == "-":
        v = va - vb
    elif op == "*":
        v = va * vb
    else:
        v = va / vb
    if v <= 0 or v.denominator != 1:
        return None
    return v, f"({ea} {op} {eb})"


def random_instance(rng: random.Random) -> tuple[list[int], int, str]:
    """One solvable instance: (numbers, target, reference solution using every number once)."""
    while True:
        numbers = [rng.randint(*NUM_RANGE) for _ in range(rng.choice((3, 4)))]
        items = [(Fraction(x), str(x)) for x in numbers]
        while len(items) > 1:
            i, j = rng.sample(range(len(items)), 2)
            merged = _combine(rng, items[i], items[j])
            if merged is None:
                break
            items = [it for k, it in enumerate(items) if k not in (i, j)] + [merged]
        if len(items) == 1 and TARGET_RANGE[0] <= items[0][0] <= TARGET_RANGE[1]:
            value, expr = items[0]
            return numbers, int(value), expr[1:-1]


class CountdownTask(Task):
    """Generated countdown instances; `n=None` gives 2000 train or 200 test examples."""

    def __init__(self) -> None:
        self.name = "countdown"
        self.description = "reach a target from 3-4 numbers using + - * /, each at most once; answer: an expression"
        self.default_reward = "countdown"

    def example(self, numbers: list[int], target: int, solution: str = "") -> Example:
        """The example for one instance."""
        prompt = (
            f"Using the numbers {numbers}, write an arithmetic expression that equals {target}. "
            "You may use +, -, *, / and parentheses, and each number at most once. "
            "Answer with just the expression."
        )
        answer = json.dumps({"numbers": numbers, "target": target})
        meta = {"task": self.name, "numbers": numbers, "target": target, "solution": solution}
        eid = f"countdown/{','.join(map(str, numbers))}->{target}"
        return Example(prompt=prompt, answer=answer, meta=meta, id=eid)

    def examples(self, split: str = "train", n: int | None = None, seed: int = 0) -> list[Example]:
        """`n` distinct instances of `split` generated from `seed` (deterministic)."""
        s = normalize_split(split)
        n = DEFAULT_SIZES[s] if n is None else n
        rng = random.Random(f"{self.name}:{s}:{seed}")
        out: list[Example] = []
        seen: set[str] = set()
        tries = 0
        while len(out) < n:
            tries += 1
            if tries > MAX_TRIES_PER_EXAMPLE * max(n, 1):
                raise RuntimeError(f"could not generate {n} distinct countdown {s} examples")
            numbers, target, solution = random_instance(rng)
            key = json.dumps([sorted(numbers), target])
            if split_of(numbers, target) != s or key in seen:
                continue
            seen.add(key)
            out.append(self.example(numbers, target, solution))
        return out


COUNTDOWN = CountdownTask()
