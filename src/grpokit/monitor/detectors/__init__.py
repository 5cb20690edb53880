"""Failure-mode detectors over the per-step signals of docs/math.md §17 (canonical names: `grpokit.metric_names`).

Each detector is one small class with documented, configurable thresholds. Fed one metrics row per step, it
returns an `Alert` when its failure mode starts (with the step it started at, the numbers that show it, a
severity and the fix named after the seed technique that addresses it), and stays quiet while the mode persists;
the alert it returned keeps the mode's *current* value (`Alert.current`) and escalates its severity while the mode
lasts, and records when it cleared. A detector whose inputs a log lacks reports them as not measurable; nothing is
guessed.

Robustness rules every detector follows (a property test feeds them random and degenerate series):

- windows and patience are in **training steps**, not rows: a log written every 10 steps fills a 5-step window
  with one row (see `StepWindow`);
- a row lacking a signal (or holding NaN / inf / a non-number there) neither counts nor crashes;
- relative rules ("grew 3x", "10x its median") also need an absolute floor, and their evidence states the
  absolute values;
- a fix is only offered when the run does not already use it and it can act in the run's configuration
  (`context`: the recipe's switches; empty when the log carries no config, and then the fix says so).

Modules: `base` (Alert, Detector, Windowed, the registry), `rows` (reading rows, step windows), `context`
(which fixes can act), what a run logs beside a signal (`groups`: all-correct against all-wrong groups and the
zero-variance signal of a log without a fraction; `progress`: reward and held-out trend; `bursts`: rows in a row and
short bursts), one module per failure family (`collapse` with `entropy`, `explosion`,
`kl_drift`, `length`, `short_batch`, `ratios`,
`reward`, `numerical`, `saturation`, `staleness`, `episodes`, `forecast`, `divergence`, and the system's
`system_time`, `system_memory`, `system_throughput`, `system_noop`, `system_sync`; importing them registers their
detectors, in this order) and `runner` (`Monitor`, `rank`). `divergence` needs the weights, so it fires on live runs
only.
"""

from __future__ import annotations

from .base import DETECTORS, SEVERITY_RANK, Alert, Detector, Windowed, register
from .context import on_policy_run as on_policy_run
from .context import unknown_config_note as unknown_config_note
from .rows import RewardRange as RewardRange
from .rows import StepWindow, accuracy_now
from .rows import finite_at as finite_at
from .rows import first_logged as first_logged
from .rows import number_at as number_at
from .rows import rounded as rounded
from .rows import slope as slope
from .runner import Monitor, rank

# the order of these imports is the order detectors register in, run in and report in
# isort: off
from .collapse import AdvantageCollapse, EntropyCollapse
from .explosion import EntropyExplosion
from .kl_drift import KLDrift
from .length import LengthBias, Truncation
from .short_batch import ShortBatch
from .ratios import ClippingAnomaly, SamplerMismatch
from .reward import NoisyReward
from .numerical import Numerical
from .saturation import Saturation
from .staleness import StaleSampler
from .episodes import EnvTokenShare, EpisodeLimits, MalformedToolCalls, ToolFailures
from .forecast import EntropyForecast, KLForecast, ZeroVarianceForecast
from .divergence import Divergence
from .system_time import TimeSplit
from .system_memory import MemoryHeadroom
from .system_throughput import ThroughputRegression
from .system_noop import NoOpUpdate
from .system_sync import SyncMismatchJump
# isort: on

__all__ = [
    "DETECTORS",
    "SEVERITY_RANK",
    "AdvantageCollapse",
    "Alert",
    "ClippingAnomaly",
    "Detector",
    "Divergence",
    "EntropyCollapse",
    "EntropyExplosion",
    "EntropyForecast",
    "EnvTokenShare",
    "EpisodeLimits",
    "KLDrift",
    "KLForecast",
    "LengthBias",
    "MalformedToolCalls",
    "MemoryHeadroom",
    "Monitor",
    "NoOpUpdate",
    "NoisyReward",
    "Numerical",
    "SamplerMismatch",
    "Saturation",
    "ShortBatch",
    "StaleSampler",
    "StepWindow",
    "SyncMismatchJump",
    "ThroughputRegression",
    "TimeSplit",
    "ToolFailures",
    "Truncation",
    "Windowed",
    "ZeroVarianceForecast",
    "accuracy_now",
    "rank",
    "register",
]
