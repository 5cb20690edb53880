"""A diagnosis as short, ranked, human-readable text.

The text carries what the log carries (metric and alert names, run folder names, sample episodes), so it leaves
through `common.safe_text`: control characters escaped, line breaks kept."""

from __future__ import annotations

from typing import Any

from ...common.safe_text import safe_text
from ...run.outcome import outcome_line
from ..detectors import SEVERITY_RANK
from .diagnose import verdict_line
from .knobs import TRAINER_KNOBS


def _fmt(v: Any) -> str:
    return f"{v:.3g}" if isinstance(v, float) else str(v)


def _header(diag: dict[str, Any]) -> list[str]:
    """Which run, its span, notes, the headline signals now, the verdict and the facts about the log."""
    name = f" [{diag['run']}]" if diag.get("run") else ""
    span = ""
    if diag.get("first_step") is not None:
        every = diag.get("logging_interval") or 1
        span = f", steps {diag['first_step']}..{diag['last_step']}" + (f" every {every}" if every > 1 else "")
    out = [f"{diag['path']}{name}: {diag['source']} log, {diag['steps']} steps{span}"]
    ended = outcome_line(diag.get("outcome"))
    if ended:
        out.append(f"  {ended}")
    out.append(f"  verdict: {verdict_line(diag)}")
    for note in diag.get("notes", []):
        out.append(f"  note: {note}")
    if diag["last_values"]:
        out.append("  now: " + ", ".join(f"{k} {v:.3g}" for k, v in diag["last_values"].items()))
    findings = sorted(diag.get("findings", []), key=lambda f: SEVERITY_RANK.get(f["severity"], 9))
    for f in findings:
        if f["kind"] != "too_few_steps":
            out.append(f"  - {f['severity'].upper()} {f['message']}")
    short = [f for f in findings if f["kind"] == "too_few_steps"]
    if short:
        judged = ", ".join(f"{f['mode']} ({f['needs']})" for f in short)
        out.append(f"  - INFO too few steps to judge (steps needed; the log covers {short[0]['covers']}): {judged}")
    if diag.get("not_applicable"):
        out.append(f"  - not applicable (a single-turn log: no episode/* signal): {', '.join(diag['not_applicable'])}")
    return out


SAMPLES = "sample_episodes"  # evidence key of episode excerpts (multi-line text, shown below the evidence)


def _sample_lines(samples: Any) -> list[str]:
    """Each sample episode excerpt under its own heading, its lines indented."""
    if not isinstance(samples, list):
        return []
    out = []
    for i, text in enumerate(samples, 1):
        out.append(f"   sample episode {i}:")
        out.extend(f"     | {line}" for line in str(text).splitlines())
    return out


def _alert_lines(i: int, a: dict[str, Any], active: list[str]) -> list[str]:
    """One alert: onset, what, evidence, its current value, escalations, explanation, the fix (and the same knob
    in the trainer that wrote the log)."""
    if a["mode"] in active and a.get("cleared_at") is None:
        state = " (still active)"
    elif a.get("cleared_at") is not None:
        state = f" (cleared at step {a['cleared_at']})"
    else:
        state = ""
    head = f"{i}. {a['severity'].upper()} {a['mode']}{state}: since step {a['step']}"
    out = [f"{head} (confirmed at step {a['fired_at']})", f"   what: {a['message']}"]
    out.append("   evidence: " + ", ".join(f"{k}={_fmt(v)}" for k, v in a["evidence"].items() if k != SAMPLES))
    out.extend(_sample_lines(a["evidence"].get(SAMPLES)))
    cur = a.get("current")
    if cur and cur.get("step") != a["fired_at"]:
        out.append(f"   now (step {cur['step']}): {cur['message']}")
    if a.get("escalations_dropped"):
        out.append(f"   ({a['escalations_dropped']} earlier changes not kept; the last {len(a['escalations'])} follow)")
    for e in a.get("escalations", []):
        if "to" in e:
            eased = SEVERITY_RANK.get(e["to"], 9) > SEVERITY_RANK.get(e["from"], 9)
            out.append(f"   {'eased' if eased else 'escalated'}: {e['from']} -> {e['to']} at step {e['step']}")
        else:
            out.append(f"   became: {e['mode']} at step {e['step']}")
    if a.get("explained_by"):
        out.append(f"   explained by: {a['explained_by']} (logged as {a.get('severity_logged', a['severity'])})")
    out.append(f"   change: {a['fix']}")
    for trainer in TRAINER_KNOBS:
        if eq := a.get(f"in_{trainer}"):
            out.append(
                f"   in {'TRL' if trainer == 'trl' else trainer}: " + "; ".join(f"{k} -> {v}" for k, v in eq.items())
            )
    return out


def render(diag: dict[str, Any]) -> str:
    """A short, ranked, human-readable diagnosis of one run (no control character but line breaks and tabs)."""
    out = _header(diag)
    if not diag["alerts"] and diag.get("verdict") not in ("never trained", "not an RL run"):
        out.append("No failure mode detected." if diag["steps"] else "")
    for i, a in enumerate(diag["alerts"], 1):
        out.extend(_alert_lines(i, a, diag["active"]))
    if diag["not_measurable"]:
        out.append("Not measurable from this log (signals it does not record):")
        for det, miss in diag["not_measurable"].items():
            out.append(f"  - {det}: needs {', '.join(miss)}")
    return safe_text("\n".join(line for line in out if line != ""), limit=None, multiline=True)


def _top_alert(diag: dict[str, Any]) -> str:
    """The first ranked alert (severity, mode, and whether it cleared), else the most severe finding, else "-"."""
    if diag["alerts"]:
        a = diag["alerts"][0]
        cleared = " (cleared)" if a.get("cleared_at") is not None else ""
        return f"{a['severity'].upper()} {a['mode']}{cleared}"
    findings = sorted(diag.get("findings", []), key=lambda f: SEVERITY_RANK.get(f["severity"], 9))
    if findings and findings[0]["severity"] != "info":
        return f"{findings[0]['severity'].upper()} {findings[0]['kind'].replace('_', ' ')}"
    return "-"


def summary_table(diags: list[dict[str, Any]]) -> str:
    """One row per run: its name, logged steps, verdict (the part before any ';') and top alert, aligned."""
    rows = [("run", "steps", "verdict", "top alert")]
    for d in diags:
        name = safe_text(d.get("run") or d["path"], limit=None)
        rows.append((name, str(d["steps"]), str(d.get("verdict", "")).split(";")[0], _top_alert(d)))
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    lines = ["  ".join([r[0].ljust(widths[0]), r[1].rjust(widths[1]), r[2].ljust(widths[2]), r[3]]) for r in rows]
    return safe_text("\n".join(line.rstrip() for line in lines), limit=None, multiline=True)
