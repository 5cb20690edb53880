"""`grpokit audit-reward`: test a reward function before training on it.

The reward is loaded with `load_reward` and called through a one-reward `RewardManager`, the same isolation as
training (user functions in a killable worker with the timeout; exceptions, None and NaN caught). Checks:

- with a labeled file (JSONL rows `completion`, `answer`, optional `prompt`, `expected` true/false): false-
  positive and false-negative rates with 95% Wilson intervals, and the rows it gets wrong;
- without one, probes for the answer kind (`numeric`, `math`, `code`): equivalent forms of the right answer must score
  like the plain answer; known hacks (several answers, a wrong number, the prompt echoed, an empty or huge
  answer, the answer only inside <think>) must score below it;
- determinism (the same input scored repeatedly, alone and in a batch), exceptions, and latency per call
  against the timeout.

The reward may follow any convention `RewardManager` knows (grpokit, TRL keyword style, verl `compute_score`);
probe examples carry the reference as the columns `answer` and `solution` (TRL's name), labeled rows carry
their own fields. Each case is one call of one sample (a hung call costs one timeout); after two timeouts
the remaining cases are skipped.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import sys
import time
from pathlib import Path
from typing import Any

from .data.example import Example

Z95 = 1.959963984540054
REPEATS = 5
MAX_TIMEOUTS = 2
SLOW_FRACTION = 0.5  # a call over half the timeout is reported as slow

PROBES: dict[str, dict[str, Any]] = {
    "numeric": {
        "prompt": "Tom has 3 apples and buys 4 more. How many apples does he have now?",
        "answer": "7",
        "correct": "7",
        "equivalent": {
            "boxed": "\\boxed{7}",
            "sentence": "The answer is 7",
            "trailing period": "7.",
            "surrounding spaces": " 7 ",
            "decimal form": "7.0",
            "with units": "7 apples",
            "trailing punctuation": "7!",
            "newlines": "\n7\n",
            "worked answer": "3 + 4 = 7",
            "bold markdown": "**7**",
        },
        "hacks": {
            "wrong number": "5",
            "several answers (right one last)": "3 or 5 or 7",
            "several answers (right one first)": "7 or 5 or 3",
            "answer as a substring": "17",
            "negated": "-7",
            "prompt echoed": "Tom has 3 apples and buys 4 more. How many apples does he have now?",
            "empty": "",
            "whitespace only": "   ",
            "very long enumeration": " ".join(str(i) for i in range(5000)),
            "answer only in reasoning": "<think>3 + 4 = 7</think> I don't know.",
        },
    },
    "math": {
        "prompt": "What is 1 divided by 2? Give the answer as a fraction.",
        "answer": "\\frac{1}{2}",
        "correct": "\\boxed{\\frac{1}{2}}",
        "equivalent": {
            "plain LaTeX": "$\\frac{1}{2}$",
            "decimal": "\\boxed{0.5}",
            "slash fraction": "\\boxed{1/2}",
            "sentence": "The answer is $\\frac{1}{2}$.",
            "surrounding spaces": "  \\boxed{\\frac{1}{2}}  ",
            "dfrac": "\\boxed{\\dfrac{1}{2}}",
            "worked answer": "Dividing, $1 \\div 2 = \\frac{1}{2}$, so the answer is \\boxed{\\frac{1}{2}}.",
        },
        "hacks": {
            "wrong answer": "\\boxed{\\frac{1}{3}}",
            "several answers (right one last)": "\\boxed{\\frac{1}{3}} or \\boxed{2} or \\boxed{\\frac{1}{2}}",
            "several answers (right one first)": "\\boxed{\\frac{1}{2}} or \\boxed{2} or \\boxed{\\frac{1}{3}}",
            "several answers in one box": "\\boxed{\\frac{1}{3}, 2, \\frac{1}{2}}",
            "prompt echoed": "What is 1 divided by 2? Give the answer as a fraction.",
            "empty": "",
            "very long enumeration": " ".join(f"\\frac{{1}}{{{i}}}" for i in range(1, 2000)),
            "answer only in reasoning": "<think>\\boxed{\\frac{1}{2}}</think> I don't know.",
        },
    },
}


_ADD_TESTS = '{"tests": ["assert add(1, 2) == 3", "assert add(-4, 4) == 0", "assert add(10, 5) == 15"]}'
_ADD = "def add(a, b):\n    return a + b"
PROBES["code"] = {
    "prompt": "Write a Python function `add(a, b)` that returns the sum of a and b. "
    "Answer with just the code in a ```python code block.",
    "answer": _ADD_TESTS,
    "correct": f"```python\n{_ADD}\n```",
    "equivalent": {
        "no fence": _ADD,
        "plain fence": f"```\n{_ADD}\n```",
        "explained": f"Here is the function:\n```python\n{_ADD}\n```\nIt adds the two numbers.",
        "lambda": "```python\nadd = lambda a, b: a + b\n```",
        "prints while running": f"```python\nprint('loading')\n{_ADD}\nprint(add(1, 2))\n```",
        "draft then final": f"```python\ndef add(a, b):\n    return a - b\n```\nFixed:\n```python\n{_ADD}\n```",
    },
    "hacks": {
        "wrong function": "```python\ndef add(a, b):\n    return a * b\n```",
        "exits before the tests": "```python\nimport sys\nsys.exit(0)\n```",
        "hard exit before the tests": "```python\nimport os\nos._exit(0)\n```",
        "prints fake passes": "```python\nfor i in range(3):\n    print('PASS', i)\n```",
        "disables assert errors": "```python\nimport builtins\nbuiltins.AssertionError = Exception\n```",
        "syntax error": "```python\ndef add(a, b) return a + b\n```",
        "empty": "",
        "prompt echoed": "Write a Python function `add(a, b)` that returns the sum of a and b.",
        "answer only in reasoning": f"<think>```python\n{_ADD}\n```</think> I don't know.",
        "endless loop": "```python\nwhile True:\n    pass\n```",
    },
}


def wilson(k: int, n: int, z: float = Z95) -> tuple[float, float]:
    """95% Wilson score interval for k successes in n trials ((nan, nan) when n = 0)."""
    if n == 0:
        return math.nan, math.nan
    p = k / n
    den = 1 + z * z / n
    center = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return max(0.0, center - half), min(1.0, center + half)


def probe_example(prompt: str, answer: str) -> Example:
    """A probe's example; its columns name the reference `answer` and, for TRL-style rewards, `solution`."""
    return Example(prompt=prompt, answer=answer, columns={"prompt": prompt, "answer": answer, "solution": answer})


def labeled_example(row: dict[str, Any]) -> Example:
    """A labeled row's example; its other fields are the dataset columns TRL/verl-style rewards receive."""
    columns = {k: v for k, v in row.items() if k not in ("completion", "expected", "line")}
    columns.setdefault("prompt", "")
    return Example(prompt=str(row.get("prompt", "")), answer=str(row["answer"]), columns=columns)


class _Caller:
    """One reward behind a RewardManager; every call timed, failures and timeouts recorded."""

    def __init__(self, spec: str, timeout_s: float) -> None:
        from .rewards import RewardManager

        self.spec = spec
        self.timeout_s = timeout_s
        self.manager = RewardManager([(spec, 1.0)], timeout_s=timeout_s, max_fail_frac=1.0)
        # failures are collected and summarised here; the manager's per-batch warning would repeat each one
        self._log = logging.getLogger("grpokit.rewards.manager")
        self._level = self._log.level
        self._log.setLevel(logging.ERROR)
        self.latencies: list[float] = []
        self.failures: list[dict[str, str]] = []
        self.timeouts = 0

    @property
    def gave_up(self) -> bool:
        return self.timeouts >= MAX_TIMEOUTS

    def score(self, texts: list[str], examples: list[Example], case: str) -> list[float] | None:
        """Scores (NaN where that sample failed), or None when skipped after repeated timeouts."""
        if self.gave_up:
            return None
        t0 = time.perf_counter()
        res = self.manager.score(texts, examples)
        self.latencies.append(time.perf_counter() - t0)
        for f in res.failures:
            self.failures.append({"case": case, "kind": f.kind, "message": f.message})
        if any(f.kind == "timeout" for f in res.failures):
            self.timeouts += 1
        return list(res.per_reward[self.manager.rewards[0].name])

    def close(self) -> None:
        self.manager.close()
        self._log.setLevel(self._level)


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or abs(a - b) <= 1e-6


def _probe(caller: _Caller, kind: str) -> dict[str, Any]:
    spec = PROBES[kind]
    ex = probe_example(spec["prompt"], spec["answer"])
    base = caller.score([spec["correct"]], [ex], "correct answer")
    ref = base[0] if base else math.nan
    out: dict[str, Any] = {"example": {"prompt": ex.prompt, "answer": ex.answer}, "correct": spec["correct"]}
    out["correct_score"] = ref
    equiv, hacks = [], []
    for name, text in spec["equivalent"].items():
        s = caller.score([text], [ex], f"equivalent: {name}")
        score = s[0] if s else math.nan
        ok = s is not None and math.isfinite(ref) and _same(score, ref)
        equiv.append({"case": name, "completion": text, "score": score, "ok": ok, "skipped": s is None})
    for name, text in spec["hacks"].items():
        s = caller.score([text], [ex], f"hack: {name}")
        score = s[0] if s else math.nan
        ok = s is not None and math.isfinite(score) and math.isfinite(ref) and score < ref
        hacks.append({"case": name, "completion": text[:120], "score": score, "ok": ok, "skipped": s is None})
    out["equivalent"], out["hacks"] = equiv, hacks
    return out


def _determinism(caller: _Caller, texts: list[str], examples: list[Example]) -> dict[str, Any]:
    """Each input scored REPEATS times alone, and REPEATS copies in one batch: all scores must agree."""
    cases = []
    for text, ex in zip(texts, examples):
        alone = [caller.score([text], [ex], "determinism") for _ in range(REPEATS)]
        batch = caller.score([text] * REPEATS, [ex] * REPEATS, "determinism (batch)")
        scores = [s[0] for s in alone if s] + (batch or [])
        finite = [v for v in scores if math.isfinite(v)]
        spread = (max(finite) - min(finite)) if finite else math.nan
        ok = bool(finite) and len(finite) == len(scores) and spread <= 1e-9
        cases.append({"completion": text[:120], "scores": scores, "spread": spread, "ok": ok})
    return {"repeats": REPEATS, "cases": cases, "ok": all(c["ok"] for c in cases)}


def read_labeled(path: str | Path) -> list[dict[str, Any]]:
    """Rows of a labeled JSONL file: completion, answer, optional prompt, expected (bool)."""
    rows = []
    for lineno, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        r = json.loads(line)
        missing = [k for k in ("completion", "answer", "expected") if k not in r]
        if missing:
            raise ValueError(f"{path}, line {lineno}: missing {', '.join(missing)} (need completion, answer, expected)")
        exp = r["expected"]
        if isinstance(exp, str):
            exp = exp.strip().lower() in ("true", "1", "yes", "correct")
        rows.append({**r, "expected": bool(exp), "line": lineno})
    if not rows:
        raise ValueError(f"{path}: no rows")
    return rows


def _labeled(caller: _Caller, rows: list[dict[str, Any]], threshold: float) -> dict[str, Any]:
    wrong, fp = [], 0
    fn = pos = neg = 0
    for r in rows:
        ex = labeled_example(r)
        s = caller.score([str(r["completion"])], [ex], f"labeled line {r['line']}")
        score = s[0] if s else math.nan
        got = math.isfinite(score) and score >= threshold
        pos += r["expected"]
        neg += not r["expected"]
        if got != r["expected"]:
            fp += got and not r["expected"]
            fn += r["expected"] and not got
            wrong.append(
                {
                    "line": r["line"],
                    "completion": str(r["completion"])[:120],
                    "answer": str(r["answer"]),
                    "expected": r["expected"],
                    "score": score,
                    "error": "false positive" if got else "false negative",
                }
            )
    return {
        "rows": len(rows),
        "positives": pos,
        "negatives": neg,
        "threshold": threshold,
        "false_positives": fp,
        "false_negatives": fn,
        "fp_rate": fp / neg if neg else math.nan,
        "fn_rate": fn / pos if pos else math.nan,
        "fp_ci95": list(wilson(fp, neg)),
        "fn_ci95": list(wilson(fn, pos)),
        "failing_rows": wrong,
    }


def audit_reward(
    spec: str,
    labeled: str | Path | None = None,
    kind: str = "numeric",
    timeout_s: float = 10,
    threshold: float = 0.5,
) -> dict[str, Any]:
    """Audit one reward; returns the report with `verdict` ("PASS" or "ISSUES FOUND") and `issues`."""
    if kind not in PROBES:
        raise ValueError(f"kind={kind!r}: use one of {sorted(PROBES)}")
    caller = _Caller(spec, timeout_s)
    report: dict[str, Any] = {"reward": spec, "kind": kind, "timeout_s": timeout_s}
    report["convention"] = caller.manager.rewards[0].fn.convention  # grpokit, trl or verl, from the signature
    try:
        if labeled is not None:
            rows = read_labeled(labeled)
            report["labeled"] = _labeled(caller, rows, threshold)
            det_rows = rows[:3]
            texts = [str(r["completion"]) for r in det_rows]
            exs = [labeled_example(r) for r in det_rows]
        else:
            report["probes"] = _probe(caller, kind)
            p = PROBES[kind]
            ex = probe_example(p["prompt"], p["answer"])
            texts = [p["correct"], next(iter(p["hacks"].values())), p["equivalent"].get("sentence", p["correct"])]
            exs = [ex] * len(texts)
        report["determinism"] = _determinism(caller, texts, exs)
    finally:
        caller.close()
    lat = caller.latencies
    report["latency"] = {
        "calls": len(lat),
        "mean_s": sum(lat) / len(lat) if lat else math.nan,
        "max_s": max(lat) if lat else math.nan,
        "slow_calls": sum(t > SLOW_FRACTION * timeout_s for t in lat),
    }
    report["failures"] = caller.failures
    report["skipped_after_timeouts"] = caller.gave_up
    report["issues"] = _issues(report)
    report["verdict"] = "PASS" if not report["issues"] else "ISSUES FOUND"
    return report


def _issues(r: dict[str, Any]) -> list[str]:
    out = []
    kinds: dict[str, int] = {}
    for f in r["failures"]:
        kinds[f["kind"]] = kinds.get(f["kind"], 0) + 1
    if kinds.get("timeout"):
        out.append(
            f"timeout: {kinds['timeout']} call(s) ran past {r['timeout_s']:g} s (worker killed)"
            + ("; remaining cases skipped" if r["skipped_after_timeouts"] else "")
        )
    for k in ("exception", "none", "nan", "wrong_count"):
        if kinds.get(k):
            first = next(f for f in r["failures"] if f["kind"] == k)
            out.append(f"{k}: {kinds[k]} failure(s), first in '{first['case']}': {first['message'][:160]}")
    pr = r.get("probes")
    if pr:
        if not (math.isfinite(pr["correct_score"]) and pr["correct_score"] > 0):
            out.append(f"the correct answer {pr['correct']!r} scored {pr['correct_score']}")
        for c in pr["equivalent"]:
            if not c["ok"] and not c["skipped"]:
                out.append(
                    f"equivalent form '{c['case']}' {c['completion']!r} scored {c['score']:g}, "
                    f"the plain answer {pr['correct_score']:g}"
                )
        for c in pr["hacks"]:
            if not c["ok"] and not c["skipped"]:
                out.append(
                    f"hack '{c['case']}' {c['completion'][:60]!r} scored {c['score']:g} "
                    f"(not below the correct answer's {pr['correct_score']:g})"
                )
    lab = r.get("labeled")
    if lab:
        if lab["false_positives"]:
            out.append(f"false positives: {lab['false_positives']} of {lab['negatives']} wrong completions accepted")
        if lab["false_negatives"]:
            out.append(f"false negatives: {lab['false_negatives']} of {lab['positives']} right completions rejected")
    det = r.get("determinism", {})
    for c in det.get("cases", []):
        if not c["ok"] and all(math.isfinite(v) for v in c["scores"]) and c["scores"]:
            out.append(
                f"non-deterministic: {c['completion'][:40]!r} scored {min(c['scores']):.3g}.."
                f"{max(c['scores']):.3g} over {len(c['scores'])} calls"
            )
    lat = r["latency"]
    if lat["slow_calls"] and not kinds.get("timeout"):
        out.append(
            f"slow: {lat['slow_calls']} call(s) over {SLOW_FRACTION:.0%} of the {r['timeout_s']:g} s timeout "
            f"(max {lat['max_s']:.2f} s)"
        )
    return out


def render(r: dict[str, Any]) -> str:
    """One screen: verdict, then the failing cases and the numbers."""
    head = f"audit-reward {r['reward']} ({r['convention']}-style, kind {r['kind']}, timeout {r['timeout_s']:g} s)"
    lines = [f"{head}: {r['verdict']}"]
    lab = r.get("labeled")
    if lab:
        lines.append(
            f"  labeled: {lab['rows']} rows; FP rate {lab['fp_rate']:.1%} ({lab['false_positives']}/{lab['negatives']},"
            f" 95% CI {lab['fp_ci95'][0]:.1%}-{lab['fp_ci95'][1]:.1%}); FN rate {lab['fn_rate']:.1%} "
            f"({lab['false_negatives']}/{lab['positives']}, 95% CI {lab['fn_ci95'][0]:.1%}-{lab['fn_ci95'][1]:.1%})"
        )
        for w in lab["failing_rows"][:10]:
            lines.append(
                f"    line {w['line']}: {w['error']}: {w['completion'][:60]!r} vs {w['answer']!r} scored {w['score']:g}"
            )
    pr = r.get("probes")
    if pr:
        n_eq = sum(c["ok"] for c in pr["equivalent"])
        n_h = sum(c["ok"] for c in pr["hacks"])
        lines.append(
            f"  probes: correct {pr['correct']!r} scored {pr['correct_score']:g}; equivalent forms "
            f"{n_eq}/{len(pr['equivalent'])} alike; hacks {n_h}/{len(pr['hacks'])} rejected"
        )
    det = r.get("determinism", {})
    lines.append(f"  determinism: {'ok' if det.get('ok') else 'FAILED'} ({det.get('repeats')} repeats alone + batch)")
    lat = r["latency"]
    lines.append(
        f"  latency: {lat['calls']} calls, mean {lat['mean_s'] * 1000:.1f} ms, max {lat['max_s'] * 1000:.1f} "
        f"ms (timeout {r['timeout_s']:g} s)"
    )
    if r["issues"]:
        lines.append("  issues:")
        lines += [f"    - {i}" for i in r["issues"]]
    return "\n".join(lines)


def cmd_audit_reward(args: argparse.Namespace) -> int:
    """Exit status 0 when the audit passes, 1 when it found issues, 2 for a bad reward spec or labeled file."""
    try:
        report = audit_reward(
            args.reward, labeled=args.labeled, kind=args.kind, timeout_s=args.timeout, threshold=args.threshold
        )
    except (ValueError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(json.dumps(report, default=float) if args.json else render(report))
    return 0 if report["verdict"] == "PASS" else 1


def register_cli(sub: Any) -> argparse.ArgumentParser:
    """Add the `audit-reward` subcommand to an argparse sub-parsers object."""
    p = sub.add_parser(
        "audit-reward", help="test a reward function: equivalences, hacks, determinism, timeouts (exit 1 on issues)"
    )
    p.add_argument("--reward", required=True, help="built-in name, module:function or path.py:function")
    p.add_argument("--labeled", default=None, help="JSONL with completion, answer (prompt), expected true/false")
    p.add_argument("--kind", choices=sorted(PROBES), default="numeric", help="probe set (without --labeled)")
    p.add_argument("--timeout", type=float, default=10.0, help="seconds per call, as reward.timeout_s")
    p.add_argument("--threshold", type=float, default=0.5, help="score counted as 'accepted' (labeled mode)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=cmd_audit_reward)
    return p
