"""Detection latency (issue 40 item 2): each failure mode spliced into real healthy logs at a known step, fed to the
detectors as `grpokit watch` feeds them, at logging intervals 1, 5 and 10; rlwatch 0.5.1 on the same rows.

The healthy logs are the corpus runs (`tests/fixtures/logs/real/<run>/`, SOURCE `truth`) whose truth lists no failure
mode (only "converged / saturated" / "convergence", which are no failure) and that trained. Those with at least
`MIN_BASE_ROWS` training steps are the bases of the splices; every healthy run counts for the false-alarm rates.

A splice keeps the base's rows before the onset step k (`k = first step + max(20, n // 2) + 3`: half the run is
healthy history, and k falls between the rows logged every 5 or 10 steps, as a real onset does) and from k on bends
the base's own signals into one failure (`INJECTIONS`): abrupt ones (entropy to 2% of itself, KL x10 rising to
x1000 in 10 steps, every advantage 0, loss and gradient norm NaN, gradient norm x100, length to 5% with the reward at
its early low, 95% of responses truncated, entropy above 6 nats) and slow drifts (entropy falling linearly to 2% of
itself over 60 steps, KL rising x100 over 60 steps), for `SEGMENT` steps; past the base's last row the other
signals repeat the base's rows mirrored (its values, in reverse, then forward again). The bending is done on the
trainer's own metric names (the raw rows the reader parsed), so grpokit reads them through its reader's mapper
(`readers.canonicalise`: a NaN loss or gradient norm sets the non-finite flag, as in a real log) and rlwatch gets the
very dicts its hook would.

Logging interval i keeps the steps divisible by i (steps keep their numbers, as TRL's `logging_steps` and verl's
`log_freq` log). grpokit: every row, in canonical names with NaN where the row lacks a signal the log records
(`canonicalise` of the rows kept: the rows `grpokit watch` feeds, `follow.py`), goes to `Monitor(context).observe`
in step order, and the alerts are read off the monitor. rlwatch: `bench/vs_rlwatch.py`'s `run_rlwatch` through the
hook the trainer would use (verl: its tracker; SkyRL has no rlwatch integration), its alerts mapped to grpokit's
modes by `RLWATCH_MODES`.

Per failure mode and interval: the steps from onset to the first alert of the detector that owns the mode (any
severity; also to its first critical) and the logged rows from onset to it (1 = the first row logged at or after
the onset; target <= 2). For the slow drifts the onset is the threshold crossing (the first step at which the
failure's own definition holds: entropy below 0.5 nats, or below 10% of its first 10 values where it started
below 0.5; KL above 0.5, or above 3x its first value where that was already above 0.5), and the forecast
(`monitor/detectors/forecast.py`) hits when it fired at or after the drift began and before the alert; its lead is
counted over the crossing and over the alert. False alarms: every alert on the healthy runs whose mode their truth
does not list, per 1,000 training steps the kept rows cover, split warning / critical (forecasts, warnings by
design, also counted on their own).

    .venv/bin/python bench/latency.py                           # tables on stdout (markdown)
    .venv/bin/python bench/latency.py --out /tmp/latency.md     # and written to a file
    .venv/bin/python bench/latency.py --no-rlwatch              # grpokit only

Reads logs only (no torch); rlwatch from `pip install -e .[bench]` (rlwatch==0.5.1).
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import tempfile
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grpokit import metric_names as mn
from grpokit.monitor.detectors import Monitor
from grpokit.monitor.doctor.corpus import corpus_runs, read_source, split_run_key
from grpokit.monitor.doctor.facts import is_training_row, present
from grpokit.monitor.readers import READERS, discover
from grpokit.monitor.readers.canonical import Mapper, canonicalise

sys.path.insert(0, str(Path(__file__).resolve().parent))
from vs_rlwatch import RLWATCH_MODES, integration_of, run_rlwatch  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO / "tests" / "fixtures" / "logs" / "real"
COMMAND = ".venv/bin/python bench/latency.py --out /tmp/latency.md"
INTERVALS = (1, 5, 10)
MIN_BASE_ROWS = 30
NO_FAILURE = frozenset({"converged / saturated", "convergence"})
TRAINED = ("no failure mode", "converged")  # truth verdicts of runs that trained without a failure
SEGMENT = {"abrupt": 80, "slow": 120}  # steps of failure spliced in from the onset


@dataclass
class Base:
    """A healthy corpus run: its raw rows (the trainer's names), the reader's mapper and context, truth modes."""

    run: str
    key: str
    raw: dict[int, dict[str, float]]
    mapper: Mapper
    context: dict[str, Any]
    trainer: str
    truth: frozenset[str]

    @property
    def steps(self) -> list[int]:
        return sorted(self.raw)

    def names_of(self, signal: str) -> list[str]:
        """The log's raw names the reader maps to the canonical `signal`."""
        names = {k for r in self.raw.values() for k in r}
        return sorted(n for n, canon in self.mapper(names).items() if signal in canon)

    def logs(self, *signals: str) -> bool:
        return any(self.names_of(s) for s in signals)


def _segment(run_dir: Path, key: str) -> Any:
    file, suffix = split_run_key(key)
    found = discover(run_dir / file)
    if not found:
        return None
    _, reader, files = found[0]
    return next((s for s in READERS[reader].read(files) if s.name == suffix), None)


def read_base(run_dir: Path, key: str, trainer: str, truth: frozenset[str] = frozenset()) -> Base | None:
    """The run a truth key names under `run_dir` (`""`: the run directory itself), its training steps only."""
    seg = _segment(run_dir, key)
    if seg is None:
        return None
    rows, _, _ = canonicalise(seg.raw, seg.mapper)
    keep = {int(r["step"]) for r in rows if is_training_row(present(r))}
    raw = {s: dict(v) for s, v in seg.raw.items() if s in keep}
    return Base(run_dir.name, key, raw, seg.mapper, dict(seg.context), trainer, truth) if raw else None


def healthy_runs(root: Path = CORPUS, names: list[str] | None = None) -> list[Base]:
    """Every truth entry of the corpus that trained and has no failure mode, its training steps only."""
    out = []
    for name in names or corpus_runs(root):
        src = read_source(root / name)
        for key, want in src["truth"].items():
            if not set(want["modes"]) <= NO_FAILURE or not str(want["verdict"]).startswith(TRAINED):
                continue
            base = read_base(root / name, key, str(src.get("trainer", "")), frozenset(want["modes"]))
            if base is not None:
                out.append(base)
    return out


# ------------------------------------------------------------------------------------------------- injections

KL = (mn.KL_REF_K3, mn.KL_REF_K1, mn.ACTOR_KL_LOSS)
ZV = (mn.ZV_ACC_FRAC, mn.ZV_FRAC, mn.ZV_SAMPLE_FRAC)


@dataclass(frozen=True)
class Injection:
    """One failure bent into a base from step k: `bend(row, t, ref)` changes the raw row of step k + t in place."""

    name: str
    detector: str  # the detector that owns the failure
    modes: tuple[str, ...]  # its modes that name this failure (the first is the failure's)
    kind: str  # "abrupt" (fails from k) or "slow" (fails from its threshold crossing)
    needs: tuple[str, ...]  # canonical signals, one of which the base must log
    what: str
    forecast: str | None = None


def _bend(base: Base, row: dict[str, float], signals: tuple[str, ...], f: Callable[[float], float]) -> None:
    for s in signals:
        for n in base.names_of(s):
            if n in row and isinstance(row[n], (int, float)) and math.isfinite(row[n]):
                row[n] = f(row[n])


def _set(base: Base, row: dict[str, float], signals: tuple[str, ...], v: float) -> None:
    for s in signals:
        for n in base.names_of(s):
            if n in row:
                row[n] = v


INJECTIONS = (
    Injection(
        "entropy collapse",
        "entropy_collapse",
        ("entropy collapse", "low entropy", "convergence"),
        "abrupt",
        (mn.ENTROPY_TOKEN_MEAN,),
        "token entropy to 2% of its value from k",
    ),
    Injection(
        "entropy drift",
        "entropy_collapse",
        ("entropy collapse", "low entropy", "convergence"),
        "slow",
        (mn.ENTROPY_TOKEN_MEAN,),
        "token entropy falling linearly to 2% of its value over 60 steps",
        "entropy_forecast",
    ),
    Injection(
        "entropy explosion",
        "entropy_explosion",
        ("entropy explosion",),
        "abrupt",
        (mn.ENTROPY_TOKEN_MEAN,),
        "token entropy to max(6 nats, 10x) from k",
    ),
    Injection("KL blow-up", "kl_drift", ("KL drift",), "abrupt", KL, "KL x10 at k, rising to x1000 by k+10"),
    Injection(
        "KL drift", "kl_drift", ("KL drift",), "slow", KL, "KL rising x100 (geometrically) over 60 steps", "kl_forecast"
    ),
    Injection(
        "advantage collapse",
        "advantage_collapse",
        ("advantage collapse",),
        "abrupt",
        (*ZV, mn.ADV_MAX, mn.REWARD_MAX),
        "every group zero-variance from k: zero-variance fraction 1, advantages 0, reward min = max = mean",
    ),
    Injection(
        "NaN loss / grad norm",
        "numerical",
        ("numerical trouble",),
        "abrupt",
        (mn.TRAIN_GRAD_NORM, mn.ACTOR_LOSS),
        "loss and gradient norm NaN from k",
    ),
    Injection(
        "grad-norm spike",
        "numerical",
        ("numerical trouble",),
        "abrupt",
        (mn.TRAIN_GRAD_NORM,),
        "gradient norm x100 from k",
    ),
    Injection(
        "length collapse",
        "length_bias",
        ("length collapse",),
        "abrupt",
        (mn.LENGTH_MEAN,),
        "response length to 5% (at least 1 token) from k, the reward at the lowest of its first 5 values",
    ),
    Injection(
        "truncation",
        "truncation",
        ("truncation",),
        "abrupt",
        (mn.LENGTH_TRUNCATION_RATE,),
        "95% of responses at the length cap from k (mean length at the run's longest)",
    ),
)


@dataclass(frozen=True)
class Ref:
    """Reference values of a base: the lowest of its first 5 rewards and its longest response."""

    low_reward: float
    max_len: float


def _reference(base: Base) -> Ref:
    def vals(signal: str) -> list[float]:
        out = []
        for s in base.steps:
            for n in base.names_of(signal):
                v = base.raw[s].get(n)
                if isinstance(v, (int, float)) and math.isfinite(v):
                    out.append(float(v))
                    break
        return out

    rewards, lmax, lmean = vals(mn.REWARD_MEAN), vals(mn.LENGTH_MAX), vals(mn.LENGTH_MEAN)
    return Ref(min(rewards[:5]) if rewards else math.nan, max(lmax or lmean or [math.nan]))


def bend(inj: Injection, base: Base, row: dict[str, float], t: int, ref: Ref) -> None:
    """Row of step k + t bent into the failure (in place, on the trainer's names)."""
    n = inj.name
    if n == "entropy collapse":
        _bend(base, row, (mn.ENTROPY_TOKEN_MEAN,), lambda v: 0.02 * v)
    elif n == "entropy drift":
        _bend(base, row, (mn.ENTROPY_TOKEN_MEAN,), lambda v: v * max(0.02, 1 - t / 60))
    elif n == "entropy explosion":
        _bend(base, row, (mn.ENTROPY_TOKEN_MEAN,), lambda v: max(6.0, 10 * v))
    elif n == "KL blow-up":
        _bend(base, row, KL, lambda v: max(v, 1e-3) * 10 ** (1 + 2 * min(1.0, t / 10)))
    elif n == "KL drift":
        _bend(base, row, KL, lambda v: max(v, 1e-3) * 100 ** min(1.0, t / 60))
    elif n == "advantage collapse":
        _set(base, row, ZV, 1.0)
        _set(base, row, (mn.ADV_MAX, mn.ADV_MIN), 0.0)
        mean = next((row[k] for k in base.names_of(mn.REWARD_MEAN) if k in row), None)
        if mean is not None:
            _set(base, row, (mn.REWARD_MAX, mn.REWARD_MIN), mean)
        _set(base, row, (mn.REWARD_STD,), 0.0)
    elif n == "NaN loss / grad norm":
        _set(base, row, (mn.TRAIN_GRAD_NORM, mn.ACTOR_LOSS, mn.ACTOR_PG_LOSS), math.nan)
    elif n == "grad-norm spike":
        _bend(base, row, (mn.TRAIN_GRAD_NORM,), lambda v: 100 * max(v, 0.01))
    elif n == "length collapse":
        _bend(base, row, (mn.LENGTH_MEAN, mn.LENGTH_MAX, mn.LENGTH_MIN), lambda v: max(1.0, 0.05 * v))
        if math.isfinite(ref.low_reward):
            _set(base, row, (mn.REWARD_MEAN,), ref.low_reward)
    elif n == "truncation":
        _set(base, row, (mn.LENGTH_TRUNCATION_RATE,), 0.95)
        if math.isfinite(ref.max_len):
            _set(base, row, (mn.LENGTH_MEAN, mn.LENGTH_MAX), ref.max_len)
    else:
        raise ValueError(f"no injection {n!r}")


def onset_step(base: Base) -> int:
    steps = base.steps
    return steps[0] + max(20, len(steps) // 2) + 3


def _mirror(i: int, n: int) -> int:
    """Index i reflected into [0, n): 0..n-1, n-2..0, 1..n-1, ..."""
    if n == 1:
        return 0
    period = 2 * (n - 1)
    j = i % period
    return j if j < n else period - j


def splice(inj: Injection, base: Base) -> tuple[int, dict[int, dict[str, float]]]:
    """(onset step k, the spliced raw rows): the base's rows before k, then `SEGMENT[kind]` steps bent from k on (the
    base's own rows while it has them, mirrored past its end; steps numbered on from k)."""
    k = onset_step(base)
    steps = base.steps
    before = {s: dict(base.raw[s]) for s in steps if s < k}
    start = next((i for i, s in enumerate(steps) if s >= k), len(steps))
    ref = _reference(base)
    out = dict(before)
    for t in range(SEGMENT[inj.kind]):
        row = dict(base.raw[steps[_mirror(start + t, len(steps))]])
        bend(inj, base, row, t, ref)
        out[k + t] = row
    return k, out


def subsample(raw: dict[int, dict[str, float]], interval: int) -> dict[int, dict[str, float]]:
    return {s: r for s, r in raw.items() if s % interval == 0}


# ------------------------------------------------------------------------------------------------- feeding


def feed(base: Base, raw: dict[int, dict[str, float]]) -> list[Any]:
    """Every row to a `Monitor` as `grpokit watch` does (canonical names, NaN where the row lacks a signal the log
    records); returns its alerts."""
    rows, _, _ = canonicalise(raw, base.mapper)
    mon = Monitor(dict(base.context))
    for r in rows:
        mon.observe(int(r["step"]), r)
    return mon.alerts


def crossing(inj: Injection, base: Base, raw: dict[int, dict[str, float]], k: int) -> int | None:
    """The first step >= k at which the failure's definition holds (module docstring), on the canonical rows."""
    rows, _, _ = canonicalise(raw, base.mapper)
    if inj.kind == "abrupt":
        return k
    keys = (mn.ENTROPY_TOKEN_MEAN,) if inj.name.startswith("entropy") else KL
    series = [(int(r["step"]), v) for r in rows for key in keys[:1] if math.isfinite(v := r.get(key, math.nan))]
    if not series:
        key = next((kk for kk in keys if any(math.isfinite(r.get(kk, math.nan)) for r in rows)), keys[0])
        series = [(int(r["step"]), v) for r in rows if math.isfinite(v := r.get(key, math.nan))]
    if not series:
        return None
    first = [v for _, v in series[:10]]
    if inj.name.startswith("entropy"):
        bar = 0.5 if first[0] >= 0.5 else 0.1 * statistics.fmean(first)
        return next((s for s, v in series if s >= k and v < bar), None)
    bar = 0.5 if first[0] <= 0.5 else 3 * first[0]
    return next((s for s, v in series if s >= k and v > bar), None)


@dataclass
class Result:
    """One injection into one base at one interval: onset, alert steps (None: none) and rows logged in between."""

    injection: str
    base: str
    interval: int
    onset: int | None
    alert: int | None = None
    alert_mode: str = ""
    critical: int | None = None
    rows_to_alert: int | None = None
    rows_to_critical: int | None = None
    forecast: int | None = None  # first forecast fired at or after the drift began
    rl_status: str = ""
    rl_alert: int | None = None
    rl_rows: int | None = None
    rl_detector: str = ""
    busy: str = ""  # the base already held an alert of the detector at the onset (then not scored)


def measure(inj: Injection, base: Base, interval: int, rlwatch_dir: Path | None) -> Result | None:
    """Splice `inj` into `base`, keep every `interval`-th step, feed grpokit (and rlwatch when `rlwatch_dir`)."""
    k, raw = splice(inj, base)
    return score(inj, base, k, raw, interval, rlwatch_dir)


def score(
    inj: Injection, base: Base, k: int, raw: dict[int, dict[str, float]], interval: int, rlwatch_dir: Path | None
) -> Result | None:
    """The rows `raw` of a run whose failure `inj` starts at step k, every `interval`-th step kept, fed to grpokit
    (and rlwatch): the onset, the alerts and the rows in between. None when the kept rows do not hold the failure's
    signal both before and after k."""
    kept = subsample(raw, interval)
    steps = sorted(kept)
    names = {n for s in inj.needs for n in base.names_of(s)}
    held = [s for s in steps if any(n in kept[s] for n in names)]
    if not any(s < k for s in held) or not any(s >= k for s in held):
        # the rows kept at this interval do not hold the signal both before and after k (a log may leave it out of
        # some lines: verl's lines with validation metrics are cut at 4,096 characters in one corpus run)
        return None
    steps = held  # rows are counted where they hold the signal
    onset = crossing(inj, base, kept, k)
    res = Result(inj.name, base.run, interval, onset)
    alerts = feed(base, kept)
    busy = [
        a
        for a in alerts
        if a.detector == inj.detector and a.fired_at < k and (a.cleared_at is None or a.cleared_at >= k)
    ]
    if busy:  # the base itself holds an alert of this detector at k (a converged run's low entropy): no new onset
        res.onset, res.busy = None, f"{busy[0].mode} since step {busy[0].step}"
        return res
    if inj.forecast:
        fc = [a.fired_at for a in alerts if a.detector == inj.forecast and a.fired_at >= k]
        res.forecast = min(fc) if fc else None
    if onset is None:
        return res
    # the detector's alerts of this failure confirmed since the splice began (a drift's may come before its crossing)
    mine = [a for a in alerts if a.detector == inj.detector and a.mode in inj.modes and a.fired_at >= k]
    if mine:
        first = min(mine, key=lambda a: a.fired_at)
        res.alert, res.alert_mode = first.fired_at, first.mode
        res.rows_to_alert = _rows_between(steps, onset, res.alert)
    crit = [s for a in mine if (s := critical_step(a)) is not None]
    if crit:
        res.critical = min(crit)
        res.rows_to_critical = _rows_between(steps, onset, res.critical)
    if rlwatch_dir is not None:
        _rlwatch(res, inj, base, kept, onset, rlwatch_dir, steps)
    return res


def _rows_between(steps: list[int], onset: int, at: int) -> int:
    """Logged rows (those holding the failure's signal) from the onset to the alert, both included (1: the first
    such row at or after the onset; 0: the alert came before the onset, as a drift's may)."""
    return sum(1 for s in steps if onset <= s <= at)


def critical_step(a: Any) -> int | None:
    """The step an alert became critical (raised critical, or escalated to it); None if it never did."""
    if a.severity != "critical":
        return None
    ups = [e["step"] for e in a.escalations if e.get("to") == "critical"]
    return min(ups) if ups else a.fired_at


#: the rlwatch metric each of its detectors reads (its hook's names, `vs_rlwatch.RLWATCH_INPUTS`)
RLWATCH_READS = {
    "entropy_collapse": "entropy",
    "kl_explosion": "kl_divergence",
    "loss_nan": "loss",
    "gradient_norm_spike": "grad_norm",
    "reward_hacking": "reward_mean",
}


def _rlwatch(
    res: Result,
    inj: Injection,
    base: Base,
    kept: dict[int, dict[str, float]],
    onset: int,
    workdir: Path,
    signal_steps: list[int],
) -> None:
    """rlwatch through the hook the base's trainer would use, fed the kept rows; its first alert of the failure's
    mode at or after the onset."""
    integration = integration_of(base.trainer)
    mode = inj.modes[0]
    own = [d for d, (m, _) in RLWATCH_MODES.items() if m == mode]
    if integration is None:
        res.rl_status = "no integration"
        return
    if not own:
        res.rl_status = "no counterpart"
        return
    steps = sorted(kept)
    sub = workdir / f"{sum(1 for _ in workdir.iterdir()):04d}"
    side = run_rlwatch(integration, [(s, kept[s]) for s in steps], sub, "latency")
    if side.status != "ran":
        res.rl_status = side.status
        return
    if not any(RLWATCH_READS.get(d) in side.inputs for d in own):
        res.rl_status = "not fed"
        return
    res.rl_status = "ran"
    hits = sorted((step, d) for d, _, step in side.alerts if d in own and step >= onset)
    if hits:
        res.rl_alert, res.rl_detector = hits[0]
        res.rl_rows = _rows_between(signal_steps, onset, res.rl_alert)


# ------------------------------------------------------------------------------------------------- healthy runs


@dataclass
class Healthy:
    """False alarms on the healthy runs at one interval: rows fed, steps covered, and alerts by severity."""

    interval: int
    runs: int = 0
    rows: int = 0
    steps: int = 0
    warnings: int = 0
    criticals: int = 0
    forecasts: int = 0
    which: list[str] = field(default_factory=list)  # "<run>: <detector> <severity> @step"
    rl_runs: int = 0
    rl_steps: int = 0
    rl_warnings: int = 0
    rl_criticals: int = 0
    rl_which: list[str] = field(default_factory=list)

    def per_1000(self, n: int, steps: int | None = None) -> str:
        steps = self.steps if steps is None else steps
        return "–" if steps == 0 else f"{1000 * n / steps:.1f}"


FORECASTS = ("entropy_forecast", "zero_variance_forecast", "kl_forecast")


def healthy(bases: list[Base], interval: int, rlwatch_dir: Path | None) -> Healthy:
    """Every healthy run at `interval`: grpokit's alerts (and rlwatch's) whose mode the run's truth does not list."""
    h = Healthy(interval)
    for b in bases:
        kept = subsample(b.raw, interval)
        if not kept:
            continue
        steps = sorted(kept)
        span = steps[-1] - steps[0] + interval
        h.runs += 1
        h.rows += len(steps)
        h.steps += span
        for a in feed(b, kept):
            if a.mode in b.truth:
                continue
            sev = "critical" if a.severity == "critical" else a.severity
            if sev == "critical":
                h.criticals += 1
            elif sev == "warning":
                h.warnings += 1
                h.forecasts += a.detector in FORECASTS
            else:
                continue  # information (a learned task) is no alarm
            h.which.append(f"{b.run}: {a.detector} {sev} at step {a.fired_at}")
        integration = integration_of(b.trainer)
        if rlwatch_dir is None or integration is None:
            continue
        side = run_rlwatch(integration, [(s, kept[s]) for s in steps], rlwatch_dir / f"h{interval}_{h.runs}", "h")
        if side.status != "ran":
            continue
        h.rl_runs += 1
        h.rl_steps += span
        for d, sev, step in side.alerts:
            if RLWATCH_MODES.get(d, (None, ""))[0] in b.truth:
                continue
            h.rl_criticals += sev == "critical"
            h.rl_warnings += sev != "critical"
            h.rl_which.append(f"{b.run}: {d} {sev} at step {step}")
    return h


# ------------------------------------------------------------------------------------------------- tables


def _row(cells: list[Any]) -> str:
    return "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"


def _bullet(text: str) -> str:
    """A markdown list item wrapped at 120 columns."""
    return textwrap.fill(
        text, 120, initial_indent="- ", subsequent_indent="  ", break_long_words=False, break_on_hyphens=False
    )


def _span(vals: list[int]) -> str:
    if not vals:
        return "–"
    lo, hi = min(vals), max(vals)
    return str(lo) if lo == hi else f"{lo}-{hi}"


#: why a failure misses the <= 2 rows target, where it does by design (the detector's documented rule)
WHY = {
    "entropy collapse": "by design, entropy must stay below the floor (0.5 nats, or 10% of its start) for more than "
    "50 training steps (patience 50, §17.7) before it is called a collapse: 50 steps, so 51 rows at interval 1, 11 at "
    "5, 6 at 10. The entropy forecast is the early word where entropy starts above 0.5. At interval 10 one run "
    "(entropy 0.23 at its start) is not alerted at all: the relative rule's baseline is the first 10 logged rows, "
    "which at that interval take in the collapsed rows (the flaw fixed in this issue for entropy explosion and length "
    "collapse; monitor/detectors/collapse.py was being changed by another item, so not here)",
    "entropy drift": "as entropy collapse: 50 steps below the floor, counted from the crossing",
    "advantage collapse": "by design at interval 1: the zero-variance fraction is averaged over 5 steps and must "
    "reach 0.5, so 3 degenerate steps of 5 when the rows before were healthy (2 rows where one of those steps was "
    "degenerate already); at 5 and 10 one row is a full window",
}


def results_table(results: list[Result]) -> str:
    """One row per failure and interval: bases measured, grpokit's steps and rows onset -> alert / -> critical,
    target met, rlwatch's the same; then why each failure that misses the target misses it."""
    missed: list[str] = []
    head = [
        "failure (spliced)",
        "detector",
        "interval",
        "bases",
        "alerted",
        "steps onset -> alert",
        "rows onset -> alert",
        "<= 2 rows",
        "rows onset -> critical",
        "rlwatch alerted",
        "rlwatch steps",
        "rlwatch rows",
    ]
    lines = [_row(head), _row(["---"] * len(head))]
    for inj in INJECTIONS:
        for iv in INTERVALS:
            rs = [r for r in results if r.injection == inj.name and r.interval == iv and r.onset is not None]
            if not rs:
                lines.append(
                    _row(
                        [
                            inj.name,
                            f"`{inj.detector}`",
                            iv,
                            0,
                            "no base logs " + "/".join(inj.needs[:3]),
                            "",
                            "",
                            "",
                            "",
                            "",
                            "",
                            "",
                        ]
                    )
                )
                continue
            hit = [r for r in rs if r.alert is not None]
            steps = [r.alert - r.onset for r in hit]
            rows = [r.rows_to_alert for r in hit if r.rows_to_alert is not None]
            crit = [r.rows_to_critical for r in rs if r.rows_to_critical is not None]
            ok = len(hit) == len(rs) and all(x <= 2 for x in rows)
            target = "yes" if ok else "no (why: below)"
            if not ok and inj.name not in missed:
                missed.append(inj.name)
            rl = [r for r in rs if r.rl_status == "ran"]
            rl_hit = [r for r in rl if r.rl_alert is not None]
            other = sorted({r.rl_status for r in rs if r.rl_status and r.rl_status != "ran"})
            rl_cell = f"{len(rl_hit)} of {len(rl)}" if rl else "–"
            if other:
                rl_cell += " (" + "; ".join(f"{sum(r.rl_status == o for r in rs)} {o}" for o in other) + ")"
            lines.append(
                _row(
                    [
                        inj.name,
                        f"`{inj.detector}`",
                        iv,
                        len(rs),
                        f"{len(hit)} of {len(rs)}",
                        _span(steps),
                        _span(rows),
                        target,
                        _span(crit) + ("" if len(crit) == len(rs) else f" ({len(crit)} of {len(rs)})"),
                        rl_cell,
                        _span([r.rl_alert - r.onset for r in rl_hit]),
                        _span([r.rl_rows for r in rl_hit if r.rl_rows]),
                    ]
                )
            )
    why = [_bullet(f"{n}: {WHY.get(n, 'not explained yet')}") for n in missed]
    return "\n".join(lines + (["", "Where the target of 2 rows is missed:", ""] + why if why else []))


def detail_table(results: list[Result]) -> str:
    head = [
        "failure",
        "base run",
        "interval",
        "onset step",
        "grpokit alert (mode)",
        "rows",
        "critical at",
        "rows",
        "forecast at",
        "rlwatch",
        "rlwatch alert",
        "rows",
    ]
    lines = [_row(head), _row(["---"] * len(head))]
    for r in results:
        a = "none" if r.alert is None else f"{r.alert} ({r.alert_mode})"
        lines.append(
            _row(
                [
                    r.injection,
                    f"`{r.base}`",
                    r.interval,
                    r.onset
                    if r.onset is not None
                    else (f"not scored: the base holds {r.busy}" if r.busy else "never crossed"),
                    a,
                    r.rows_to_alert if r.rows_to_alert is not None else "–",
                    r.critical or "–",
                    r.rows_to_critical or "–",
                    r.forecast if r.forecast is not None else "–",
                    r.rl_status or "–",
                    f"{r.rl_alert} ({r.rl_detector})" if r.rl_alert is not None else "–",
                    r.rl_rows or "–",
                ]
            )
        )
    return "\n".join(lines)


def forecast_table(results: list[Result], hs: list[Healthy]) -> str:
    """The slow drifts: forecast hits (fired after the drift began and before the alert), leads over the crossing and
    over the alert; false forecasts on the healthy runs per 1,000 steps."""
    head = [
        "drift (spliced)",
        "forecast",
        "interval",
        "bases",
        "forecast before the alert",
        "lead over crossing, steps",
        "lead over alert, steps",
        "healthy steps",
        "false forecasts",
        "per 1,000 steps",
    ]
    lines = [_row(head), _row(["---"] * len(head))]
    for inj in INJECTIONS:
        if not inj.forecast:
            continue
        for iv in INTERVALS:
            rs = [r for r in results if r.injection == inj.name and r.interval == iv and r.onset is not None]
            hits = [r for r in rs if r.forecast is not None and (r.alert is None or r.forecast < r.alert)]
            h = next(x for x in hs if x.interval == iv)
            n = sum(1 for w in h.which if f" {inj.forecast} " in w)
            lines.append(
                _row(
                    [
                        inj.name,
                        f"`{inj.forecast}`",
                        iv,
                        len(rs),
                        f"{len(hits)} of {len(rs)}",
                        _span([r.onset - r.forecast for r in hits]),
                        _span([r.alert - r.forecast for r in hits if r.alert is not None]),
                        h.steps,
                        n,
                        h.per_1000(n),
                    ]
                )
            )
    return "\n".join(lines)


def healthy_table(hs: list[Healthy]) -> str:
    head = [
        "interval",
        "healthy runs",
        "rows",
        "steps",
        "grpokit warnings (forecasts)",
        "grpokit criticals",
        "per 1,000 steps: warning / critical",
        "rlwatch runs (steps)",
        "rlwatch warnings",
        "rlwatch criticals",
        "per 1,000 steps: warning / critical",
    ]
    lines = [_row(head), _row(["---"] * len(head))]
    for h in hs:
        lines.append(
            _row(
                [
                    h.interval,
                    h.runs,
                    h.rows,
                    h.steps,
                    f"{h.warnings} ({h.forecasts})",
                    h.criticals,
                    f"{h.per_1000(h.warnings)} / {h.per_1000(h.criticals)}",
                    f"{h.rl_runs} ({h.rl_steps})",
                    h.rl_warnings,
                    h.rl_criticals,
                    f"{h.per_1000(h.rl_warnings, h.rl_steps)} / {h.per_1000(h.rl_criticals, h.rl_steps)}",
                ]
            )
        )
    extra = [_bullet(f"interval {h.interval}, grpokit: " + "; ".join(h.which)) for h in hs if h.which]
    extra += [_bullet(f"interval {h.interval}, rlwatch: " + "; ".join(h.rl_which)) for h in hs if h.rl_which]
    return "\n".join(lines + ([""] + extra if extra else []))


def evaluate(
    root: Path = CORPUS, names: list[str] | None = None, with_rlwatch: bool = True
) -> tuple[list[Base], list[Result], list[Healthy]]:
    """The healthy runs, every injection into every base that logs its signal at every interval, and the healthy
    runs' false alarms."""
    runs = healthy_runs(root, names)
    bases = [b for b in runs if len(b.raw) >= MIN_BASE_ROWS]
    results, hs = [], []
    with tempfile.TemporaryDirectory(prefix="latency_") as tmp:
        work = Path(tmp) if with_rlwatch else None
        for iv in INTERVALS:
            for inj in INJECTIONS:
                for b in bases:
                    if b.logs(*inj.needs) and (r := measure(inj, b, iv, work)) is not None:
                        results.append(r)
            hs.append(healthy(runs, iv, work))
    return bases, results, hs


def report(bases: list[Base], results: list[Result], hs: list[Healthy]) -> str:
    lines = [
        "Bases (healthy corpus runs with at least "
        f"{MIN_BASE_ROWS} training steps; onset step k): "
        + ", ".join(f"`{b.run}` ({len(b.raw)} steps, k = {onset_step(b)})" for b in bases),
        "",
        "Failures spliced: " + "; ".join(f"{i.name}: {i.what}" for i in INJECTIONS) + ".",
        "",
        "### Latency per failure and logging interval",
        "",
        results_table(results),
        "",
        "### Forecasts on the slow drifts",
        "",
        forecast_table(results, hs),
        "",
        "### False alarms on the healthy runs",
        "",
        healthy_table(hs),
        "",
        "### Each splice",
        "",
        detail_table(results),
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", nargs="+", metavar="NAME", help="only these corpus runs (directory names)")
    ap.add_argument("--out", type=Path, help="also write the tables to this file")
    ap.add_argument("--no-rlwatch", action="store_true", help="grpokit only")
    args = ap.parse_args(argv)
    with_rl = not args.no_rlwatch
    if with_rl:
        try:
            import rlwatch  # noqa: F401
        except ImportError:
            print(
                "rlwatch is not installed: pip install -e .[bench] (or rlwatch==0.5.1), or --no-rlwatch",
                file=sys.stderr,
            )
            return 2
    page = report(*evaluate(CORPUS, args.runs, with_rl))
    print(page)
    if args.out:
        args.out.write_text(page, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
