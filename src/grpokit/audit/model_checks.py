"""The audit of a reward model (a neural reward, grpokit/rewards/reward_model.py): is its score about correctness, or
noise? A noisy reward model feeds false signals into the advantages: within a group, score differences that come
from length, formatting or whitespace look like learning signal, and the policy learns them.

The checks read the model's scores on cases labeled right or wrong by a verifier: the rows' `expected` labels of a
labeled file, or, on the probe set of a kind, the kind's built-in verifier (`VERIFIERS`) run on each probe text
against the probe's answer. The signal is the gap between the mean score of right and of wrong cases; every
sensitivity is the largest score change a harmless edit causes, as a fraction of that gap (`SENSITIVITY_MAX`):

- `agreement`: the AUC of the scores against the verifier's labels (grpokit/rewards/agreement.py), P(score(right) >
  score(wrong)) over every right/wrong pair, ties 1/2; below `AGREEMENT_MIN` the model ranks answers unlike the
  verifier;
- `spread`: the standard deviation, min and max of all scores (a flat model, std < `SPREAD_MIN`, gives no signal);
- `length`: a right and a wrong case padded with 1, 4 and 16 copies of a neutral sentence (`FILLER`);
- `format`: the right answer in equivalent formats (the probe's equivalent forms, or `FORMAT_WRAPS` of right rows);
- `rewrite`: every case up to `REWRITE_MAX_CHARS` long after whitespace and casing rewrites that change no content
  (`REWRITES`).

Each check is registered in `MODEL_CHECKS` and returns its numbers, `ok`, and the issue text when not ok.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..common.registry import Registry
from ..data.example import Example
from ..rewards.agreement import AGREEMENT_MIN, NOISE_MAX, auc
from .caller import RewardCaller
from .checks import labeled_example
from .probes import PROBES, probe_example

VERIFIERS = {"numeric": "exact_numeric", "math": "math_verify", "code": "code_exec"}
SENSITIVITY_MAX = NOISE_MAX
SPREAD_MIN = 1e-3
REWRITE_MAX_CHARS = 2000  # longer cases (the huge-answer hacks) are not rewritten: 5 more forwards of ~8k tokens each
FILLER = " Let me state that once more."
PADDINGS = (1, 4, 16)
FORMAT_WRAPS: dict[str, Callable[[str], str]] = {
    "bold markdown": lambda t: f"**{t}**",
    "answer prefix": lambda t: f"Answer: {t}",
    "trailing sentence": lambda t: f"{t}\nThat is my answer.",
}
REWRITES: dict[str, Callable[[str], str]] = {
    "trailing newline": lambda t: t + "\n",
    "leading space": lambda t: " " + t,
    "double spaces": lambda t: t.replace(" ", "  "),
    "upper case": str.upper,
    "lower case": str.lower,
}
MODEL_CHECKS = Registry("reward-model check")


@dataclass
class Case:
    """One text scored by the reward model, with its example and the verifier's label (right or wrong)."""

    name: str
    text: str
    example: Example
    right: bool
    score: float = math.nan


@dataclass
class ModelAudit:
    """What every check reads: the caller, the labeled cases (scored), the format variants of the right answer."""

    caller: RewardCaller
    cases: list[Case]
    formats: list[Case]

    @property
    def right(self) -> list[Case]:
        return [c for c in self.cases if c.right and math.isfinite(c.score)]

    @property
    def wrong(self) -> list[Case]:
        return [c for c in self.cases if not c.right and math.isfinite(c.score)]

    @property
    def gap(self) -> float:
        """Mean score of right cases minus that of wrong cases: the signal (NaN without both)."""
        if not self.right or not self.wrong:
            return math.nan
        return statistics.fmean(c.score for c in self.right) - statistics.fmean(c.score for c in self.wrong)

    def scores(self, texts: list[str], examples: list[Example], case: str) -> list[float]:
        out = self.caller.score(texts, examples, case)
        return out if out is not None else [math.nan] * len(texts)


def _relative(shift: float, gap: float) -> float:
    """A score change as a fraction of the right-wrong gap (inf when there is no positive gap)."""
    return shift / gap if gap > 0 else math.inf


def _sensitivity(name: str, shift: float, gap: float, what: str) -> dict[str, Any]:
    rel = _relative(shift, gap)
    ok = rel < SENSITIVITY_MAX
    issue = None
    if not ok:
        issue = (
            f"reward model {name}: {what} moves the score by up to {shift:.3g}, {rel:.2f} x the right-wrong gap "
            f"{gap:.3g} (more than {SENSITIVITY_MAX:g}): that much of a group's score differences is noise"
        )
    return {"max_shift": shift, "relative_to_gap": rel, "ok": ok, "issue": issue}


@MODEL_CHECKS.register("agreement")
def agreement(a: ModelAudit) -> dict[str, Any]:
    """AUC of the scores against the verifier's labels, and the right-wrong gap."""
    value = auc([c.score for c in a.right], [c.score for c in a.wrong])
    ok = math.isfinite(value) and value >= AGREEMENT_MIN
    issue = None
    if not ok:
        issue = (
            f"reward model agreement with the verifier: AUC {value:.2f} over {len(a.right)} right x {len(a.wrong)} "
            f"wrong cases (below {AGREEMENT_MIN:g}; 0.5 is chance): it ranks answers unlike the verifier"
        )
    return {"auc": value, "gap": a.gap, "right": len(a.right), "wrong": len(a.wrong), "ok": ok, "issue": issue}


@MODEL_CHECKS.register("spread")
def spread(a: ModelAudit) -> dict[str, Any]:
    """Standard deviation, min and max of every case's score."""
    scores = [c.score for c in a.cases if math.isfinite(c.score)]
    std = statistics.pstdev(scores) if scores else math.nan
    ok = math.isfinite(std) and std >= SPREAD_MIN
    issue = None if ok else f"reward model scores do not spread: std {std:.3g} over {len(scores)} cases (no signal)"
    lo, hi = (min(scores), max(scores)) if scores else (math.nan, math.nan)
    return {"std": std, "min": lo, "max": hi, "cases": len(scores), "ok": ok, "issue": issue}


@MODEL_CHECKS.register("length")
def length(a: ModelAudit) -> dict[str, Any]:
    """Scores of a right and a wrong case padded with 1, 4 and 16 copies of `FILLER`: the largest change."""
    rows, shift = [], 0.0
    for base in [*a.right[:1], *a.wrong[:1]]:
        texts = [base.text + FILLER * k for k in PADDINGS]
        padded = a.scores(texts, [base.example] * len(texts), f"length: {base.name}")
        finite = [s for s in padded if math.isfinite(s)]
        shift = max([shift, *(abs(s - base.score) for s in finite)])
        rows.append({"case": base.name, "score": base.score, "padded": dict(zip(map(str, PADDINGS), padded))})
    out = _sensitivity("length", shift, a.gap, f"padding with up to {max(PADDINGS)} neutral sentences")
    return {"cases": rows, **out}


@MODEL_CHECKS.register("format")
def format_(a: ModelAudit) -> dict[str, Any]:
    """The right answer's equivalent formats: the largest change from the plain right answer's score."""
    if not a.right or not a.formats:
        return {"cases": [], "max_shift": math.nan, "ok": True, "issue": None}
    base = a.right[0]
    scores = a.scores([f.text for f in a.formats], [f.example for f in a.formats], "format")
    rows = [{"case": f.name, "score": s} for f, s in zip(a.formats, scores)]
    shift = max((abs(s - base.score) for s in scores if math.isfinite(s)), default=0.0)
    return {"base": base.score, "cases": rows, **_sensitivity("format", shift, a.gap, "an equivalent format")}


@MODEL_CHECKS.register("rewrite")
def rewrite(a: ModelAudit) -> dict[str, Any]:
    """Every case after each of `REWRITES` (no content changed): the largest and the mean absolute change."""
    cases = [c for c in a.cases if math.isfinite(c.score) and len(c.text) <= REWRITE_MAX_CHARS]
    pairs = [(c, name, fn(c.text)) for c in cases for name, fn in REWRITES.items() if fn(c.text) != c.text]
    scores = a.scores([t for _, _, t in pairs], [c.example for c, _, _ in pairs], "rewrite")
    deltas = [abs(s - c.score) for (c, _, _), s in zip(pairs, scores) if math.isfinite(s)]
    worst = max(range(len(deltas)), key=deltas.__getitem__) if deltas else None
    shift = deltas[worst] if worst is not None else 0.0
    out = _sensitivity("stability", shift, a.gap, "a whitespace or casing rewrite")
    return {
        "rewrites": len(deltas),
        "mean_shift": statistics.fmean(deltas) if deltas else math.nan,
        "worst": f"{pairs[worst][1]} of {pairs[worst][0].name!r}" if worst is not None else None,
        **out,
    }


def probe_cases(kind: str, timeout_s: float) -> tuple[list[Case], list[Case], str]:
    """The probe set of `kind` as cases labeled by the kind's verifier, the equivalent forms as format variants,
    and the verifier's name."""
    spec = PROBES[kind]
    ex = probe_example(spec["prompt"], spec["answer"])
    texts = {"correct": spec["correct"], **spec["equivalent"], **{f"hack: {k}": v for k, v in spec["hacks"].items()}}
    verifier = RewardCaller(VERIFIERS[kind], timeout_s)
    try:
        labels = verifier.score(list(texts.values()), [ex] * len(texts), "verifier") or [math.nan] * len(texts)
    finally:
        verifier.close()
    cases = [
        Case(name, text, ex, math.isfinite(v) and v >= 0.5)
        for (name, text), v in zip(texts.items(), labels)
        if math.isfinite(v)
    ]
    formats = [Case(name, text, ex, True) for name, text in spec["equivalent"].items()]
    return cases, formats, VERIFIERS[kind]


def labeled_cases(rows: list[dict[str, Any]]) -> tuple[list[Case], list[Case]]:
    """A labeled file's rows as cases (their `expected` is the label), and `FORMAT_WRAPS` of the first right row."""
    cases = [Case(f"line {r['line']}", str(r["completion"]), labeled_example(r), bool(r["expected"])) for r in rows]
    first = next((c for c in cases if c.right), None)
    formats = [Case(n, fn(first.text), first.example, True) for n, fn in FORMAT_WRAPS.items()] if first else []
    return cases, formats


def audit_model(caller: RewardCaller, cases: list[Case], formats: list[Case], verifier: str) -> dict[str, Any]:
    """Score the cases, run every check of `MODEL_CHECKS`; the section of the audit report."""
    a = ModelAudit(caller, cases, formats)
    for c, s in zip(cases, a.scores([c.text for c in cases], [c.example for c in cases], "reward model cases")):
        c.score = s
    checks = {name: check(a) for name, check in MODEL_CHECKS.items()}
    return {
        "verifier": verifier,
        "cases": [{"case": c.name, "right": c.right, "score": c.score} for c in cases],
        "gap": a.gap,
        "checks": checks,
        "ok": all(c["ok"] for c in checks.values()),
    }
