"""Draw the report's panels (`report_panels.PANELS`) for one run: lines, bars stacked per step, or per-step bars;
skipped steps shaded, alert onsets marked, charts that cannot move greyed with their reason."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...common.safe_text import safe_text
from ..rundata import RunData, finite
from .panels import Panel
from .plotting import Marker, finish, grey_out, mark_alerts, new_figure, plot_line, shade_skipped

XLABEL = "training step"


@dataclass
class Chart:
    """A drawn panel: its PNG (None when the run logs none of its metrics) and why it cannot move, if so."""

    title: str
    png: Path | None
    static_reason: str | None
    missing: tuple[str, ...]


def _draw_lines(ax: Any, panel: Panel, run: RunData) -> int:
    drawn = 0
    for key, label in panel.series:
        xs, ys = run.series(key)
        if xs:
            plot_line(ax, xs, ys, label, index=drawn)
            drawn += 1
    return drawn


def _draw_stacked(ax: Any, panel: Panel, run: RunData) -> int:
    steps = [int(r["step"]) for r in run.rows]
    bottom = [0.0] * len(steps)
    drawn = 0
    for key, label in panel.series:
        vals = [finite(r.get(key)) or 0.0 for r in run.rows]
        if not any(vals):
            continue
        ax.bar(steps, vals, bottom=bottom, width=0.85, label=label)
        bottom = [b + v for b, v in zip(bottom, vals)]
        drawn += 1
    return drawn


def _draw_bars(ax: Any, panel: Panel, run: RunData) -> int:
    """The first series as bars; steps where the second series (a 0/1 flag) is 1 are drawn in its colour."""
    (key, label), flag = panel.series[0], panel.series[1] if len(panel.series) > 1 else None
    rows = [r for r in run.rows if finite(r.get(key)) is not None]
    if not rows:
        return 0
    flagged = [r for r in rows if flag and (finite(r.get(flag[0])) or 0.0) >= 1.0]
    plain = [r for r in rows if r not in flagged]
    ax.bar([int(r["step"]) for r in plain], [float(r[key]) for r in plain], width=0.85, label=label)
    if flagged:
        ax.bar(
            [int(r["step"]) for r in flagged],
            [float(r[key]) for r in flagged],
            width=0.85,
            color="#9467bd",
            label=f"{label} ({flag[1] if flag else ''})",
        )
    return 1


DRAWERS: dict[str, Callable[[Any, Panel, RunData], int]] = {
    "line": _draw_lines,
    "stacked": _draw_stacked,
    "bars": _draw_bars,
}


def _slug(title: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", title.lower()).strip("_")


def draw_panel(plt: Any, panel: Panel, run: RunData, markers: list[Marker], path: Path) -> Chart:
    """Draw one panel into `path`; a panel none of whose metrics the run logs is only drawn (greyed) when it has
    a reason it cannot move."""
    reason = panel.static(run) if panel.static else None
    fig, ax = new_figure(plt)
    drawn = DRAWERS[panel.kind](ax, panel, run)
    missing = tuple(k for k, _ in panel.series if not run.series(k)[0])
    if not drawn and reason is None:
        plt.close(fig)
        return Chart(panel.title, None, None, missing)
    ref = panel.ref(run) if panel.ref else None
    if ref is not None:
        ax.axhline(ref[0], color="grey", ls="--", lw=1, label=ref[1])
    if reason:
        grey_out(ax, reason)
    shade_skipped(ax, run.skipped_steps())
    mark_alerts(ax, markers)
    steps = [int(r["step"]) for r in run.rows]
    if steps:
        ax.set_xlim(min(steps) - 0.6, max(steps) + 0.6)
    finish(fig, ax, panel.title, XLABEL, panel.ylabel, path, panel.ylim)
    return Chart(panel.title, path, reason, missing)


def chart_names(panels: tuple[Panel, ...]) -> list[str]:
    """The PNG file name of each panel's chart."""
    return [f"{i:02d}_{_slug(p.title)}.png" for i, p in enumerate(panels)]


def draw_all(panels: tuple[Panel, ...], run: RunData, markers: list[Marker], out_dir: Path) -> list[Chart]:
    from .plotting import pyplot

    plt = pyplot()
    return [draw_panel(plt, p, run, markers, out_dir / name) for p, name in zip(panels, chart_names(panels))]


def alert_markers(alerts: list[dict[str, Any]]) -> list[Marker]:
    """Numbered markers A1, A2, ... at each alert's onset step, coloured by severity."""
    from .plotting import SEVERITY_COLOURS

    return [
        Marker(
            float(a["step"]),
            f"A{i}",
            safe_text(f"A{i} {a['mode']} ({a['severity']}, step {a['step']})", limit=200),
            SEVERITY_COLOURS.get(a.get("severity", ""), "k"),
        )
        for i, a in enumerate(alerts, 1)
    ]


def intervention_markers(rows: list[dict[str, Any]]) -> list[Marker]:
    """Markers I1, I2, ... at each autopilot intervention's step (dotted, blue): the change took effect from the next
    step on."""
    inter = [r for r in rows if r.get("kind") == "intervention" and isinstance(r.get("step"), int)]
    return [
        Marker(
            float(r["step"]),
            f"I{i}",
            safe_text(f"I{i} autopilot: {r.get('action')} (step {r['step']})", 200),
            "tab:blue",
            ":",
        )
        for i, r in enumerate(inter, 1)
    ]


__all__ = ["Chart", "alert_markers", "draw_all", "draw_panel", "intervention_markers"]
