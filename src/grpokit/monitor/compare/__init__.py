"""`grpokit compare RUN...`: runs overlaid on one page, on a tokens, samples, steps or seconds axis.

`page.py` (the overlays and the page), `table.py` (final figures and their differences), `tensorboard.py` (the same
tags for every run, for TensorBoard). It draws with `grpokit.monitor.report`'s plotting and HTML helpers.
"""

from .page import make_compare

__all__ = ["make_compare"]
