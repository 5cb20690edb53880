"""`grpokit doctor` against rlwatch, the closest peer tool, on grpokit's corpus of real training logs.

For each corpus run (`tests/fixtures/logs/real/<run>/`) and each log in its SOURCE's `truth` mapping:

- grpokit: `diagnose_all(<the log file>)`, the run the truth key names (`file#k`: the k-th run of the file); its
  verdict and failure modes are scored against the truth with `grpokit.monitor.doctor.corpus` (the comparison
  `tests/monitor/test_real_logs.py` makes). A log no grpokit reader recognises yet is reported "not read" (its true
  modes count as misses).
- rlwatch (0.5.1) is run the way it runs live, through its own framework hook, fed the trainer's raw metric names:
  TRL: `rlwatch.attach(framework="trl", trainer=...)` registers its TRL callback (built by its
  `_build_trl_callback`) on a stand-in trainer, whose `on_log` is called with each `log_history` entry of
  `trainer_state.json` (without its `step`, as transformers' `Trainer.log` passes it) or with each per-step dict of
  a TRL console log as grpokit's console reader parses it, `state.global_step` set to the entry's step; verl:
  `RLWatchVerLTracker(monitor).log(data, step)` with each step's verl keys (the dict verl's `Tracking.log`
  receives, as its console logger prints it); OpenRLHF: `RLWatchOpenRLHFLogger(monitor).log_train(step, logs)`
  with each step's status dict (for these two `rlwatch.attach` finds no verl / OpenRLHF installed here and falls
  back to manual mode; the tracker / logger is then wired to the monitor as its own message tells users to). rlwatch
  has no integration for SkyRL, NeMo-RL or slime: those logs say "no integration".
  Its thresholds are its defaults (including the alert cooldown of 100 steps and 50 alerts per run); its SQLite
  store goes to a temporary directory; Slack / email / Discord / webhook channels are set off through its config
  (overriding any RLWATCH_* variable); its console panels (always on, not configurable) and log lines are
  swallowed. The alerts it stored are mapped to grpokit's failure modes by what each detector measures
  (`RLWATCH_MODES`); an alert of a detector without a counterpart is listed, not scored.

    .venv/bin/python bench/vs_rlwatch.py                                # tables on stdout
    .venv/bin/python bench/vs_rlwatch.py --out docs/doctor_corpus.md    # and the docs page
    .venv/bin/python bench/vs_rlwatch.py --runs trl_grpo_finance_sparse_reward_collapse verl_ppo_gsm8k_converged

Needs rlwatch: `pip install -e .[bench]` (or `pip install rlwatch==0.5.1`).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import io
import json
import logging
import math
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from grpokit.monitor.detectors import DETECTORS
from grpokit.monitor.doctor import diagnose_all
from grpokit.monitor.doctor.corpus import (
    Comparison,
    ModeScore,
    compare,
    corpus_runs,
    read_source,
    score_modes,
    split_run_key,
)
from grpokit.monitor.readers import READERS, discover

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO / "tests" / "fixtures" / "logs" / "real"
COMMAND = ".venv/bin/python bench/vs_rlwatch.py --out docs/doctor_corpus.md"

#: rlwatch 0.5.1's detectors -> grpokit's failure mode of the same meaning (None: grpokit has no such mode), with
#: what the detector measures (rlwatch/detectors.py) and why it maps so.
RLWATCH_MODES: dict[str, tuple[str | None, str]] = {
    "entropy_collapse": (
        "entropy collapse",
        "policy entropy below 1.0 for 25 (warning) / 50 (critical) consecutive logged steps after 20 warm-up steps; "
        "grpokit: token entropy below 0.5 nats (or 10% of its start) for more than 50 training steps",
    ),
    "kl_explosion": (
        "KL drift",
        "KL more than 3 sigma above its rolling mean (100 steps, after 20 warm-up steps); grpokit: KL above 0.5 or "
        "growing 3-fold over 10 steps",
    ),
    "loss_nan": ("numerical trouble", "a non-finite loss; grpokit's numerical-trouble detector flags it too"),
    "gradient_norm_spike": (
        "numerical trouble",
        "grad norm more than 3 sigma above a frozen baseline (after 20 warm-up steps); grpokit: grad norm above 10x "
        "its recent median and above 1, or non-finite",
    ),
    "reward_hacking": (
        "noisy or hackable reward",
        "reward variance over 3x its baseline (after 50 warm-up steps) or a bimodal per-sample reward distribution, "
        "its proxy for reward hacking; grpokit names the same failure from other evidence (repeated completions "
        "scored differently, reward tracking length or a non-correctness component)",
    ),
    "advantage_variance": (
        None,
        "advantage std over 3x its rolling mean (unstable value estimates); grpokit has no advantage-spike mode "
        "(its advantage collapse is the opposite failure: zero-variance groups)",
    ),
    "reward_mean_drift": (
        None,
        "reward mean moving in one direction for 50 consecutive steps (could be reward hacking, degradation or "
        "plain learning, by its own recommendation); no grpokit counterpart",
    ),
}

#: Modes a grpokit detector raises besides its own (escalations of one episode), for the per-mode table.
OTHER_MODES = {
    "convergence": "entropy_collapse",
    "entropy metric missing": "entropy_collapse",
    "length collapse": "length_bias",
}

#: The SOURCE `trainer` field -> rlwatch integration (None: rlwatch has none), first match wins.
INTEGRATIONS: list[tuple[re.Pattern[str], str | None]] = [
    (re.compile(r"\bSkyRL\b"), None),
    (re.compile(r"\bNeMo-RL\b"), None),
    (re.compile(r"\bslime\b"), None),
    (re.compile(r"\bOpenRLHF\b"), "openrlhf"),
    (re.compile(r"\bverl\b", re.IGNORECASE), "verl"),
    (re.compile(r"\bTRL\b"), "trl"),
]


def integration_of(trainer: str) -> str | None:
    """Which rlwatch integration a corpus run's trainer (its SOURCE `trainer` text) would use live, or None."""
    for pat, name in INTEGRATIONS:
        if pat.search(trainer):
            return name
    return None


# ------------------------------------------------------------------------------------------------- grpokit


@dataclass
class GrpokitSide:
    """grpokit's diagnosis of one truth entry: `status` is "read", "not read: <why>" or "error: <what>"."""

    status: str
    comparison: Comparison | None = None

    @property
    def read(self) -> bool:
        return self.status == "read"

    @property
    def found(self) -> frozenset[str]:
        return self.comparison.modes.found if self.comparison else frozenset()


def grpokit_side(run_dir: Path, key: str, want: dict[str, Any]) -> GrpokitSide:
    """Diagnose the log a truth key names and compare it with the truth entry `want`."""
    file, suffix = split_run_key(key)
    try:
        diags = diagnose_all(run_dir / file)
    except ValueError as e:
        return GrpokitSide(f"not read: {str(e).split('. Supported logs')[0]}")
    except Exception as e:  # noqa: BLE001 - a reader still being written must not stop the benchmark
        return GrpokitSide(f"error: {type(e).__name__}: {e}"[:200])
    match = [d for d in diags if d["run"] == suffix]
    if not match:
        return GrpokitSide(f"not read: no run {key!r} (runs: {sorted(d['run'] for d in diags)})")
    return GrpokitSide("read", compare(want, match[0]))


# ------------------------------------------------------------------------------------------------- rlwatch


@dataclass
class RlwatchSide:
    """rlwatch on one truth entry: `status` is "ran", "no integration", "not fed: <why>" or "error: <what>"; `fed`
    the steps handed to its hook, `steps` those it stored (a step with no metric its hook maps is dropped by the
    hook), `inputs` the rlwatch metrics its hook filled at least once, `alerts` what it stored (detector, severity,
    step)."""

    status: str
    integration: str | None = None
    fed: int = 0
    steps: int = 0
    inputs: list[str] = field(default_factory=list)
    alerts: list[tuple[str, str, int]] = field(default_factory=list)

    @property
    def detectors(self) -> list[str]:
        """The detectors that alerted, in order of their first alert."""
        return list(dict.fromkeys(d for d, _, _ in self.alerts))

    @property
    def found(self) -> frozenset[str]:
        return frozenset(m for d in self.detectors if (m := RLWATCH_MODES.get(d, (None, ""))[0]) is not None)

    @property
    def unscored(self) -> list[str]:
        """Detectors that alerted and have no grpokit counterpart."""
        return [d for d in self.detectors if RLWATCH_MODES.get(d, (None, ""))[0] is None]


def step_dicts(run_dir: Path, key: str, integration: str) -> list[tuple[int, dict[str, Any]]] | None:
    """The per-step metric dicts the trainer hands its loggers live, in its own names: a trainer_state.json's
    `log_history` entries as they are (TRL), else the rows grpokit's reader parses from the log (raw names).
    None when grpokit's readers cannot parse the log's steps."""
    file, suffix = split_run_key(key)
    path = run_dir / file
    if integration == "trl" and path.suffix == ".json":
        state = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(state, dict) and isinstance(state.get("log_history"), list):
            out = []
            for entry in state["log_history"]:
                step = entry.get("step") if isinstance(entry, dict) else None
                if isinstance(step, int):
                    out.append((step, {k: v for k, v in entry.items() if k != "step"}))
            return out
    found = discover(path)
    if not found:
        return None
    _, reader, files = found[0]
    segs = [s for s in READERS[reader].read(files) if s.name == suffix]
    if not segs:
        return None
    return [(step, dict(segs[0].raw[step])) for step in sorted(segs[0].raw)]


#: The metrics rlwatch's hooks fill (its `log_step` arguments stored per step).
RLWATCH_INPUTS = (
    "entropy",
    "kl_divergence",
    "reward_mean",
    "reward_std",
    "advantage_std",
    "loss",
    "learning_rate",
    "clip_fraction",
    "grad_norm",
)


class _TrainerStandIn:
    """What `rlwatch.attach(trainer=...)` needs of a transformers Trainer: `add_callback`."""

    def __init__(self) -> None:
        self.callbacks: list[Any] = []

    def add_callback(self, callback: Any) -> None:
        self.callbacks.append(callback)


def finite_at(v: Any) -> bool:
    return isinstance(v, (int, float)) and math.isfinite(v)


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """rlwatch's console panels (rich, on stderr) and its log lines, swallowed."""
    log = logging.getLogger("rlwatch")
    level = log.level
    log.setLevel(logging.CRITICAL)
    try:
        with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
            yield
    finally:
        log.setLevel(level)


def run_rlwatch(integration: str, steps: list[tuple[int, dict[str, Any]]], workdir: Path, run_id: str) -> RlwatchSide:
    """Feed one log's steps to rlwatch through its `integration` hook; returns the alerts it stored."""
    import rlwatch
    from rlwatch.config import DiscordConfig, EmailConfig, SlackConfig, WebhookConfig

    workdir.mkdir(parents=True, exist_ok=True)
    config = workdir / "rlwatch.yaml"
    config.write_text("{}\n", encoding="utf-8")  # its defaults; no ./rlwatch.yaml from the working directory
    off = {"slack": SlackConfig(), "email": EmailConfig(), "discord": DiscordConfig(), "webhook": WebhookConfig()}
    trainer = _TrainerStandIn()
    with _quiet():
        monitor = rlwatch.attach(
            config_path=str(config),
            framework=integration,
            run_id=run_id,
            trainer=trainer if integration == "trl" else None,
            storage={"log_dir": str(workdir)},
            alerts=off,
        )
        try:
            if integration == "trl":
                from transformers import TrainerControl, TrainerState

                (callback,) = trainer.callbacks
                control = TrainerControl()
                for step, logs in steps:
                    # the callback reads only `state.global_step` and `logs` (args is not used)
                    callback.on_log(None, TrainerState(global_step=step), control, logs=logs)
            elif integration == "verl":
                from rlwatch.integrations.verl_tracking import RLWatchVerLTracker

                tracker = RLWatchVerLTracker(monitor)
                for step, data in steps:
                    tracker.log(data, step)
                tracker.finish()
            elif integration == "openrlhf":
                from rlwatch.integrations.openrlhf_logger import RLWatchOpenRLHFLogger

                logger = RLWatchOpenRLHFLogger(monitor)
                for step, logs in steps:
                    logger.log_train(step, logs)
                logger.close()
            else:
                raise ValueError(f"no rlwatch integration {integration!r}")
            metrics = monitor.store.get_metrics()
            alerts = [(a["detector"], a["severity"], int(a["step"])) for a in monitor.store.get_alerts()]
        finally:
            monitor.stop()
    inputs = [k for k in RLWATCH_INPUTS if any(finite_at(row.get(k)) for row in metrics)]
    return RlwatchSide("ran", integration, len(steps), len(metrics), inputs, alerts)


def rlwatch_side(run_dir: Path, key: str, trainer: str, workdir: Path) -> RlwatchSide:
    """rlwatch on the log a truth key names, through the integration its trainer would use live."""
    integration = integration_of(trainer)
    if integration is None:
        return RlwatchSide("no integration")
    try:
        steps = step_dicts(run_dir, key, integration)
    except Exception as e:  # noqa: BLE001 - a reader still being written must not stop the benchmark
        return RlwatchSide(f"not fed: {type(e).__name__}: {e}"[:200], integration)
    if steps is None:
        return RlwatchSide("not fed: grpokit's readers cannot parse this log's steps", integration)
    try:
        return run_rlwatch(integration, steps, workdir, re.sub(r"\W+", "_", f"{run_dir.name}_{key}"))
    except Exception as e:  # noqa: BLE001 - one log rlwatch chokes on is a result, not a crash of the benchmark
        return RlwatchSide(f"error: {type(e).__name__}: {e}"[:200], integration)


# ------------------------------------------------------------------------------------------------- the corpus


@dataclass
class Entry:
    """One truth entry of the corpus with both tools' results."""

    run: str
    key: str
    want: dict[str, Any]
    grpokit: GrpokitSide
    rlwatch: RlwatchSide

    @property
    def truth(self) -> frozenset[str]:
        return frozenset(self.want["modes"])

    @property
    def grpokit_score(self) -> ModeScore:
        return score_modes(self.truth, self.grpokit.found)

    @property
    def rlwatch_score(self) -> ModeScore:
        return score_modes(self.truth, self.rlwatch.found)


def evaluate(
    corpus: Path = CORPUS, runs: list[str] | None = None, with_rlwatch: bool = True, workdir: Path | None = None
) -> list[Entry]:
    """Both tools on every truth entry of the corpus (or of the named runs). Without `with_rlwatch` its side is
    "not run" (for a machine without rlwatch)."""
    names = corpus_runs(corpus) if runs is None else runs
    entries = []
    with tempfile.TemporaryDirectory(prefix="vs_rlwatch_") as tmp:
        base = workdir or Path(tmp)
        for i, name in enumerate(names):
            src = read_source(corpus / name)
            for j, (key, want) in enumerate(src["truth"].items()):
                g = grpokit_side(corpus / name, key, want)
                if with_rlwatch:
                    r = rlwatch_side(corpus / name, key, str(src.get("trainer", "")), base / f"{i:02d}_{j}")
                else:
                    r = RlwatchSide("not run")
                entries.append(Entry(name, key, want, g, r))
    return entries


# ------------------------------------------------------------------------------------------------- tables


def _modes(modes: Any) -> str:
    return ", ".join(sorted(modes)) or "–"


def _verdict_cell(g: GrpokitSide) -> str:
    if not g.read or g.comparison is None:
        return g.status.split(":")[0]
    c = g.comparison
    return "right" if c.verdict_ok else f"wrong: {c.verdict}"


def _rlwatch_cell(r: RlwatchSide) -> str:
    if r.status != "ran":
        return r.status
    return f"{r.integration}: {r.fed} steps fed, {r.steps} with a metric it maps ({', '.join(r.inputs) or 'none'})"


def _row(cells: list[Any]) -> str:
    return "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"


def per_log_table(entries: list[Entry]) -> str:
    """One row per truth entry: the truth, grpokit's verdict and found / missed / false alarms, rlwatch's the same
    (and its alerts without a grpokit counterpart)."""
    head = [
        "run",
        "log",
        "truth modes",
        "grpokit verdict",
        "grpokit found",
        "grpokit missed",
        "grpokit false alarms",
        "rlwatch fed",
        "rlwatch found",
        "rlwatch missed",
        "rlwatch false alarms",
        "rlwatch alerts without counterpart",
    ]
    lines = [_row(head), _row(["---"] * len(head))]
    for e in entries:
        gs, rs = e.grpokit_score, e.rlwatch_score
        g_found = _modes(gs.found) if e.grpokit.read else e.grpokit.status.split(":")[0]
        r_found = _modes(rs.found) if e.rlwatch.status == "ran" else "–"
        r_fired = ", ".join(e.rlwatch.detectors)
        lines.append(
            _row(
                [
                    f"`{e.run}`",
                    f"`{e.key}`",
                    _modes(e.truth),
                    _verdict_cell(e.grpokit),
                    g_found,
                    _modes(gs.missed),
                    _modes(gs.false_alarms),
                    _rlwatch_cell(e.rlwatch),
                    r_found + (f" ({r_fired})" if r_fired else ""),
                    _modes(rs.missed),
                    _modes(rs.false_alarms),
                    ", ".join(e.rlwatch.unscored) or "–",
                ]
            )
        )
    return "\n".join(lines)


def totals(entries: list[Entry]) -> dict[str, dict[str, int]]:
    """Per tool: logs, logs it read (grpokit) / was fed (rlwatch), true modes, hits, misses, false alarms, right
    verdicts (grpokit) and alerts without a counterpart (rlwatch)."""
    out: dict[str, dict[str, int]] = {}
    for tool in ("grpokit", "rlwatch"):
        scores = [e.grpokit_score if tool == "grpokit" else e.rlwatch_score for e in entries]
        out[tool] = {
            "logs": len(entries),
            "read": sum(1 for e in entries if (e.grpokit.read if tool == "grpokit" else e.rlwatch.status == "ran")),
            "truth": sum(len(s.truth) for s in scores),
            "hits": sum(len(s.hits) for s in scores),
            "misses": sum(len(s.missed) for s in scores),
            "false_alarms": sum(len(s.false_alarms) for s in scores),
        }
    out["grpokit"]["verdicts_right"] = sum(1 for e in entries if e.grpokit.comparison and e.grpokit.comparison.ok)
    out["grpokit"]["verdict_only_right"] = sum(
        1 for e in entries if e.grpokit.comparison and e.grpokit.comparison.verdict_ok
    )
    out["rlwatch"]["unscored"] = sum(len(e.rlwatch.unscored) for e in entries)
    return out


def totals_table(entries: list[Entry]) -> str:
    t = totals(entries)
    head = [
        "tool",
        "logs",
        "read (grpokit) / run through its hook (rlwatch)",
        "true modes",
        "hits",
        "misses",
        "false alarms",
        "verdict right",
        "whole truth entry right",
        "alerts without counterpart",
    ]
    g, r = t["grpokit"], t["rlwatch"]
    lines = [_row(head), _row(["---"] * len(head))]
    lines.append(
        _row(
            [
                "grpokit doctor",
                g["logs"],
                g["read"],
                g["truth"],
                g["hits"],
                g["misses"],
                g["false_alarms"],
                g["verdict_only_right"],
                g["verdicts_right"],
                "–",
            ]
        )
    )
    lines.append(
        _row(
            [
                "rlwatch",
                r["logs"],
                r["read"],
                r["truth"],
                r["hits"],
                r["misses"],
                r["false_alarms"],
                "n/a",
                "n/a",
                r["unscored"],
            ]
        )
    )
    return "\n".join(lines)


def per_mode(entries: list[Entry]) -> dict[str, dict[str, Any]]:
    """Per grpokit failure mode over the corpus: its detector, how many truth entries list it, hits, misses and
    false alarms (grpokit), and rlwatch's hits / misses / false alarms on the same mode."""
    detector_of = {cls.mode: name for name, cls in DETECTORS.items()} | OTHER_MODES
    modes = set(detector_of) | {m for e in entries for m in e.truth | e.grpokit.found}
    out: dict[str, dict[str, Any]] = {}
    for m in sorted(modes, key=lambda m: (detector_of.get(m, "~"), m)):
        g = [e.grpokit_score for e in entries]
        r = [e.rlwatch_score for e in entries]
        out[m] = {
            "detector": detector_of.get(m, "–"),
            "truth": sum(1 for e in entries if m in e.truth),
            "hits": sum(1 for s in g if m in s.hits),
            "misses": sum(1 for s in g if m in s.missed),
            "false_alarms": sum(1 for s in g if m in s.false_alarms),
            "rlwatch": [k for k, (mode, _) in RLWATCH_MODES.items() if mode == m],
            "rlwatch_hits": sum(1 for s in r if m in s.hits),
            "rlwatch_misses": sum(1 for s in r if m in s.missed),
            "rlwatch_false_alarms": sum(1 for s in r if m in s.false_alarms),
        }
    return out


def per_mode_table(entries: list[Entry]) -> str:
    head = [
        "grpokit mode",
        "detector",
        "in truth",
        "hits",
        "misses",
        "false alarms",
        "rlwatch detectors",
        "rlwatch hits / misses / false alarms",
    ]
    lines = [_row(head), _row(["---"] * len(head))]
    for m, s in per_mode(entries).items():
        rl = f"{s['rlwatch_hits']} / {s['rlwatch_misses']} / {s['rlwatch_false_alarms']}"
        lines.append(
            _row(
                [
                    m,
                    f"`{s['detector']}`",
                    s["truth"],
                    s["hits"],
                    s["misses"],
                    s["false_alarms"],
                    ", ".join(f"`{d}`" for d in s["rlwatch"]) or "no counterpart",
                    rl,
                ]
            )
        )
    return "\n".join(lines)


def mapping_table(entries: list[Entry]) -> str:
    head = ["rlwatch detector", "grpokit mode", "what it measures", "logs it alerted on"]
    lines = [_row(head), _row(["---"] * len(head))]
    for d, (mode, why) in RLWATCH_MODES.items():
        n = sum(1 for e in entries if d in e.rlwatch.detectors)
        lines.append(_row([f"`{d}`", mode or "no counterpart (not scored)", why, n]))
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------------- output


def versions() -> dict[str, str]:
    """grpokit (with its git commit), rlwatch and transformers versions."""
    out = {}
    for pkg in ("grpokit", "rlwatch", "transformers"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = "not installed"
    try:
        git = ["git", "-C", str(REPO)]
        commit = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True)
        dirty = subprocess.run([*git, "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True)
        out["grpokit"] += f" (git {commit.stdout.strip()}{', uncommitted changes' if dirty.stdout.strip() else ''})"
    except (OSError, subprocess.CalledProcessError):
        pass
    return out


def report(entries: list[Entry], header: bool = True) -> str:
    """The markdown page: how it was made, the totals, the per-log table, the per-mode table, the mapping."""
    parts = []
    if header:
        v = versions()
        parts += [
            "# `grpokit doctor` and rlwatch on the corpus of real training logs",
            "",
            f"Regenerate: `{COMMAND}` (rlwatch from `pip install -e .[bench]`).  ",
            f"Date: {datetime.date.today().isoformat()}. Versions: grpokit {v['grpokit']}, rlwatch {v['rlwatch']} "
            f"(its TRL callback on transformers {v['transformers']}).",
            "",
            "The corpus is `tests/fixtures/logs/real/`: real logs from public repositories, each with a ground truth "
            "(the failure modes the run really has, from the log and its authors' words). Each tool is scored per "
            "log: a hit is a true mode it reported, a miss a true mode it did not, a false alarm a mode it reported "
            "that is not true. grpokit: `diagnose_all(<log>)`; a log no reader of grpokit recognises yet is "
            '"not read" and its true modes count as misses. rlwatch runs as it does live, through its TRL callback, '
            "its verl tracking backend or its OpenRLHF logger fed each step's dict in the trainer's own key names, "
            "with its default thresholds; its alert channels off and its store in a temporary directory. It has no "
            'integration for SkyRL, NeMo-RL or slime ("no integration": their true modes count as misses). Its alerts '
            "are mapped to grpokit's modes by what each detector measures (last table); an alert of a detector without "
            "a counterpart is listed, not scored. See `bench/vs_rlwatch.py`.",
            "",
            'What rlwatch can see is in the column "rlwatch fed": the metrics its hook maps from the trainer\'s keys. '
            "Its verl tracker looks for `actor/entropy`, `actor/kl_divergence` / `training/kl_penalty`, "
            "`rewards/mean`, `training/grad_norm`, `training/policy_loss`; verl logs `actor/entropy` (0.3+; older "
            "verl `actor/entropy_loss`), `actor/ppo_kl` / `actor/kl_loss`, `critic/score/mean`, `actor/grad_norm`, "
            "`actor/pg_loss`, so on verl logs it measures entropy alone. Its detectors wait 20 logged steps (50 "
            "for the reward ones) before they judge, so a short log cannot alert.",
            "",
        ]
    parts += [
        "## Totals",
        "",
        totals_table(entries),
        "",
        "## Per log",
        "",
        per_log_table(entries),
        "",
        "## Per grpokit failure mode",
        "",
        per_mode_table(entries),
        "",
        "## rlwatch's detectors and grpokit's modes",
        "",
        mapping_table(entries),
        "",
    ]
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--corpus", type=Path, default=CORPUS, help="the corpus directory (default: %(default)s)")
    ap.add_argument("--runs", nargs="+", metavar="NAME", help="only these corpus runs (directory names)")
    ap.add_argument("--out", type=Path, help="also write the page (versions, date, all tables) to this file")
    args = ap.parse_args(argv)
    try:
        import rlwatch  # noqa: F401
    except ImportError:
        print("rlwatch is not installed: pip install -e .[bench] (or rlwatch==0.5.1)", file=sys.stderr)
        return 2
    entries = evaluate(args.corpus, args.runs)
    page = report(entries)
    print(report(entries, header=False))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(page, encoding="utf-8")
        print(f"written: {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
