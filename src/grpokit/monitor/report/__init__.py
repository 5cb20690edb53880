"""`grpokit report PATH`: a self-contained HTML page plus one PNG per chart of a run's health.

`page.py` (the page: verdict first, summary, diagnosis, charts, completions), `summary.py` (the summary block),
`panels.py` (which charts, their units and the reasons a chart cannot move), `charts.py` (drawing them),
`plotting.py` (shaded skipped steps, alert markers, greyed charts, labelled axes), `html.py` (the page's HTML).
"""

from .page import make_report, pick_completions

__all__ = ["make_report", "pick_completions"]
