"""`grpokit report PATH`: a self-contained HTML page plus PNG plots of a run's health, with alert markers.

Works on any log `readers.py` understands; panels whose signals the log lacks say so instead of being drawn.
"""

from __future__ import annotations

import base64
import html
import json
import math
from pathlib import Path
from typing import Any

from .doctor import diagnose
from .readers import read_run

# panel title -> [(metric, label)], optional horizontal reference line
PANELS: list[tuple[str, list[tuple[str, str]], float | None]] = [
    (
        "Reward and accuracy",
        [("reward/mean", "reward"), ("reward/accuracy", "train accuracy"), ("eval/accuracy", "held-out accuracy")],
        None,
    ),
    ("Token entropy (nats)", [("entropy/token_mean", "entropy")], 0.5),
    (
        "KL to reference",
        [("kl_ref/k3", "k3"), ("kl_ref/k1", "k1"), ("actor/kl_loss", "KL loss"), ("kl_init/k3", "k3 to initial model")],
        None,
    ),
    (
        "Zero-variance groups",
        [("zv/frac", "all (reward)"), ("zv/all_correct", "all correct"), ("zv/all_wrong", "all wrong")],
        None,
    ),
    (
        "Response length",
        [("length/mean", "mean"), ("length/correct_mean", "correct"), ("length/incorrect_mean", "incorrect")],
        None,
    ),
    (
        "Clip fractions",
        [
            ("actor/clipfrac_low", "low"),
            ("actor/clipfrac_high", "high"),
            ("actor/clipfrac_dual", "dual"),
            ("actor/clipfrac", "any"),
        ],
        None,
    ),
    ("Truncation rate", [("length/truncation_rate", "truncated")], None),
    ("Throughput", [("perf/tokens_per_s", "tokens/s"), ("time/step", "s/step")], None),
]


def _series(rows: list[dict[str, Any]], key: str) -> tuple[list[float], list[float]]:
    xs, ys = [], []
    for r in rows:
        v = r.get(key)
        if isinstance(v, (int, float)) and math.isfinite(float(v)):
            xs.append(float(r["step"]))
            ys.append(float(v))
    return xs, ys


def make_report(path: str | Path, out: str | Path | None = None, run: str | None = None) -> Path:
    """Write `report.html` and one PNG per panel into `out` (default: PATH/report); returns the HTML path. `run`
    picks one run when PATH holds several."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    log = read_run(path, run)
    diag = diagnose(path, run=run)
    src = Path(path)
    out_dir = Path(out) if out else (src if src.is_dir() else src.parent) / "report"
    out_dir.mkdir(parents=True, exist_ok=True)
    colours = {"critical": "#d62728", "warning": "#ff7f0e", "info": "#1f77b4"}
    figures = []
    for i, (title, series, ref) in enumerate(PANELS):
        drawn = [(label, *_series(log.rows, key)) for key, label in series]
        drawn = [d for d in drawn if d[1]]
        if not drawn:
            figures.append((title, None))
            continue
        fig, ax = plt.subplots(figsize=(7, 3.2), dpi=110)
        for label, xs, ys in drawn:
            ax.plot(xs, ys, marker="o" if len(xs) < 40 else None, ms=3, label=label)
        if ref is not None:
            ax.axhline(ref, color="grey", ls="--", lw=1, label=f"{ref} nats")
        for a in diag["alerts"]:
            ax.axvline(a["step"], color=colours.get(a["severity"], "k"), lw=1, alpha=0.6)
        ax.set_title(title)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        png = out_dir / f"{i:02d}_{title.split()[0].lower()}.png"
        fig.savefig(png)
        plt.close(fig)
        figures.append((title, png))
    run_label = f" [{html.escape(diag['run'])}]" if diag.get("run") else ""
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>grpokit report</title>",
        "<style>body{font-family:sans-serif;max-width:980px;margin:auto}img{max-width:100%}"
        ".critical{color:#d62728}.warning{color:#b35c00}.info{color:#1f77b4}</style></head><body>",
        f"<h1>grpokit report</h1><p>{html.escape(str(path))}{run_label} — {diag['source']} log, "
        f"{diag['steps']} steps</p>",
        f"<h2>Diagnosis</h2><p><b>verdict: {html.escape(diag.get('verdict', ''))}</b></p>",
    ]
    for f in diag.get("findings", []):
        parts.append(f"<p class='{f['severity']}'>{f['severity'].upper()} {html.escape(f['message'])}</p>")
    if not diag["alerts"]:
        parts.append("<p>No failure mode detected.</p>")
    for a in diag["alerts"]:
        parts.append(
            f"<p class='{a['severity']}'><b>{a['severity'].upper()} {html.escape(a['mode'])}</b> since step "
            f"{a['step']}: {html.escape(a['message'])}<br>evidence: {html.escape(json.dumps(a['evidence']))}"
            + (
                f"<br>now (step {a['current']['step']}): {html.escape(a['current']['message'])}"
                if a.get("current") and a["current"].get("step") != a["fired_at"]
                else ""
            )
            + f"<br>change: {html.escape(a['fix'])}</p>"
        )
    if diag["not_measurable"]:
        items = "".join(
            f"<li>{html.escape(k)}: needs {html.escape(', '.join(v))}</li>" for k, v in diag["not_measurable"].items()
        )
        parts.append(f"<p>Not measurable from this log:</p><ul>{items}</ul>")
    parts.append("<h2>Signals</h2><p>Vertical lines mark alert onsets.</p>")
    for title, png in figures:
        if png is None:
            parts.append(f"<h3>{html.escape(title)}</h3><p><i>not logged</i></p>")
        else:
            b64 = base64.b64encode(png.read_bytes()).decode()
            parts.append(
                f"<h3>{html.escape(title)}</h3><img alt='{html.escape(title)}' src='data:image/png;base64,{b64}'>"
            )
    parts.append("</body></html>")
    page = out_dir / "report.html"
    page.write_text("\n".join(parts))
    return page
