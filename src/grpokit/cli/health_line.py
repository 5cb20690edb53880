"""The health line: one compact line of a step's §17 signals that fits `WIDTH` columns for every recipe.

Fields (docs/diagnosis.md, "The health line"; `grpokit train --help`), most important first; a field the step
does not log is left out, and when a line would still pass `WIDTH` columns the fields of `DROP_ORDER` are left out,
least important first, until it fits.
"""

from __future__ import annotations

import math
from typing import Any

from rich.cells import cell_len

from .. import metric_names as mn
from ..common.safe_text import safe_text

WIDTH = 100  # columns: the line never wraps in a 100-column terminal or log viewer
SEP = "  "
DROP_ORDER = ("time", "len", "clip", "H", "turns")  # left out in this order while a line is wider than WIDTH


def _finite(x: Any) -> float | None:
    """`x` as a float, None when it is missing or not finite."""
    if x is None:
        return None
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def num(x: Any) -> str:
    """A number in at most 6 characters: 0.84, -0.58, 12.3, 1234, 1.2e+05; `–` when missing or not finite."""
    v = _finite(x)
    if v is None:
        return "–"
    a = abs(v)
    if a < 10:
        return f"{v:.2f}"
    if a < 100:
        return f"{v:.1f}"
    if a < 10000:
        return f"{v:.0f}"
    return f"{v:.0e}"


def pct(x: Any, decimals: int = 0) -> str:
    """A share as a percentage: 0.91 -> 91%."""
    v = _finite(x)
    return "–" if v is None else f"{v:.{decimals}%}"


def clip_pct(x: Any) -> str:
    """A clip fraction as a percentage: 1 decimal below 10% (0.3%, 3.1%), none above (13%)."""
    v = _finite(x)
    return "–" if v is None else pct(v, 1 if v < 0.1 else 0)


def small(x: Any) -> str:
    """A small non-negative quantity such as a KL: 4 decimals below 1, else `num`."""
    v = _finite(x)
    if v is None:
        return "–"
    return f"{v:.4f}" if abs(v) < 1 else num(v)


def duration(seconds: Any) -> str:
    """Seconds as 4.1s, 41s, 2m03s, 1h02m, 2d03h."""
    v = _finite(seconds)
    if v is None or v < 0:
        return "–"
    if v < 10:
        return f"{v:.1f}s"
    s = int(round(v))
    if s < 100:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"


def _fields(step: int, total: int, m: dict[str, Any], eta: float | None, alerts: int) -> list[tuple[str, str]]:
    """(name, text) of every field this row has, in display order."""
    # zero-variance groups as the collapse detector and DAPO's filter count them, on accuracy (no correctness
    # signal): all✓ and all✗ are parts of it; on rewards (zv/frac) only for a log without accuracy
    zv = m.get(mn.ZV_ACC_FRAC) if _finite(m.get(mn.ZV_ACC_FRAC)) is not None else m.get(mn.ZV_FRAC)
    out = [
        ("step", f"step {step}/{total}"),
        ("reward", f"reward {num(m.get(mn.REWARD_MEAN))}"),
        ("acc", f"acc {pct(m.get(mn.REWARD_ACCURACY))}"),
        ("H", f"H {num(m.get(mn.ENTROPY_TOKEN_MEAN))}"),
        ("zv", f"zv {pct(zv)} all✓{pct(m.get(mn.ZV_ALL_CORRECT))} all✗{pct(m.get(mn.ZV_ALL_WRONG))}"),
    ]
    if _finite(m.get(mn.KL_REF_K3)) is not None:
        out.append(("kl", f"kl {small(m[mn.KL_REF_K3])}"))
    lo, hi = _finite(m.get(mn.ACTOR_CLIPFRAC_LOW)), _finite(m.get(mn.ACTOR_CLIPFRAC_HIGH))
    if (lo or 0.0) > 0 or (hi or 0.0) > 0:  # exactly 0 on-policy (one optimizer step per batch): left out
        out.append(("clip", f"clip {clip_pct(lo).rstrip('%')}/{clip_pct(hi)}"))
    length = _finite(m.get(mn.LENGTH_MEAN))
    out.append(("len", f"len {'–' if length is None else f'{length:.0f}'}"))
    turns = _finite(m.get(mn.EPISODE_TURNS_MEAN))
    if turns is not None:  # multi-turn runs: turns and tool calls per episode, the share of calls that failed
        calls, failed = _finite(m.get(mn.EPISODE_TOOL_CALLS_MEAN)), failed_call_share(m)
        text = f"turns {turns:.1f} calls {num(calls)}" + ("" if failed is None else f" ✗{pct(failed)}")
        out.append(("turns", text))
    rounds = _finite(m.get(mn.SAMPLING_ROUNDS))
    if rounds is not None and rounds > 1:
        out.append(("rounds", f"rounds {int(rounds)}"))
    out.append(("time", duration(m.get(mn.TIME_STEP))))
    if eta is not None:
        out.append(("eta", f"eta {duration(eta)}"))
    if alerts:
        out.append(("alerts", f"⚠{alerts}"))
    return out


def failed_call_share(m: dict[str, Any]) -> float | None:
    """Tried tool calls that did not give a result (malformed, raised, timed out) over the tried ones."""
    tried, executed = _finite(m.get(mn.EPISODE_CALL_ATTEMPTS)), _finite(m.get(mn.EPISODE_TOOL_CALLS))
    if not tried:
        return None
    parse = (_finite(m.get(mn.EPISODE_PARSE_FAIL_RATE)) or 0.0) * tried
    bad = (_finite(m.get(mn.EPISODE_TOOL_ERROR_RATE)) or 0.0) + (_finite(m.get(mn.EPISODE_TOOL_TIMEOUT_RATE)) or 0.0)
    return (parse + bad * (executed or 0.0)) / tried


def health_line(
    step: int, total: int, m: dict[str, Any], *, eta: float | None = None, alerts: int = 0, width: int = WIDTH
) -> str:
    """One line of the step's signals that matter most, at most `width` terminal columns.

    `eta`: seconds left in the run (shown as `eta ...`); `alerts`: how many alerts are active now (`⚠n`).
    """
    # every field is a number grpokit formats; escaped all the same, since the metrics row may come from a log
    fields = [(name, safe_text(text, limit=None)) for name, text in _fields(step, total, m, eta, alerts)]

    def render(left_out: set[str]) -> str:
        kept = [(name, text) for name, text in fields if name not in left_out]
        parts: list[str] = []
        for i, (name, text) in enumerate(kept):
            if name == "eta" and i and kept[i - 1][0] == "time":  # one field: `4.1s eta 2m27s`
                parts[-1] += f" {text}"
            else:
                parts.append(text)
        return SEP.join(parts)

    left_out: set[str] = set()
    dropped: list[str] = []
    for name in DROP_ORDER:  # least important first, until the line fits
        if cell_len(render(left_out)) <= width:
            break
        left_out.add(name)
        dropped.append(name)
    for name in reversed(dropped):  # then back in, most important first, each one that fits
        if cell_len(render(left_out - {name})) <= width:
            left_out.discard(name)
    return render(left_out)
