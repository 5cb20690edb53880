"""The audit's checks: probes (equivalent forms alike, hacks below the right answer), determinism, and a labeled
file's false-positive / false-negative rates with 95% Wilson intervals."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from ..common.bounded_read import lines, loads_json, open_regular
from ..data.example import Example
from .caller import RewardCaller
from .probes import PROBES, probe_example

Z95 = 1.959963984540054
REPEATS = 5


def wilson(k: int, n: int, z: float = Z95) -> tuple[float, float]:
    """95% Wilson score interval for k successes in n trials ((nan, nan) when n = 0)."""
    if n == 0:
        return math.nan, math.nan
    p = k / n
    den = 1 + z * z / n
    center = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return max(0.0, center - half), min(1.0, center + half)


def labeled_example(row: dict[str, Any]) -> Example:
    """A labeled row's example; its other fields are the dataset columns TRL/verl-style rewards receive."""
    columns = {k: v for k, v in row.items() if k not in ("completion", "expected", "line")}
    columns.setdefault("prompt", "")
    return Example(prompt=str(row.get("prompt", "")), answer=str(row["answer"]), columns=columns)


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or abs(a - b) <= 1e-6


def run_probe(caller: RewardCaller, kind: str) -> dict[str, Any]:
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


def check_determinism(
    caller: RewardCaller, texts: list[str], examples: list[Example], tol: float = 1e-9
) -> dict[str, Any]:
    """Each input scored REPEATS times alone, and REPEATS copies in one batch: all scores must agree within `tol`."""
    cases = []
    for text, ex in zip(texts, examples):
        alone = [caller.score([text], [ex], "determinism") for _ in range(REPEATS)]
        batch = caller.score([text] * REPEATS, [ex] * REPEATS, "determinism (batch)")
        scores = [s[0] for s in alone if s] + (batch or [])
        finite = [v for v in scores if math.isfinite(v)]
        spread = (max(finite) - min(finite)) if finite else math.nan
        ok = bool(finite) and len(finite) == len(scores) and spread <= tol
        cases.append({"completion": text[:120], "scores": scores, "spread": spread, "ok": ok})
    return {"repeats": REPEATS, "tolerance": tol, "cases": cases, "ok": all(c["ok"] for c in cases)}


def read_labeled(path: str | Path) -> list[dict[str, Any]]:
    """Rows of a labeled JSONL file: completion, answer, optional prompt, expected (bool)."""
    rows = []
    with open_regular(path) as f:  # a FIFO or /dev/zero is one line, not a hang; each line bounded
        numbered = list(enumerate(lines(f, path), start=1))
    for lineno, raw in numbered:
        line = raw.decode("utf-8")
        if not line.strip():
            continue
        r = loads_json(line, f"{path}, line {lineno}")
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


def check_labeled(caller: RewardCaller, rows: list[dict[str, Any]], threshold: float) -> dict[str, Any]:
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
