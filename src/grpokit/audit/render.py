"""The audit report on one screen."""

from __future__ import annotations

import math
from typing import Any


def _model_lines(rm: dict[str, Any] | None) -> list[str]:
    """A reward model's checks: agreement with the verifier, spread, and each sensitivity against the gap."""
    if not rm:
        return []
    c = rm["checks"]
    ag, sp = c["agreement"], c["spread"]
    lines = [
        f"  reward model (verifier {rm['verifier']}): AUC {ag['auc']:.2f} over {ag['right']} right x {ag['wrong']} "
        f"wrong, gap {rm['gap']:.3g}; scores std {sp['std']:.3g} in [{sp['min']:.3g}, {sp['max']:.3g}]"
    ]
    for name in ("length", "format", "rewrite"):
        if name in c and math.isfinite(c[name].get("max_shift", math.nan)):
            mark = "ok" if c[name]["ok"] else "NOISY"
            lines.append(
                f"    {name}: max shift {c[name]['max_shift']:.3g} = {c[name]['relative_to_gap']:.2f} x gap ({mark})"
            )
    return lines


def render(r: dict[str, Any]) -> str:
    """One screen: verdict, then the failing cases and the numbers."""
    style = "reward model" if r["convention"] == "reward_model" else f"{r['convention']}-style"
    head = f"audit-reward {r['reward']} ({style}, kind {r['kind']}, timeout {r['timeout_s']:g} s)"
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
        alike = (
            "equivalent forms: see the reward model's format check"
            if r.get("reward_model")
            else f"equivalent forms {n_eq}/{len(pr['equivalent'])} alike"
        )
        lines.append(
            f"  probes: correct {pr['correct']!r} scored {pr['correct_score']:g}; {alike}; "
            f"hacks {n_h}/{len(pr['hacks'])} rejected"
        )
    lines += _model_lines(r.get("reward_model"))
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
