"""`grpokit compare RUN_A RUN_B ... [--x tokens|samples|steps|seconds] [--out DIR]`: overlay several runs.

Writes `compare.html` (self-contained), one PNG per chart, and a TensorBoard layout (`compare_tb.py`). Each run
gets one colour and a letter (A, B, ...); within a chart, line styles tell the signals apart (e.g. all-correct
solid, all-wrong dashed). Runs of different recipes and lengths line up on the chosen x axis (`rundata.X_AXES`:
cumulative generated tokens by default, so a run that over-samples pays for it on the axis). Alert onsets from each
run's `alerts.jsonl` are dotted lines in the run's colour, tagged with the run's letter (B2: run B's 2nd alert).
The final-figures table (`compare_table.py`) gives each run's figures and its differences to run A.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ... import metric_names as M
from ...common.safe_text import safe_text
from ...run.outcome import outcome_line
from ..outputs import prepare_output
from ..report.html import esc, inline_png, page, table
from ..report.panels import clip_static, kl_static
from ..report.plotting import Marker, finish, grey_out, mark_alerts, new_figure, plot_line, pyplot
from ..rundata import X_AXES, RunData, load_runs, x_positions
from .table import TAIL, final_table
from .tensorboard import write_tensorboard

RUN_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
RUN_COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")


@dataclass(frozen=True)
class ComparePanel:
    """One overlay chart: `series` are (metric, what its line style means); every run draws each series."""

    title: str
    ylabel: str
    series: tuple[tuple[str, str], ...]
    static: Callable[[RunData], str | None] | None = None  # why the chart cannot move in a run (report rule)


PANELS: tuple[ComparePanel, ...] = (
    ComparePanel("Reward", "mean reward", ((M.REWARD_MEAN, "reward"),)),
    ComparePanel("Held-out accuracy", "accuracy (fraction)", ((M.EVAL_ACCURACY, "held-out accuracy"),)),
    ComparePanel("Train accuracy", "accuracy (fraction)", ((M.REWARD_ACCURACY, "train accuracy"),)),
    ComparePanel("Token entropy", "entropy (nats/token)", ((M.ENTROPY_TOKEN_MEAN, "token entropy"),)),
    ComparePanel(
        "Zero-variance split",
        "fraction of groups",
        ((M.ZV_ALL_CORRECT, "all correct"), (M.ZV_ALL_WRONG, "all wrong")),
    ),
    ComparePanel(
        "Length of correct and incorrect responses",
        "tokens per response",
        ((M.LENGTH_CORRECT_MEAN, "correct"), (M.LENGTH_INCORRECT_MEAN, "incorrect")),
    ),
    ComparePanel(
        "KL to reference",
        "KL (nats/token)",
        ((M.KL_REF_K3, "k3 to reference"), (M.KL_INIT_K3, "k3 to init")),
        static=kl_static,
    ),
    ComparePanel(
        "Clip fractions",
        "fraction of tokens clipped",
        ((M.ACTOR_CLIPFRAC_LOW, "low"), (M.ACTOR_CLIPFRAC_HIGH, "high"), (M.ACTOR_CLIPFRAC, "any")),
        static=clip_static,
    ),
    ComparePanel("Step time", "seconds per step", ((M.TIME_STEP, "s/step"),)),
)
MAX_ALERT_LEGEND = 8


def run_tags(n: int) -> list[str]:
    """A, B, ..., Z, AA, AB, ..."""
    letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    return [letters[i] if i < 26 else letters[i // 26 - 1] + letters[i % 26] for i in range(n)]


def _markers(runs: list[RunData], tags: list[str], xs: list[dict[int, float]]) -> list[Marker]:
    out = []
    for run, tag, x, colour in zip(runs, tags, xs, RUN_COLOURS * 8):
        for i, a in enumerate(run.alerts, 1):
            step = int(a.get("step", 0))
            if step in x:
                sev = a.get("severity", "?")
                label = safe_text(f"{tag}{i} {a.get('mode', '?')} ({sev}, step {step})", limit=200)  # a logged name
                out.append(Marker(x[step], f"{tag}{i}", label, colour, ":"))
    return out


def _style_legend(ax: Any, panel: ComparePanel, runs: list[RunData], tags: list[str], markers: list[Marker]) -> None:
    """Legend: one entry per run (its colour), one per line style (its signal), then the alert markers."""
    from matplotlib.lines import Line2D

    from ..report.plotting import LINE_STYLES

    handles = [
        Line2D([], [], color=RUN_COLOURS[n % 8], lw=max(0.8, 2.6 - 0.6 * n), marker=RUN_MARKERS[n % 8], ms=4)
        for n in range(len(runs))
    ]
    labels = [safe_text(f"{t}: {r.name}", limit=200) for t, r in zip(tags, runs)]  # a folder's name
    if len(panel.series) > 1:
        handles += [Line2D([], [], color="k", ls=LINE_STYLES[i]) for i in range(len(panel.series))]
        labels += [label for _, label in panel.series]
    shown = markers if len(markers) <= MAX_ALERT_LEGEND else []
    handles += [Line2D([], [], color=m.colour, ls=":") for m in shown]
    labels += [m.label for m in shown]
    if markers and not shown:
        handles.append(Line2D([], [], color="grey", ls=":"))
        labels.append(f"{len(markers)} alert onsets (run colour; listed below the charts)")
    ax.legend(handles, labels, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)


def draw_panel(
    plt: Any, panel: ComparePanel, runs: list[RunData], tags: list[str], ctx: dict[str, Any], path: Path
) -> Path | None:
    """One overlay chart into `path`; None when no run logs any of its metrics."""
    fig, ax = new_figure(plt, height=3.8)
    drawn = 0
    for n, (run, x) in enumerate(zip(runs, ctx["xs"])):
        # later runs draw thinner lines with their own marker: runs that coincide still show each one
        style = {"color": RUN_COLOURS[n % 8], "lw": max(0.8, 2.6 - 0.6 * n), "marker": RUN_MARKERS[n % 8]}
        for i, (key, _) in enumerate(panel.series):
            xs, ys = run.series(key, x)
            if xs:
                plot_line(ax, xs, ys, "_nolegend_", index=i, alpha=0.9, **style)
                drawn += 1
    reasons = [panel.static(r) for r in runs] if panel.static else []
    static = reasons[0] if reasons and all(reasons) else None
    if not drawn and static is None:
        plt.close(fig)
        return None
    if static:
        grey_out(ax, ("every run: " if len(runs) > 1 else "") + static)
    mark_alerts(ax, ctx["markers"])
    legend = lambda a: _style_legend(a, panel, runs, tags, ctx["markers"])  # noqa: E731
    finish(fig, ax, panel.title, ctx["xlabel"], panel.ylabel, path, legend=legend)
    return path


def _draw_all(runs: list[RunData], tags: list[str], axis: str, out: Path) -> list[tuple[ComparePanel, Path | None]]:
    plt = pyplot()
    xs = [x_positions(r, axis) for r in runs]
    ctx = {"xs": xs, "markers": _markers(runs, tags, xs), "xlabel": X_AXES[axis].label}
    return [(p, draw_panel(plt, p, runs, tags, ctx, out / name)) for p, name in zip(PANELS, chart_names())]


def chart_names() -> list[str]:
    """The PNG file name of each panel's chart."""
    return [f"{i:02d}_{p.title.split()[0].lower().replace('-', '_')}.png" for i, p in enumerate(PANELS)]


def _runs_table(runs: list[RunData], tags: list[str]) -> str:
    rows = [
        [
            t,
            r.name,
            str(r.cfg("recipe", r.source)),
            str(r.cfg("data.task", "?")),
            str(r.cfg("model.name", "?")),
            str(len(r.training_rows)),
            outcome_line(r.outcome) or "",
            str(r.path),
        ]
        for t, r in zip(tags, runs)
    ]
    return table(["", "run", "recipe", "task", "model", "steps", "ended", "path"], rows)


def _alerts_table(runs: list[RunData], tags: list[str]) -> str:
    rows = []
    for tag, run in zip(tags, runs):
        for i, a in enumerate(run.alerts, 1):
            sev = a.get("severity", "?")
            rows.append(
                [
                    f"{tag}{i}",
                    f"<span class='{esc(sev)}'>{esc(sev)}</span>",
                    esc(a.get("mode", "?")),
                    esc(a.get("step", "?")),
                    esc(a.get("message", "")),
                ]
            )
    if not rows:
        return "<p>No run raised an alert.</p>"
    return table(["alert", "severity", "mode", "onset step", "message"], rows, raw=True)


def _chart_html(panel: ComparePanel, png: Path | None) -> str:
    if png is None:
        needs = esc(", ".join(k for k, _ in panel.series))
        return f"<h3>{esc(panel.title)}</h3><p class='note'><i>no run logs {needs}</i></p>"
    return f"<div class='chart'>{inline_png(png, panel.title)}</div>"


def _body(runs: list[RunData], tags: list[str], axis: str, charts: list[Any], tb_dir: Path) -> list[str]:
    headers, rows = final_table(runs, tags)
    label = esc(X_AXES[axis].label)
    return [
        "<h1>grpokit compare</h1>",
        f"<p class='sub'>{len(runs)} runs on x = {label}</p>",
        "<h2>Runs</h2>",
        _runs_table(runs, tags),
        "<h2>Final figures</h2>",
        f"<p class='note'>Per-step signals: mean of each run's last {TAIL} steps. Differences are to run A.</p>",
        table(headers, rows),
        "<h2>Charts</h2>",
        "<p class='note'>One colour per run; line styles tell a chart's signals apart; dotted vertical lines "
        "are alert onsets in the run's colour (A2: run A's second alert).</p>",
        *(_chart_html(panel, png) for panel, png in charts),
        "<h2>Alerts</h2>",
        _alerts_table(runs, tags),
        "<h2>TensorBoard</h2>",
        f"<p>Same tags in every run, step = {label}: <code>tensorboard --logdir {esc(tb_dir)}</code></p>",
    ]


def make_compare(paths: list[str | Path], axis: str = "tokens", out: str | Path | None = None) -> Path:
    """Write compare.html, PNGs and `tb/` into `out` (default comparisons/compare-<stamp>); returns the HTML path.
    ValueError (one line naming the run and the fix) for an unreadable path or an axis a run does not log."""
    if axis not in X_AXES:
        raise ValueError(f"--x {axis!r}: unknown x axis; choose one of {', '.join(X_AXES)}")
    runs = [r for p in paths for r in load_runs(p)]
    if not runs:
        raise ValueError("no run to compare: pass run directories or logs")
    tags = run_tags(len(runs))
    for r in runs:
        x_positions(r, axis)  # fail early, naming the run, when the axis metric is not logged
    # beside runs/, not in it: `grpokit doctor runs/` never reads a comparison's copies as runs
    out_dir = Path(out) if out else Path("comparisons") / f"compare-{time.strftime('%Y%m%d-%H%M%S')}"
    prepare_output(out_dir, "compare", [*chart_names(), "compare.html", "tb"])  # never what grpokit did not write
    charts = _draw_all(runs, tags, axis, out_dir)
    tb_dir = write_tensorboard(runs, tags, axis, out_dir)
    html_path = out_dir / "compare.html"
    html_path.write_text(page("grpokit compare", _body(runs, tags, axis, charts, tb_dir)))
    return html_path
