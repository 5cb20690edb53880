"""Small HTML builders shared by `grpokit report` and `grpokit compare`: a self-contained page (PNGs inlined as
base64), tables, escaped text (HTML-escaped, and its control characters made visible by `common.safe_text`, so the
page is also safe to `cat` in a terminal)."""

from __future__ import annotations

import base64
import html
from pathlib import Path

from ...common.safe_text import safe_text

STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;max-width:1080px;margin:auto;padding:0 16px;
 color:#222}
h1{margin-bottom:4px} h2{border-bottom:1px solid #ddd;padding-bottom:4px;margin-top:32px}
img{max-width:100%} .sub{color:#666;margin-top:0}
table{border-collapse:collapse;margin:8px 0;font-size:14px}
td,th{border:1px solid #ddd;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f4f4f4} table.summary th{width:210px}
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.critical{color:#d62728}.warning{color:#b35c00}.info{color:#1f77b4}
.chart{margin:12px 0 24px} .chart.static h3{color:#777} .note{color:#666;font-size:13px;margin:2px 0}
.completion{white-space:pre-wrap;font-family:ui-monospace,monospace;font-size:12px;max-width:460px}
.good{color:#2a7d2a}.bad{color:#b02a2a}
.verdict{font-size:17px;padding:8px 12px;border-left:5px solid currentColor;background:#fafafa}
"""


def esc(value: object) -> str:
    return html.escape(safe_text(value, limit=None, multiline=True))


def page(title: str, body: list[str]) -> str:
    head = f"<!doctype html><html><head><meta charset='utf-8'><title>{esc(title)}</title><style>{STYLE}</style>"
    return head + "</head><body>\n" + "\n".join(body) + "\n</body></html>\n"


def table(headers: list[str], rows: list[list[str]], cls: str = "", raw: bool = False) -> str:
    """A table; cells are escaped unless `raw` (then the caller escaped them)."""
    cell = (lambda v: v) if raw else esc
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{cell(v)}</td>" for v in row) + "</tr>" for row in rows)
    return f"<table class='{cls}'><tr>{head}</tr>{body}</table>"


def key_value_table(rows: list[tuple[str, str]], cls: str = "summary") -> str:
    body = "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in rows)
    return f"<table class='{cls}'>{body}</table>"


def inline_png(path: Path, alt: str) -> str:
    b64 = base64.b64encode(path.read_bytes()).decode()
    return f"<img alt='{esc(alt)}' src='data:image/png;base64,{b64}'>"
