"""Forecasts on grpokit's corpus of real training logs (issue 40 item 3): hit rate, lead time, false-forecast rate.

Each corpus run (`tests/fixtures/logs/real/<run>/`, every key of its SOURCE's `truth` mapping) is read and replayed
through the doctor (`grpokit.monitor.doctor.corpus.diagnoses_by_key`: the reading and `Monitor` replay
`tests/monitor/test_real_logs.py` checks), with every registered detector, the forecasts included. Per forecast
detector and the failure it forecasts (`FAMILIES`):

- a run with a known onset is one whose truth lists the failure mode and whose matching detector raised an alert of
  that mode; the onset is that alert's `step` (the step the condition first held), the alert's `fired_at` the step
  it was confirmed. The forecast hits when its first alert fired (`fired_at`) before the onset; its lead is
  onset - that step (and alert - that step: how much sooner than the alert itself the user heard of it);
- a healthy run, for that family, is one whose truth does not list the failure mode and whose log has the signal the
  forecast reads (the forecast is not in the diagnosis' "not measurable" list); every forecast alert there is a
  false forecast, counted per 1,000 logged training rows of those runs.

    .venv/bin/python bench/forecast.py                    # the table on stdout (markdown)
    .venv/bin/python bench/forecast.py --runs trl_grpo_finance_sparse_reward_collapse verl_ppo_gsm8k_converged

Reads logs only (no torch).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grpokit.monitor.doctor.corpus import corpus_runs, diagnoses_by_key, read_source

CORPUS = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "logs" / "real"

# (forecast detector, the detector of the failure it forecasts, that failure's mode)
FAMILIES = (
    ("entropy_forecast", "entropy_collapse", "entropy collapse"),
    ("zero_variance_forecast", "advantage_collapse", "advantage collapse"),
    ("kl_forecast", "kl_drift", "KL drift"),
)


@dataclass(frozen=True)
class Run:
    """One corpus run: its directory, truth key, true failure modes and the doctor's diagnosis."""

    name: str
    key: str
    modes: frozenset[str]
    diagnosis: dict[str, Any]


@dataclass(frozen=True)
class Onset:
    """A failing run with a known onset: the failure's onset and alert steps, and the first forecast's step (None:
    no forecast fired before the onset)."""

    run: str
    onset: int
    alerted: int
    forecast: int | None
    first_step: int  # the run's first logged training step: onset - first_step steps were logged before the onset

    @property
    def hit(self) -> bool:
        return self.forecast is not None

    @property
    def lead(self) -> int | None:
        return None if self.forecast is None else self.onset - self.forecast

    @property
    def lead_over_alert(self) -> int | None:
        return None if self.forecast is None else self.alerted - self.forecast


@dataclass
class Score:
    """One forecast detector over the corpus."""

    forecast: str
    mode: str
    onsets: list[Onset] = field(default_factory=list)
    no_onset: list[str] = field(default_factory=list)  # truth lists the mode, but no alert of it: onset unknown
    healthy_runs: int = 0
    healthy_steps: int = 0
    false_forecasts: int = 0
    false_runs: list[str] = field(default_factory=list)
    after_onset: dict[str, int] = field(default_factory=dict)  # forecasts fired at or after the onset, per run

    @property
    def hits(self) -> int:
        return sum(o.hit for o in self.onsets)

    @property
    def false_per_1000(self) -> float | None:
        return None if self.healthy_steps == 0 else 1000.0 * self.false_forecasts / self.healthy_steps


def read_runs(root: Path = CORPUS, names: list[str] | None = None) -> list[Run]:
    """Every truth key of the corpus runs `names` (all when None), with the doctor's diagnosis of it."""
    out = []
    for name in names or corpus_runs(root):
        truth = read_source(root / name)["truth"]
        diags = diagnoses_by_key(root / name)
        for key, want in truth.items():
            if key in diags:
                out.append(Run(name, key, frozenset(want["modes"]), diags[key]))
    return out


def _alerts(run: Run, detector: str, mode: str | None = None) -> list[dict[str, Any]]:
    return [a for a in run.diagnosis["alerts"] if a["detector"] == detector and (mode is None or a["mode"] == mode)]


def run_first_step(run: Run) -> int:
    first = run.diagnosis.get("first_step")
    return int(first) if first is not None else 0


def score(runs: list[Run]) -> list[Score]:
    """Hit rate and leads on the runs with a known onset, false forecasts on the healthy ones, per forecast."""
    scores = []
    for forecast, detector, mode in FAMILIES:
        s = Score(forecast, mode)
        for run in runs:
            label = f"{run.name} `{run.key}`"
            fired = sorted(a["fired_at"] for a in _alerts(run, forecast))
            if mode in run.modes:
                alerts = _alerts(run, detector, mode)
                if not alerts:
                    s.no_onset.append(label)
                    continue
                first = min(alerts, key=lambda a: a["step"])
                before = [f for f in fired if f < first["step"]]
                s.after_onset[label] = len(fired) - len(before)
                s.onsets.append(
                    Onset(label, first["step"], first["fired_at"], before[0] if before else None, run_first_step(run))
                )
            elif forecast not in run.diagnosis.get("not_measurable", {}) and run.diagnosis["steps"] > 0:
                s.healthy_runs += 1
                s.healthy_steps += run.diagnosis["steps"]
                s.false_forecasts += len(fired)
                if fired:
                    s.false_runs.append(label)
        scores.append(s)
    return scores


def table(scores: list[Score]) -> str:
    """The summary table (markdown), one row per forecast detector."""
    lines = [
        "| forecast | failure | runs with a known onset | hits (forecast before onset) | lead, steps (onset - "
        "forecast) | healthy runs (signal logged) | healthy rows | false forecasts | per 1,000 rows |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for s in scores:
        leads = [o.lead for o in s.onsets if o.lead is not None]
        if not s.onsets:
            hits, lead = "no run in the corpus", "—"
        else:
            hits = f"{s.hits} of {len(s.onsets)}"
            lead = ", ".join(str(x) for x in leads) if leads else "—"
        rate = "—" if s.false_per_1000 is None else f"{s.false_per_1000:.1f}"
        lines.append(
            f"| `{s.forecast}` | {s.mode} | {len(s.onsets)} | {hits} | {lead} | {s.healthy_runs} | "
            f"{s.healthy_steps} | {s.false_forecasts} | {rate} |"
        )
    return "\n".join(lines)


def detail(scores: list[Score]) -> str:
    """Each run with a known onset (onset, alert, first forecast, leads), the runs with no known onset, and the
    healthy runs that had a false forecast."""
    lines = [
        "| forecast | run | first logged step | onset step | alert step | first forecast | lead over onset | "
        "lead over alert | forecasts after onset |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for s in scores:
        for o in s.onsets:
            f = "none before onset" if o.forecast is None else str(o.forecast)
            lead = "—" if o.lead is None else str(o.lead)
            over = "—" if o.lead_over_alert is None else str(o.lead_over_alert)
            later = s.after_onset.get(o.run, 0)
            lines.append(
                f"| `{s.forecast}` | {o.run} | {o.first_step} | {o.onset} | {o.alerted} | {f} | {lead} | {over} | "
                f"{later} |"
            )
    extra = []
    for s in scores:
        if s.no_onset:
            extra.append(
                f"- `{s.forecast}`: {s.mode} in the truth but no alert of it (onset unknown): " + ", ".join(s.no_onset)
            )
        if s.false_runs:
            extra.append(f"- `{s.forecast}`: false forecasts on " + ", ".join(s.false_runs))
    return "\n".join(lines + ([""] + extra if extra else []))


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--runs", nargs="*", help="corpus run directories (default: all)")
    args = p.parse_args(argv)
    scores = score(read_runs(CORPUS, args.runs))
    print(table(scores))
    print()
    print(detail(scores))


if __name__ == "__main__":
    main()
