"""Matplotlib helpers shared by `grpokit report` and `grpokit compare`: shaded skipped steps, numbered alert
markers with a legend, greyed charts that say why they cannot move, labelled axes, legends outside the plot."""

from __future__ import annotations

import math
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SEVERITY_COLOURS = {"critical": "#d62728", "warning": "#ff7f0e", "info": "#1f77b4"}
GREY_FACE = "#ececec"
SKIP_COLOUR = "#b0b0b0"


@dataclass(frozen=True)
class Marker:
    """One alert drawn on a chart: `x` on the chart's axis, a short `tag` (A1, B2) and the legend `label`."""

    x: float
    tag: str
    label: str
    colour: str
    style: str = "--"


def pyplot() -> Any:
    """matplotlib.pyplot on the non-interactive Agg backend; without matplotlib, a ValueError saying how to get it."""
    try:
        import matplotlib
    except ImportError:
        raise ValueError(
            "the report's charts need matplotlib, which is not installed: pip install matplotlib "
            "(grpokit doctor PATH gives the diagnosis without it)"
        ) from None

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


FIG_WIDTH = 11.0
# fixed axes box (fractions of the figure): every chart's plot area has the same x extent, so charts stacked on
# a page line up; the legend goes in the space on the right
AXES_BOX = {"left": 0.075, "right": 0.64, "top": 0.9, "bottom": 0.15}


def new_figure(plt: Any, height: float = 3.4) -> tuple[Any, Any]:
    fig, ax = plt.subplots(figsize=(FIG_WIDTH, height), dpi=100)
    fig.subplots_adjust(**AXES_BOX)
    return fig, ax


def spans(steps: list[int]) -> list[tuple[int, int]]:
    """Runs of consecutive steps as (first, last) pairs."""
    out: list[tuple[int, int]] = []
    for s in sorted(steps):
        if out and s == out[-1][1] + 1:
            out[-1] = (out[-1][0], s)
        else:
            out.append((s, s))
    return out


def shade_skipped(ax: Any, steps: list[int]) -> None:
    """Grey bands over steps whose update was skipped (one legend entry for all of them)."""
    for i, (a, b) in enumerate(spans(steps)):
        label = f"skipped update ({len(steps)} steps: no gradient step)" if i == 0 else None
        ax.axvspan(a - 0.5, b + 0.5, color=SKIP_COLOUR, alpha=0.35, lw=0, label=label, zorder=0)


def mark_alerts(ax: Any, markers: list[Marker]) -> None:
    """A vertical line per alert onset, its tag written at the top of the chart, one legend entry each."""
    for i, m in enumerate(markers):
        ax.axvline(m.x, color=m.colour, ls=m.style, lw=1.2, alpha=0.85, label=m.label, zorder=3)
        ax.annotate(  # tags of nearby alerts are staggered so they do not print over each other
            m.tag,
            (m.x, 1.0),
            xycoords=("data", "axes fraction"),
            xytext=(2, -10 - 9 * (i % 3)),
            textcoords="offset points",
            fontsize=7,
            color=m.colour,
        )


def grey_out(ax: Any, reason: str) -> None:
    """A chart that cannot move: grey background, lines greyed, the reason written across it."""
    ax.set_facecolor(GREY_FACE)
    for line in ax.get_lines():
        line.set_color("#888888")
    ax.text(
        0.5,
        0.5,
        "\n".join(textwrap.wrap(reason, 80)),
        transform=ax.transAxes,
        ha="center",
        va="center",
        fontsize=9,
        color="#444444",
        bbox={"facecolor": "white", "alpha": 0.85, "edgecolor": "#999999"},
        zorder=5,
    )


LINE_STYLES = ("-", "--", "-.", ":")


def plot_line(ax: Any, xs: list[float], ys: list[float], label: str, index: int = 0, **kw: Any) -> None:
    """A line with point markers when it is short or sparse (a held-out accuracy logged every N steps); the
    `index`-th line of a chart gets its own dash pattern, so lines that coincide stay visible."""
    finite_n = sum(math.isfinite(y) for y in ys)
    kw.setdefault("ls", LINE_STYLES[index % len(LINE_STYLES)])
    marker = kw.pop("marker", "o")
    ax.plot(xs, ys, marker=marker if finite_n < 40 else None, ms=3, label=label, **kw)


def _legend_rank(label: str) -> int:
    """Data and reference lines first, then the skipped-step band, then alert markers."""
    if label.startswith("skipped update"):
        return 1
    if len(label) > 1 and label[0].isalpha() and label[0].isupper() and label[1].isdigit():
        return 2
    return 0


def finish(
    fig: Any,
    ax: Any,
    title: str,
    xlabel: str,
    ylabel: str,
    path: Path,
    ylim: tuple[Any, Any] = (None, None),
    legend: Callable[[Any], None] | None = None,
) -> Path:
    """Title, labelled axes, grid, legend outside on the right (or `legend(ax)`); saves the PNG, closes the
    figure."""
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    if ylim != (None, None):
        ax.set_ylim(*ylim)
    if legend is not None:
        legend(ax)
        fig.savefig(path)
        _close(fig)
        return path
    handles, labels = ax.get_legend_handles_labels()
    order = sorted(range(len(labels)), key=lambda i: _legend_rank(labels[i]))
    handles, labels = [handles[i] for i in order], [labels[i] for i in order]
    if handles:
        ax.legend(handles, labels, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    fig.savefig(path)
    _close(fig)
    return path


def _close(fig: Any) -> None:
    import matplotlib.pyplot as plt

    plt.close(fig)
