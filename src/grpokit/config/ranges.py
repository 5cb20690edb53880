"""The range of every numeric config key, checked as the key is set (`--set`, a config file, a recipe, a resumed
run's config.yaml) and again when a config is resolved, so a value no run can use is one `ConfigError` before a
model, a tokenizer or a batch is built: `rollout.group_size=1000000000 is invalid: use 1 or more (at most 4096)`.

A range has a natural side (a count is 1 or more, a fraction lies in [0, 1], a temperature is > 0) and, where the
key has none, a sanity cap: far beyond any run anyone trains (DAPO samples 16 per prompt, long-CoT runs 32k tokens
per response), short of the values that overflow (`1e400`), exhaust memory (10^9 samples a step) or mean "never"
(a 10^308-second timeout). Infinity and NaN are outside every range. Each range is set here, once; docs/training.md
lists them (`table()`, a test holds the two equal).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from .errors import ConfigError

BIG = 10_000_000  # step, token and example counts
TOKENS = 1_048_576  # tokens of one response or episode part (2^20)
DAY_S = 86_400.0  # longest timeout: a day
HUGE = 1_000_000.0  # loss coefficients, clip bounds, reward weights: far past any published value


@dataclass(frozen=True)
class Range:
    """[low, high], or open at an end (`low_open`, `high_open`). `interval` words the error as "a value in
    [low, high]" (both ends meaningful) rather than "low or more (at most high)" (a natural floor and a sanity
    cap); `zero` says what 0 means; `note` ends the message (e.g. ", or null for no cap"); `words` replaces it all."""

    low: float
    high: float
    low_open: bool = False
    high_open: bool = False
    interval: bool = False
    zero: str = ""
    note: str = ""
    words: str = ""

    def holds(self, x: float) -> bool:
        if math.isnan(x):
            return False
        return (x > self.low if self.low_open else x >= self.low) and (
            x < self.high if self.high_open else x <= self.high
        )

    def text(self) -> str:
        """The range as an interval: [0, 1), (0, 86400]."""
        return f"{'(' if self.low_open else '['}{_num(self.low)}, {_num(self.high)}{')' if self.high_open else ']'}"

    def fix(self) -> str:
        if self.words:
            return self.words
        lo, hi = _num(self.low), _num(self.high)
        if self.interval:
            return f"use a value in {self.text()}{self.note}"
        floor = f"> {lo}" if self.low_open else f"{lo}{f' ({self.zero})' if self.zero else ''} or more"
        return f"use {floor} ({'below' if self.high_open else 'at most'} {hi}){self.note}"


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e16 else f"{x:g}"


def R(low: float, high: float, **kw: Any) -> Range:
    return Range(low, high, **kw)


def unit(**kw: Any) -> Range:
    """A fraction or probability: [0, 1]."""
    return Range(0, 1, interval=True, **kw)


def positive(high: float, **kw: Any) -> Range:
    return Range(0, high, low_open=True, **kw)


RANGES: dict[str, Range] = {
    # model
    "model.lora_r": R(0, 4096, zero="no LoRA"),
    "model.lora_alpha": R(1, 65536),
    "model.lora_dropout": R(0, 1, high_open=True, interval=True),
    # data
    "data.train_size": R(1, 1_000_000_000, note=", or null for all"),
    "data.eval_size": R(1, BIG),
    "data.max_prompt_tokens": R(1, BIG, note=", or null for no cap"),
    # rollout
    "rollout.prompts_per_step": R(1, 65536),
    "rollout.group_size": R(1, 4096),
    "rollout.max_new_tokens": R(1, TOKENS),
    "rollout.temperature": positive(100),
    "rollout.eval_temperature": positive(100),
    "rollout.top_p": positive(1, interval=True),
    "rollout.top_k": R(0, BIG, zero="off"),
    "rollout.min_new_tokens": R(0, TOKENS),
    "rollout.max_staleness": R(
        0,
        1,
        words="use 0 (synchronous) or 1 (the next step's rollouts sampled during this step's update, one update "
        "behind); more steps off-policy are not supported",
    ),
    "rollout.vllm_kv_cache_gib": R(0, 65536),
    "rollout.vllm_gpu_memory_utilization": positive(1, interval=True),
    "rollout.vllm_max_model_len": R(0, BIG, zero="from the data"),
    # reward
    "reward.weights": R(-HUGE, HUGE, interval=True),  # each weight
    "reward.timeout_s": positive(DAY_S),
    "reward.max_fail_frac": unit(),
    # algo: advantages, critic targets
    "algo.adv_eps": unit(),
    "algo.gamma": unit(),
    "algo.lam": unit(),
    "algo.lam_critic": unit(),
    "algo.gae_alpha": positive(HUGE),
    "algo.pass_k": R(1, 4096),
    "algo.gpg_threshold": unit(),
    # algo: policy losses
    "algo.eps_low": unit(note=" (PPO/GRPO use 0.2; 1 turns the lower clip off)"),
    "algo.eps_high": R(0, HUGE),
    "algo.dual_clip_c": Range(1, HUGE, low_open=True, note=", or null to disable"),
    "algo.delta": Range(1, HUGE, low_open=True, note=", or null to disable"),
    "algo.clip_c": R(0, 100),
    "algo.clip_c_low": R(0, 100),
    "algo.clip_c_high": R(0, 100),
    "algo.cispo_eps_low": R(0, HUGE),
    "algo.cispo_eps_high": R(0, HUGE),
    "algo.cispo_cap": positive(HUGE),
    "algo.clip_cov_ratio": unit(),
    "algo.clip_cov_lb": R(-HUGE, HUGE, interval=True),
    "algo.clip_cov_ub": R(-HUGE, HUGE, interval=True),
    "algo.kl_cov_ratio": unit(),
    "algo.kl_cov_coef": R(0, HUGE),
    "algo.top_entropy_rho": unit(),
    "algo.l_norm": positive(BIG),
    # algo: KL, reference, entropy
    "algo.kl_coef": R(0, HUGE, zero="no KL term"),
    "algo.kl_target": R(0, HUGE),
    "algo.kl_horizon": positive(1e12),
    "algo.ref_ema_eta": unit(),
    "algo.ref_sync_every": R(0, BIG),
    "algo.entropy_coef": R(0, HUGE),
    "algo.entropy_target": R(0, 100, note=" nats (log of the vocabulary size is the most there is)"),
    "algo.entropy_coef_lr": R(0, HUGE),
    # algo: correction, filtering, shaping, critic
    "algo.is_c_max": positive(HUGE),
    "algo.is_c_min": R(0, HUGE),
    "algo.max_gen_rounds": R(1, 10_000),
    "algo.ds_oversample": R(1, 1000),
    "algo.overlong_cache": R(0, TOKENS),
    "algo.overlong_factor": R(0, HUGE),
    "algo.value_clip": R(0, HUGE, note=", or null for no value clipping"),
    "algo.nll_coef": R(0, HUGE),
    "algo.truncated_reward": R(-HUGE, HUGE, interval=True, note=", or null to keep the score"),
    # train
    "train.steps": R(0, BIG),
    "train.lr": positive(1e9),  # tests blow a run up with 1e8
    "train.warmup_steps": R(0, BIG),
    "train.weight_decay": R(0, 100),
    "train.adam_beta1": R(0, 1, high_open=True, interval=True),  # 1: Adam's bias correction divides by 0
    "train.adam_beta2": R(0, 1, high_open=True, interval=True),
    "train.max_grad_norm": R(0, 1e12, zero="no clipping, as in TRL and transformers' Trainer"),
    "train.ppo_epochs": R(1, 1000),
    "train.mini_batches": R(1, 65536),
    "train.micro_batch_size": R(1, TOKENS),
    "train.eval_every": R(0, BIG, zero="off"),
    "train.save_every": R(0, BIG, zero="off"),
    "train.save_total_limit": R(0, BIG, zero="keep all"),
    "train.log_completions": R(0, 1_000_000),
    "train.seed": R(0, 2**32 - 1),  # numpy's seed range
    "train.autopilot_max_eps_high": R(0, HUGE),
    "train.autopilot_max_entropy_coef": R(0, HUGE),
    "train.autopilot_min_lr": R(0, 10),
    "train.autopilot_max_interventions": R(0, 1_000_000),
    # critic
    "critic.lr": positive(1e9),
    "critic.max_grad_norm": R(0, 1e12, zero="no clipping"),
    "critic.warmup_steps": R(0, BIG),
    "critic.weight_decay": R(0, 100),
    "critic.mlp_hidden": R(1, 65536),
    "critic.pretrain_max_steps": R(0, BIG, zero="off"),
    "critic.pretrain_ev": R(-1, 1, interval=True),
    "critic.pretrain_patience": R(1, 1_000_000),
    "critic.pretrain_epochs": R(1, 1000),
    # agent
    "agent.max_turns": R(1, 10_000),
    "agent.max_episode_tokens": R(0, BIG, zero="the model's context"),
    "agent.tool_timeout_s": positive(DAY_S),
    "agent.tool_result_max_chars": R(1, BIG),
}


def as_number(value: Any) -> float | None:
    """`value` as a float when it reads as a number (an int, a float, a string such as "1e400"; too large:
    infinity); None for anything else (bool, null, text, containers)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return None
    try:
        return float(value)
    except OverflowError:
        return math.inf
    except ValueError:
        return None


def check_range(key: str, value: Any) -> None:
    """ConfigError when `value` (a number, or a list of numbers for a list key) lies outside `key`'s range; the
    message names the key, the value as given and the range."""
    r = RANGES.get(key)
    if r is None:
        return
    for v in value if isinstance(value, list) else [value]:
        x = as_number(v)
        if x is not None and not r.holds(x):
            shown = value if isinstance(value, str) else repr(value)
            what = f" (each weight: {r.fix()})" if isinstance(value, list) else f": {r.fix()}"
            raise ConfigError(f"{key}={shown} is invalid{what}")


def table() -> str:
    """The ranges as the Markdown table rows of docs/training.md (one row per section; a test holds them equal)."""
    rows: dict[str, list[str]] = {}
    for key, r in RANGES.items():
        section, name = key.split(".")
        rows.setdefault(section, []).append(f"`{name}` {r.text()}")
    return "\n".join(f"| `{section}` | {', '.join(items)} |" for section, items in rows.items())


def check_ranges(cfg: Any) -> None:
    """Every ranged key of a built config (a Config changed in code skips `set_key`)."""
    for key in RANGES:
        section, name = key.split(".")
        check_range(key, getattr(getattr(cfg, section), name))
