"""`code1`: write a small Python function; checked by the `code_exec` reward against assert-style tests.

Twenty problems of one or two lines each (sums, strings, lists, digits). The answer is the JSON
`{"tests": [...]}` that `code_exec` runs. Every fourth problem (5 of 20) is held out, fixed, so train and
test never share a function.
"""

from __future__ import annotations

import json

from .example import Example
from .task import Task, normalize_split, sample_pool

# (function name, signature, what it must do, test expressions that must all be true, split on "; ")
PROBLEMS: list[tuple[str, str, str, str]] = [
    ("add", "add(a, b)", "returns the sum of a and b", "add(1, 2) == 3; add(-4, 4) == 0; add(10, 5) == 15"),
    ("square", "square(x)", "returns x squared", "square(3) == 9; square(-2) == 4; square(0) == 0"),
    (
        "is_even",
        "is_even(n)",
        "returns True if the integer n is even, else False",
        "is_even(4) is True; is_even(7) is False; is_even(0) is True",
    ),
    (
        "maximum",
        "maximum(xs)",
        "returns the largest number of the non-empty list xs",
        "maximum([3, 9, 2]) == 9; maximum([-5, -1]) == -1; maximum([4]) == 4",
    ),
    (
        "reverse_string",
        "reverse_string(s)",
        "returns the string s reversed",
        "reverse_string('abc') == 'cba'; reverse_string('') == ''; reverse_string('ab a') == 'a ba'",
    ),
    (
        "count_vowels",
        "count_vowels(s)",
        "returns how many characters of s are vowels (a, e, i, o, u, either case)",
        "count_vowels('hello') == 2; count_vowels('AEIxyz') == 3; count_vowels('') == 0",
    ),
    (
        "factorial",
        "factorial(n)",
        "returns n! for an integer n >= 0",
        "factorial(0) == 1; factorial(5) == 120; factorial(1) == 1",
    ),
    (
        "fibonacci",
        "fibonacci(n)",
        "returns the n-th Fibonacci number, with fibonacci(0) == 0 and fibonacci(1) == 1",
        "fibonacci(0) == 0; fibonacci(1) == 1; fibonacci(10) == 55",
    ),
    (
        "sum_list",
        "sum_list(xs)",
        "returns the sum of the numbers in the list xs (0 for an empty list)",
        "sum_list([1, 2, 3]) == 6; sum_list([]) == 0; sum_list([-1, 1, 5]) == 5",
    ),
    (
        "is_palindrome",
        "is_palindrome(s)",
        "returns True if the string s reads the same backwards, else False",
        "is_palindrome('racecar') is True; is_palindrome('ab') is False; is_palindrome('') is True",
    ),
    (
        "absolute",
        "absolute(x)",
        "returns the absolute value of the number x",
        "absolute(-3) == 3; absolute(2) == 2; absolute(0) == 0",
    ),
    (
        "first_char",
        "first_char(s)",
        "returns the first character of s, or '' when s is empty",
        "first_char('hello') == 'h'; first_char('') == ''; first_char('Z') == 'Z'",
    ),
    (
        "count_char",
        "count_char(s, c)",
        "returns how many times the character c occurs in the string s",
        "count_char('banana', 'a') == 3; count_char('abc', 'z') == 0; count_char('', 'a') == 0",
    ),
    (
        "to_fahrenheit",
        "to_fahrenheit(c)",
        "converts c degrees Celsius to Fahrenheit (c * 9 / 5 + 32)",
        "to_fahrenheit(0) == 32; to_fahrenheit(100) == 212; to_fahrenheit(-40) == -40",
    ),
    (
        "last_element",
        "last_element(xs)",
        "returns the last element of the list xs, or None when it is empty",
        "last_element([1, 2, 3]) == 3; last_element([]) is None; last_element(['a']) == 'a'",
    ),
    (
        "double_all",
        "double_all(xs)",
        "returns a new list with every number of xs doubled",
        "double_all([1, 2]) == [2, 4]; double_all([]) == []; double_all([-3]) == [-6]",
    ),
    (
        "min_of_three",
        "min_of_three(a, b, c)",
        "returns the smallest of the three numbers",
        "min_of_three(3, 1, 2) == 1; min_of_three(-1, 0, -5) == -5; min_of_three(4, 4, 4) == 4",
    ),
    (
        "word_count",
        "word_count(s)",
        "returns the number of whitespace-separated words in s",
        "word_count('a b  c') == 3; word_count('') == 0; word_count(' hi ') == 1",
    ),
    (
        "clamp",
        "clamp(x, lo, hi)",
        "returns x limited to the range [lo, hi]",
        "clamp(5, 0, 3) == 3; clamp(-1, 0, 3) == 0; clamp(2, 0, 3) == 2",
    ),
    (
        "digit_sum",
        "digit_sum(n)",
        "returns the sum of the decimal digits of the integer n >= 0",
        "digit_sum(123) == 6; digit_sum(0) == 0; digit_sum(909) == 18",
    ),
]
HELD_OUT_EVERY = 4


class CodeTask(Task):
    """Small Python functions checked by tests; `n=None` gives the whole split (15 train, 5 test)."""

    def __init__(self) -> None:
        self.name = "code1"
        self.description = "write a small Python function (20 problems, 5 held out); answer: code, run against tests"
        self.default_reward = "code_exec"

    def example(self, index: int) -> Example:
        """The example for problem `index` of PROBLEMS."""
        name, signature, what, exprs = PROBLEMS[index]
        tests = [f"assert {e}" for e in exprs.split("; ")]
        prompt = (
            f"Write a Python function `{signature}` that {what}. Answer with just the code in a ```python code block."
        )
        meta = {"task": self.name, "function": name}
        return Example(prompt=prompt, answer=json.dumps({"tests": tests}), meta=meta, id=f"{self.name}/{name}")

    def examples(self, split: str = "train", n: int | None = None, seed: int = 0) -> list[Example]:
        """Examples of `split`; `n=None` gives the whole split in a fixed order."""
        s = normalize_split(split)
        held_out = [i for i in range(len(PROBLEMS)) if i % HELD_OUT_EVERY == HELD_OUT_EVERY - 1]
        pool = held_out if s == "test" else [i for i in range(len(PROBLEMS)) if i not in held_out]
        return [self.example(i) for i in sample_pool(pool, n, seed, cycle=s == "train")]


CODE1 = CodeTask()
