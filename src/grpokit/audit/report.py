"""The audit report: run the checks through one caller, measure latency, list the issues, give the verdict."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from ..rewards.reward_model import CONVENTION as REWARD_MODEL
from .caller import RewardCaller
from .checks import check_determinism, check_labeled, labeled_example, read_labeled, run_probe
from .model_checks import audit_model, labeled_cases, probe_cases
from .probes import PROBES, probe_example

SLOW_FRACTION = 0.5  # a call over half the timeout is reported as slow
MODEL_TOLERANCE = 1e-4  # a reward model's scores of the same text agree to this (float sums in another order)


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
    caller = RewardCaller(spec, timeout_s)
    report: dict[str, Any] = {"reward": spec, "kind": kind, "timeout_s": timeout_s}
    # grpokit, trl or verl, from the signature; reward_model for a sequence-classification model directory
    report["convention"] = caller.manager.rewards[0].convention
    is_model = report["convention"] == REWARD_MODEL
    try:
        if labeled is not None:
            rows = read_labeled(labeled)
            report["labeled"] = check_labeled(caller, rows, threshold)
            det_rows = rows[:3]
            texts = [str(r["completion"]) for r in det_rows]
            exs = [labeled_example(r) for r in det_rows]
            if is_model:
                report["reward_model"] = audit_model(caller, *labeled_cases(rows), "the labeled rows' expected")
        else:
            report["probes"] = run_probe(caller, kind)
            p = PROBES[kind]
            ex = probe_example(p["prompt"], p["answer"])
            texts = [p["correct"], next(iter(p["hacks"].values())), p["equivalent"].get("sentence", p["correct"])]
            exs = [ex] * len(texts)
            if is_model:
                report["reward_model"] = audit_model(caller, *probe_cases(kind, timeout_s))
        # a model's batched forward may differ from a lone one in the last float bits: that is not noise
        report["determinism"] = check_determinism(caller, texts, exs, tol=MODEL_TOLERANCE if is_model else 1e-9)
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
    report["not_applicable"] = caller.not_applicable
    report["skipped_after_timeouts"] = caller.gave_up
    report["issues"] = _issues(report)
    report["verdict"] = "PASS" if not report["issues"] else "ISSUES FOUND"
    return report


def _failure_issues(r: dict[str, Any], kinds: dict[str, int]) -> list[str]:
    """Timeouts, then exceptions / None / NaN / wrong counts, with the first case of each."""
    out = []
    if kinds.get("timeout"):
        out.append(
            f"timeout: {kinds['timeout']} call(s) ran past {r['timeout_s']:g} s (worker killed)"
            + ("; remaining cases skipped" if r["skipped_after_timeouts"] else "")
        )
    for k in ("exception", "nan", "wrong_count"):
        if kinds.get(k):
            first = next(f for f in r["failures"] if f["kind"] == k)
            out.append(f"{k}: {kinds[k]} failure(s), first in '{first['case']}': {first['message'][:160]}")
    na = r.get("not_applicable", [])
    if na:  # not a failure in training (reward/na_frac), but a probe of the reward's own answer kind should apply
        out.append(f"not applicable: returned None on {len(na)} case(s), first '{na[0]}' (see reward.not_applicable)")
    return out


def _probe_issues(pr: dict[str, Any], exact: bool = True) -> list[str]:
    """The right answer not rewarded, equivalent forms scored differently, hacks not scored below it. Not `exact`
    (a reward model: any real score, equivalent forms judged by the model checks' format tolerance): hacks only."""
    out = []
    if exact and not (math.isfinite(pr["correct_score"]) and pr["correct_score"] > 0):
        out.append(f"the correct answer {pr['correct']!r} scored {pr['correct_score']}")
    for c in pr["equivalent"]:
        if exact and not c["ok"] and not c["skipped"]:
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
    return out


def _labeled_issues(lab: dict[str, Any]) -> list[str]:
    out = []
    if lab["false_positives"]:
        out.append(f"false positives: {lab['false_positives']} of {lab['negatives']} wrong completions accepted")
    if lab["false_negatives"]:
        out.append(f"false negatives: {lab['false_negatives']} of {lab['positives']} right completions rejected")
    return out


def _issues(r: dict[str, Any]) -> list[str]:
    kinds: dict[str, int] = {}
    for f in r["failures"]:
        kinds[f["kind"]] = kinds.get(f["kind"], 0) + 1
    out = _failure_issues(r, kinds)
    if r.get("probes"):
        out += _probe_issues(r["probes"], exact=r["convention"] != REWARD_MODEL)
    if r.get("reward_model"):  # a model is judged by its checks' tolerances, not by equal scores
        out += [c["issue"] for c in r["reward_model"]["checks"].values() if c["issue"]]
    if r.get("labeled"):
        out += _labeled_issues(r["labeled"])
    for c in r.get("determinism", {}).get("cases", []):
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
