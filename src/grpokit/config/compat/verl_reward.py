"""A verl job without `custom_reward_function`: its data's `data_source` values choose grpokit's reward.

verl scores such a job with `default_compute_score`, which picks a scorer per row by `data_source`
(`grpokit.rewards.verl_sources` holds that dispatch and grpokit's counterparts). The sources are read from the
training files (`data.train_files`: verl's parquet, or JSON lines / JSON), the `data_source` column only. Data mixing
sources verl scores differently gets `verl_data_source`, which picks each row's check by its own `data_source`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ...rewards.verl_sources import verl_scorer
from .translation import Translation

COLUMN = "data_source"


def data_sources(path: str) -> set[str] | None:
    """The distinct `data_source` values of a data file, or None when it cannot be read or has no such column."""
    p = Path(path).expanduser()
    if not p.is_file():
        return None
    try:
        if p.suffix == ".parquet":
            import pyarrow.parquet as pq

            if COLUMN not in pq.read_schema(p).names:
                return None
            return {str(v) for v in pq.read_table(p, columns=[COLUMN]).column(COLUMN).to_pylist()}
        text = p.read_text(encoding="utf-8")
        rows = json.loads(text) if p.suffix == ".json" else [json.loads(ln) for ln in text.splitlines() if ln.strip()]
    except (OSError, ValueError, ImportError):
        return None
    found = {str(r[COLUMN]) for r in rows if isinstance(r, dict) and COLUMN in r}
    return found or None


def default_scorer(flat: dict[str, Any], t: Translation) -> None:
    """Set `reward.functions` to the grpokit counterpart of verl's default scorer for the data's sources: one
    built-in when every source is scored alike, else `verl_data_source` (each row by its own source, as verl)."""
    files = flat.get("data.train_files")
    files = [files] if isinstance(files, str) else list(files or [])
    if not files:
        return
    sources: set[str] = set()
    for f in files:
        found = data_sources(str(f))
        if found is None:
            t.set("data.train_files", reward__functions=["verl_data_source"])
            t.notes.append(
                f"no custom_reward_function: verl scores each row by its data_source; {f} cannot be read here, so "
                "grpokit's verl_data_source reward picks each row's check by its data_source when it trains (a "
                "source grpokit has no counterpart for fails there, naming it)"
            )
            return
        sources |= found
    try:
        scorers = {src: verl_scorer(src) for src in sorted(sources)}
    except ValueError as e:
        t.refuse(str(e), "data.train_files", lifted_by="reward.functions")
        return
    rewards = sorted({s.reward for s in scorers.values()})
    t.set("data.train_files", reward__functions=rewards if len(rewards) == 1 else ["verl_data_source"])
    if len(rewards) > 1:
        t.notes.append(
            f"the data mixes data sources verl scores differently ({', '.join(sorted(sources))}): grpokit's "
            "verl_data_source reward scores each row with the check for its own data_source, as verl does"
        )
    for src, sc in scorers.items():
        same = f": {sc.differs}" if sc.differs else " (the same check)"
        t.notes.append(
            f"no custom_reward_function: verl scores data_source {src!r} with {sc.verl_scorer} "
            f"(default_compute_score); grpokit uses its {sc.reward!r} reward{same}"
        )
