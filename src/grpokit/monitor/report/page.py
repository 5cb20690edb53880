"""`grpokit report PATH`: a self-contained HTML page plus one PNG per chart of a run's health.

The page holds a summary block (`summary.py`), the doctor's diagnosis, the charts (`panels.py`:
labelled axes with units, numbered alert onsets with a legend, skipped steps shaded, charts that cannot move greyed
with the reason) and sample completions with their prompt and reference answer. Works on any log `readers.py`
understands; a chart whose metrics the log lacks says so instead of being drawn.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ...run.outcome import outcome_line
from ..doctor import diagnose, verdict_line
from ..outputs import OutputFolderError, prepare_output
from ..readers.episodes import episode_of
from ..rundata import RunData, finite, load_run
from .charts import Chart, alert_markers, chart_names, draw_all, intervention_markers
from .episodes import EPISODE_STYLE, episode_html
from .html import esc, inline_png, key_value_table, page, table
from .panels import PANELS, add_derived
from .summary import summary_fields

MAX_COMPLETIONS = 9


VERDICT_CLASS = {
    "failing": "critical",
    "never trained": "critical",
    "ended in error": "critical",
    "warnings": "warning",
}
ENDED_CLASS = {"completed": "good", "interrupted": "warning", "running": "warning", "unknown": "warning"}


def _verdict_html(diag: dict[str, Any]) -> str:
    """How the run ended, then the verdict, coloured by what it means (a learned task is good news, not a failure)."""
    cls = VERDICT_CLASS.get(diag.get("verdict", ""), "good")
    ended = outcome_line(diag.get("outcome"))
    first = ""
    if ended:
        first = f"<p class='{ENDED_CLASS.get(diag['outcome']['status'], 'critical')}'><b>{esc(ended)}</b></p>"
    return first + f"<p class='verdict {cls}'><b>verdict: {esc(verdict_line(diag))}</b></p>"


def _diagnosis_html(diag: dict[str, Any]) -> list[str]:
    parts = ["<h2>Diagnosis</h2>"]
    for f in diag.get("findings", []):
        parts.append(f"<p class='{f['severity']}'>{f['severity'].upper()} {esc(f['message'])}</p>")
    if not diag["alerts"]:
        parts.append("<p>No failure mode detected.</p>")
    for i, a in enumerate(diag["alerts"], 1):
        now = ""
        if a.get("current") and a["current"].get("step") != a["fired_at"]:
            now = f"<br>now (step {a['current']['step']}): {esc(a['current']['message'])}"
        explained = ""
        if a.get("explained_by"):
            explained = f"<br>explained by: {esc(a['explained_by'])} (logged as {esc(a.get('severity_logged'))})"
        evidence = {k: v for k, v in a["evidence"].items() if k != "sample_episodes"}
        parts.append(
            f"<p class='{a['severity']}'><b>A{i} {a['severity'].upper()} {esc(a['mode'])}</b> since step "
            f"{a['step']}: {esc(a['message'])}<br>evidence: {esc(json.dumps(evidence))}{now}{explained}"
            f"<br>change: {esc(a['fix'])}</p>"
        )
        parts.extend(_samples_html(a["evidence"].get("sample_episodes")))
    if diag["not_measurable"]:
        items = "".join(f"<li>{esc(k)}: needs {esc(', '.join(v))}</li>" for k, v in diag["not_measurable"].items())
        parts.append(f"<p>Not measurable from this log:</p><ul>{items}</ul>")
    if diag.get("not_applicable"):
        modes = esc(", ".join(diag["not_applicable"]))
        parts.append(f"<p>Not applicable (a single-turn log: no episode/* signal): {modes}</p>")
    return parts


def _followup(row: dict[str, Any] | None) -> str:
    if not row:
        return "not yet"
    after = ", ".join(f"{k} {v:.3g}" for k, v in (row.get("metrics_after") or {}).items() if isinstance(v, float))
    return f"step {row.get('after_step')}: {after}"


def _autopilot_html(rows: list[dict[str, Any]]) -> list[str]:
    """The autopilot's timeline: each intervention (I1, I2, ... on the charts) with the alert that caused it and the
    metrics a few steps later, and each alert it could not act on, with what it would need."""
    if not rows:
        return []
    follow = {(r.get("step"), r.get("action")): r for r in rows if r.get("kind") == "followup"}
    inter = [r for r in rows if r.get("kind") == "intervention"]
    table_rows = [
        [
            f"I{i}",
            esc(r.get("step")),
            esc(f"{r.get('action')} ({r.get('before')} -> {r.get('after')})"),
            esc(r.get("reason")),
            esc(_followup(follow.get((r.get("step"), r.get("action"))))),
        ]
        for i, r in enumerate(inter, 1)
    ]
    parts = ["<h2>Autopilot</h2>"]
    if table_rows:
        parts.append(table(["", "step", "change", "because", "after"], table_rows, raw=True))
    for r in rows:
        if r.get("kind") == "unable":
            parts.append(
                f"<p class='warning'>step {esc(r.get('step'))}: could not act on {esc(r.get('mode'))}: "
                f"{esc(r.get('why'))}<br>it would need: {esc(r.get('needs'))}</p>"
            )
    return parts


def _samples_html(samples: Any) -> list[str]:
    """An alert's sample episode excerpts (evidence `sample_episodes`), each in its own pre-formatted box."""
    if not isinstance(samples, list) or not samples:
        return []
    boxes = "".join(f"<div class='completion'>{esc(s)}</div>" for s in samples)
    return [f"<div class='note'>sample episodes:</div>{boxes}"]


def _chart_html(chart: Chart) -> str:
    if chart.png is None:
        return (
            f"<div class='chart'><h3>{esc(chart.title)}</h3><p class='note'><i>not logged by this run "
            f"(needs {esc(', '.join(chart.missing))})</i></p></div>"
        )
    cls = "chart static" if chart.static_reason else "chart"
    note = f"<p class='note'>{esc(chart.static_reason)}</p>" if chart.static_reason else ""
    return f"<div class='{cls}'>{note}{inline_png(chart.png, chart.title)}</div>"


def pick_completions(rows: list[dict[str, Any]], limit: int = MAX_COMPLETIONS) -> list[dict[str, Any]]:
    """Up to `limit` completions from the first, middle and last logged steps (a third from each)."""
    steps = sorted({int(r["step"]) for r in rows})
    if not steps:
        return []
    chosen = sorted({steps[0], steps[len(steps) // 2], steps[-1]})
    per = max(1, limit // len(chosen))
    return [r for s in chosen for r in [c for c in rows if int(c["step"]) == s][:per]]


def _completions_html(run: RunData) -> list[str]:
    picked = pick_completions(run.completions)
    if not picked:
        return []
    rows = []
    for c in picked:
        correct = (finite(c.get("accuracy")) or 0) >= 0.5
        verdict = f"<span class='{'good' if correct else 'bad'}'>{'correct' if correct else 'wrong'}</span>"
        reward = finite(c.get("reward"))
        length = f"{c.get('length', '?')}{' (truncated)' if c.get('truncated') else ''}"
        rows.append(
            [
                esc(c["step"]),
                f"<div class='completion'>{esc(c.get('prompt', '(not recorded by this run)'))}</div>",
                esc(c.get("answer", "?")),
                episode_html(ep)
                if (ep := episode_of(c)) is not None
                else f"<div class='completion'>{esc(c['text'])}</div>",
                f"{verdict}<br>reward {'?' if reward is None else format(reward, '.3g')}",
                esc(length),
            ]
        )
    headers = ["step", "prompt", "answer", "completion", "verdict", "tokens"]
    skipped = run.skipped_completions
    note = f"<p class='note'>{skipped} logged completion row(s) without a text or a step were left out.</p>"
    style = [EPISODE_STYLE] if any(episode_of(c) is not None for c in picked) else []
    return ["<h2>Sample completions</h2>", *style, *([note] if skipped else []), table(headers, rows, raw=True)]


def make_report(path: str | Path, out: str | Path | None = None, run: str | None = None) -> Path:
    """Write `report.html` and one PNG per chart into `out` (default: PATH/report); returns the HTML path. `run`
    picks one run when PATH holds several."""
    data = load_run(path, run)
    add_derived(data)
    diag = diagnose(path, run=run)
    src = Path(path)
    out_dir = Path(out) if out else (src if src.is_dir() else src.parent) / "report"
    if out is None and out_dir.is_symlink():  # planted: the run's own folder would be written, and pruned, elsewhere
        raise OutputFolderError(
            f"{out_dir} is a symbolic link (to {os.readlink(out_dir)!r}) that grpokit did not make; a report is never "
            "written through it: remove the link, or name a folder with --out"
        )
    # charts of an earlier report that this one may not redraw are removed; nothing grpokit did not write
    prepare_output(out_dir, "report", [*chart_names(PANELS), "report.html"], default=out is None)
    markers = alert_markers(diag["alerts"]) + intervention_markers(data.interventions)
    charts = draw_all(PANELS, data, markers, out_dir)
    run_label = f" [{esc(diag['run'])}]" if diag.get("run") else ""
    body = [
        "<h1>grpokit report</h1>",
        f"<p class='sub'>{esc(path)}{run_label} — {esc(diag['source'])} log, {diag['steps']} training steps</p>",
        _verdict_html(diag),
        "<h2>Summary</h2>",
        key_value_table(summary_fields(data, diag["alerts"])),
        *_diagnosis_html(diag),
        *_autopilot_html(data.interventions),
        "<h2>Charts</h2><p class='note'>x axis: training step. Dashed vertical lines A1, A2, ... mark alert onsets "
        "(colour = severity, listed in the Diagnosis); dotted blue lines I1, I2, ... the autopilot's changes; grey "
        "bands are steps without an update; greyed charts cannot move in this run and say why.</p>",
        *(_chart_html(c) for c in charts),
        *_completions_html(data),
    ]
    html_path = out_dir / "report.html"
    html_path.write_text(page(f"grpokit report: {data.name}", body))
    return html_path
