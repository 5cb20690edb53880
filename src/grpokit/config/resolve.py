"""Resolving a built config: every numeric value checked against its range (`grpokit.config.ranges`), derived values
filled (VAPO's alpha, constant-norm's L, overlong cache as a fraction), each chosen component's parameters bound,
then every other value checked; the first bad one is one ConfigError naming the key, the value and the fix.
Cross-field checks live in `grpokit.config.checks`."""

from __future__ import annotations

from ..algos.schedules import LR_SCHEDULES
from ..models import PRECISION_CHOICES
from ..models.value_heads import CRITIC_KINDS
from ..parallel.sharding import SHARDINGS
from ..run.trackers import TRACKERS
from .errors import ConfigError
from .keys import did_you_mean
from .ranges import check_ranges
from .sections import Config

VAPO_ALPHA_TIMES_LMAX = 50.0


def fill_derived(cfg: Config) -> None:
    """Values derived from others when unset."""
    algo, max_new = cfg.algo, cfg.rollout.max_new_tokens
    if algo.gae_alpha is None and algo.takes("gae_alpha"):
        # VAPO length-adaptive lambda = 1 - 1/(alpha L) (docs/math.md §11): alpha L_max = 50 keeps lambda in the range
        # the paper's alpha 0.05 gives over 100..1000 tokens (0.8 .. 0.98) over L_max/10 .. L_max here
        algo.gae_alpha = VAPO_ALPHA_TIMES_LMAX / max_new
    if algo.loss_agg == "constant-norm" and not algo.l_norm:
        algo.l_norm = float(max_new)
    if 0 < algo.overlong_cache < 1:
        algo.overlong_cache = float(max(1, round(algo.overlong_cache * max_new)))


def bind_components(cfg: Config) -> None:
    """Each chosen component's parameters bound once (unset -> its paper default); the precision resolved."""
    from ..models.precision import precision_for_dtype

    try:
        cfg.algo.bind()
        cfg.model.precision = precision_for_dtype(cfg.model.dtype, cfg.model.precision)
    except ValueError as e:
        raise ConfigError(str(e)) from None


def check_monitor(cfg: Config) -> None:
    """Every `monitor.thresholds` entry names a detector and builds it."""
    from ..monitor.detectors import DETECTORS

    for name, params in cfg.monitor.thresholds.items():
        if name not in DETECTORS:
            raise ConfigError(f"monitor.thresholds: unknown detector {name!r}.{did_you_mean(name, list(DETECTORS))}")
        try:
            DETECTORS[name](None, **(params or {}))
        except ValueError as e:
            raise ConfigError(f"monitor.thresholds.{name}: {e}") from None


def value_checks(cfg: Config) -> list[tuple[str, bool, str]]:
    """(key, holds, fix) for each single-value check beyond its numeric range (`grpokit.config.ranges`)."""
    t, c, max_new = cfg.train, cfg.critic, cfg.rollout.max_new_tokens
    return [
        ("train.lr_schedule", t.lr_schedule in LR_SCHEDULES, "use " + " or ".join(LR_SCHEDULES.names())),
        ("train.sharding", t.sharding in SHARDINGS, "use " + " or ".join(SHARDINGS.names())),
        (
            "train.sharding",
            not (t.sharding == "fsdp2" and cfg.model.lora_r > 0),
            "fsdp2 shards a full model; a LoRA run (model.lora_r > 0) trains a small adapter: use train.sharding=ddp",
        ),
        (
            "model.precision",
            cfg.model.precision in PRECISION_CHOICES,
            "use " + ", ".join(PRECISION_CHOICES),
        ),
        (
            "reward.sandbox_read",
            cfg.reward.sandbox_read in ("limited", "all"),
            "use limited (Python, the system, the data and the run directory) or all (every file you can read)",
        ),
        (
            "train.report_to",
            set(t.report_to) <= set(TRACKERS),
            f"use a list of {', '.join(TRACKERS.primary())} (or [] for none)",
        ),
        ("critic.kind", c.kind in CRITIC_KINDS, "use " + ", ".join(CRITIC_KINDS.names())),
        (
            "critic.model",
            c.model is None or (c.kind in CRITIC_KINDS and CRITIC_KINDS[c.kind].own_trunk),
            "critic.model is read only with critic.kind=model: set that too, or drop critic.model",
        ),
        ("agent.tool_format", cfg.agent.tool_format in ("auto", "hermes", "template"), "use auto, hermes or template"),
        (
            "algo.overlong_cache",
            not cfg.algo.soft_overlong or 0 < cfg.algo.overlong_cache <= max_new,
            f"use a value in (0, rollout.max_new_tokens={max_new}]",
        ),
    ]


def check_values(cfg: Config) -> None:
    """The first failing value check, or a reward weight count that does not match, is one ConfigError."""
    for key, ok, fix in value_checks(cfg):
        if not ok:
            section, name = key.split(".")
            raise ConfigError(f"{key}={getattr(getattr(cfg, section), name)!r} is invalid: {fix}")
    if cfg.reward.weights and len(cfg.reward.weights) != len(cfg.reward.functions):
        raise ConfigError(
            f"reward.weights has {len(cfg.reward.weights)} values but reward.functions has "
            f"{len(cfg.reward.functions)}: give one weight per function"
        )


def resolve_config(cfg: Config) -> Config:
    """Fill derived values, bind components, validate everything; cross-field findings that are errors raise, the
    rest become `cfg.warnings`."""
    from .checks import run_checks

    check_ranges(cfg)  # first: derived values divide by some of them
    fill_derived(cfg)
    bind_components(cfg)
    check_monitor(cfg)
    check_values(cfg)
    findings = run_checks(cfg)
    for f in findings:
        if f.level == "error":
            raise ConfigError(f.message)
    cfg.warnings = [f.message for f in findings]
    return cfg
