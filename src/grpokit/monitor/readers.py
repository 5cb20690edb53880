"""Readers that turn the training logs people have into grpokit's canonical per-step metric rows.

`read_runs(path)` finds every run under a file or directory and returns one `RunLog` per run: one row per training
step (`{"step": int, <canonical name>: float, ...}`, NaN where a row lacks a signal the run records elsewhere), the
set of canonical names the log records (`available`), the source's own names (`raw_names`), what the log says about
the run's configuration (`context`, `config`) and how it was read (`notes`). `read_run(path)` is the one-run view.
A signal the log does not record is simply absent from `available`: nothing is derived from unrelated metrics.

Supported sources (the registry `READERS` holds them; `docs/doctor.md` has the signal -> key table):

- `grpokit`: a run directory (or its `metrics.jsonl`); names are grpokit's own, the config is `config.yaml`.
  Rows that share a step (the eval-only row written after the last train step) are merged into one row.
- `trl`: a TRL output directory, its `trainer_state.json`, or the newest `checkpoint-*/trainer_state.json` when the
  top-level one is absent. Rows come from `log_history`; names are mapped with `TRL_NAMES` (aliases across TRL
  versions included).
- `console`: printed output. verl's console logger (lines `... step:N - key:value - ...`, values plain or
  `np.float64(x)`; the config verl prints at start gives the context), the per-step dicts transformers' Trainer
  prints for TRL / Unsloth / ms-swift (`{'loss': ..., 'reward': ...}` among progress bars; the step comes from the
  progress bar, and a file holding several trainings, e.g. SFT then GRPO, is split into runs), or OpenRLHF's
  output (`Global step N: {...}` status lines, else the status postfix of its `Episode` bar, else its `Train epoch`
  bars; see `readers_openrlhf.py`), names mapped with `OPENRLHF_NAMES`.
- `verl`: verl's JSONL file logger (`{"step": N, "data": {...}}` per line, or flat keys). Names: `VERL_NAMES` and
  `VERL_PATTERNS` (0.3+ names and older aliases such as `actor/entropy_loss`).
- `wandb`: W&B run-history exports: the UI's CSV (`Step`, `<run> - <metric>` columns, several runs per file) or the
  API's history as CSV / JSON / JSONL (`_step`; TRL's `train/global_step` wins as the step).
- `tensorboard`: each directory of `events.out.tfevents.*` files is one run. Scalars are grouped by step; the tag
  flavour (grpokit, TRL's `train/...`/`eval/...` tags, verl, or OpenRLHF's `train/...` names in `OPENRLHF_NAMES`)
  is chosen by which mapping recognises the most tags; grpokit's config is read back from the `grpokit/config`
  text summary (or the run's `config.yaml`).

A directory is searched recursively and each run in it is read separately (never merged); a grpokit run
directory or a TRL output directory is one run. Canonical names are grpokit's (see `signals.py` and the trainer);
the mappings only ever map a source metric to the canonical name whose definition it matches, and say where the
match is only approximate.
"""

from __future__ import annotations

import ast
import csv
import json
import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grpokit.monitor import readers_openrlhf

NAN = float("nan")

# The canonical names other sources are mapped onto (grpokit logs more; its own rows keep every key).
CANONICAL: frozenset[str] = frozenset(
    {
        "reward/mean",
        "reward/std",
        "reward/accuracy",
        "reward/min",
        "reward/max",
        "zv/frac",
        "zv/sample_frac",
        "zv/all_correct",
        "zv/all_wrong",
        "entropy/token_mean",
        "kl_ref/k1",
        "kl_ref/k3",
        "actor/kl_loss",
        "actor/clipfrac",  # union of low- and high-side clipping (verl's pg_clipfrac, TRL's clip_ratio/region_mean)
        "actor/clipfrac_high",
        "actor/clipfrac_low",
        "actor/clipfrac_dual",
        "actor/ppo_kl",
        "actor/pg_loss",
        "actor/loss",
        "train/grad_norm",
        "train/lr",
        "length/mean",
        "length/min",
        "length/max",
        "length/correct_mean",
        "length/incorrect_mean",
        "length/truncation_rate",
        "mismatch/abs_diff_mean",
        "mismatch/abs_diff_max",
        "mismatch/rho_mean",
        "mismatch/rho_max",
        "mismatch/rho_min",
        "mismatch/kl_k1",
        "mismatch/kl_k3",
        "critic/explained_variance",
        "critic/value_loss",
        "time/step",
        "time/generate",
        "perf/tokens_per_s",
        "eval/accuracy",
        "train/skipped_update",
        "sampling/rounds",
    }
)

# --------------------------------------------------------------------------------------------- mapping tables
# Each table maps a source's own metric name to the canonical name(s) with the same definition. Order matters
# only when two source names map to the same canonical name in one row: the earlier entry wins.

#: TRL `GRPOTrainer` `log_history` keys (checked against TRL 1.16 `grpo_trainer.py`; older names kept at the end).
TRL_NAMES: dict[str, tuple[str, ...]] = {
    # mean / std over all completions of the step (nan-aware; std is the unbiased one, like grpokit's)
    "reward": ("reward/mean",),
    "reward_std": ("reward/std",),
    # fraction of completions whose group has zero reward std (torch.isclose(std, 0), atol 1e-8 as grpokit's
    # tolerance). It is sample-weighted, i.e. grpokit's `zv/sample_frac`. TRL's groups all have exactly
    # `num_generations` completions, and with equal group sizes the sample-weighted fraction equals the group
    # fraction `zv/frac`, so it is mapped to both. Caveat: with `scale_rewards="batch"` or
    # `multi_objective_aggregation="normalize_then_sum"` TRL tests the *batch* std instead (0 or 1 for the step).
    "frac_reward_zero_std": ("zv/sample_frac", "zv/frac"),
    # TRL's built-in `trl.rewards.accuracy_reward` returns 1/0 for a correct/incorrect answer: its mean is the
    # accuracy. (Any other reward function's mean is left unmapped: its meaning is unknown.)
    "rewards/accuracy_reward/mean": ("reward/accuracy",),
    # token-mean entropy over completion tokens
    "entropy": ("entropy/token_mean",),
    # per-token exp(ref - logp) - (ref - logp) - 1 averaged over completion tokens: the k3 estimator vs the
    # reference model (logged only when beta != 0)
    "kl": ("kl_ref/k3",),
    # token fractions: ratio < 1 - eps_low with A < 0, ratio > 1 + eps_high with A > 0, and their union
    "clip_ratio/low_mean": ("actor/clipfrac_low",),
    "clip_ratio/high_mean": ("actor/clipfrac_high",),
    "clip_ratio/region_mean": ("actor/clipfrac",),
    # the Trainer's loss: total loss (policy term + beta * KL - entropy bonus). `policy_loss` includes the
    # beta * KL term, unlike grpokit's `actor/pg_loss`, so it stays unmapped.
    "loss": ("actor/loss",),
    "grad_norm": ("train/grad_norm",),
    "learning_rate": ("train/lr",),
    # completion lengths in tokens; clipped_ratio = fraction of completions cut at max_completion_length
    "completions/mean_length": ("length/mean",),
    "completions/min_length": ("length/min",),
    "completions/max_length": ("length/max",),
    "completions/clipped_ratio": ("length/truncation_rate",),
    # |old_logp - sampling_logp| over completion tokens (vLLM importance-sampling correction on): the same
    # quantity as grpokit's |lambda| statistics. TRL's `sampling/importance_sampling_ratio/*` are the ratios
    # *after* TRL's truncation/masking (and per sequence in sequence modes), not grpokit's raw rho: unmapped.
    "sampling/sampling_logp_difference/mean": ("mismatch/abs_diff_mean",),
    "sampling/sampling_logp_difference/max": ("mismatch/abs_diff_max",),
    # wall time of one optimizer step (generation included), seconds
    "step_time": ("time/step",),
    # evaluation entries (`eval_` prefix in log_history)
    "eval_rewards/accuracy_reward/mean": ("eval/accuracy",),
    # TRL < 0.17 names
    "completion_length": ("length/mean",),
    "clip_ratio": ("actor/clipfrac",),
    # between TRL PR #3188 (2025-03-31) and PR #3212 (2025-04-02, the `completions/` prefix) lengths were logged as
    "mean_completion_length": ("length/mean",),
    "min_completion_length": ("length/min",),
    "max_completion_length": ("length/max",),
    # TRL < 0.16 logged each reward function's mean without the `/mean` suffix
    "rewards/accuracy_reward": ("reward/accuracy",),
    "eval_rewards/accuracy_reward": ("eval/accuracy",),
}

#: verl PPO/GRPO trainer metric names (`ray_trainer.py`, `metric_utils.py`, `dp_actor.py`, rollout correction).
VERL_NAMES: dict[str, tuple[str, ...]] = {
    # sequence score before any in-reward KL penalty (`critic/rewards/mean` is after it; equal without
    # use_kl_in_reward, but only the score is the reward grpokit means). verl logs no reward std.
    "critic/score/mean": ("reward/mean",),
    # per-step extremes of the score: a score that stays within [0, 1] is a 0/1 verifier (its mean an accuracy)
    "critic/score/min": ("reward/min",),
    "critic/score/max": ("reward/max",),
    # `agg_loss(entropy, mask, loss_agg_mode)`: the token mean under verl's default loss_agg_mode="token-mean"
    "actor/entropy": ("entropy/token_mean",),
    # verl <= 0.3 logged the token-mean entropy as `actor/entropy_loss` (a positive entropy, not a loss term)
    "actor/entropy_loss": ("entropy/token_mean",),
    # `torch.gt(clipped_loss, unclipped_loss)` token fraction: clipping on either side, so the union
    "actor/pg_clipfrac": ("actor/clipfrac",),
    # dual-clip fraction (A < 0 and ratio > clip_ratio_c)
    "actor/pg_clipfrac_lower": ("actor/clipfrac_dual",),
    "actor/ppo_kl": ("actor/ppo_kl",),
    "actor/pg_loss": ("actor/pg_loss",),
    # KL-loss term vs the reference (its estimator is `kl_loss_type`, low_var_kl by default); not mapped to
    # kl_ref/k3 because the estimator is configurable and low_var_kl is clamped
    "actor/kl_loss": ("actor/kl_loss",),
    "actor/loss": ("actor/loss",),
    "actor/grad_norm": ("train/grad_norm",),
    "actor/lr": ("train/lr",),
    # response lengths in tokens; clip_ratio = fraction of responses that hit max_response_length
    "response_length/mean": ("length/mean",),
    "response_length/min": ("length/min",),
    "response_length/max": ("length/max",),
    "response_length/clip_ratio": ("length/truncation_rate",),
    "critic/vf_explained_var": ("critic/explained_variance",),
    "critic/vf_loss": ("critic/value_loss",),
    "timing_s/step": ("time/step",),
    "timing_s/gen": ("time/generate",),
    "timing/step": ("time/step",),  # verl <= 0.2
    "timing/gen": ("time/generate",),
    # verl <= 0.2 with the KL penalty in the reward: mean (old_logp - ref_logp) over response tokens with the
    # default kl_penalty="kl", i.e. the k1 estimator against the reference
    "critic/kl": ("kl_ref/k1",),
    # total tokens / (step time * n_gpus): grpokit's tokens/s per GPU (identical on one GPU; a constant factor
    # otherwise, which leaves trends and ratios unchanged)
    "perf/throughput": ("perf/tokens_per_s",),
    # training vs rollout policy: mean(rollout_logp - old_logp) and mean(exp(d) - d - 1), d = old - rollout,
    # over response tokens: grpokit's mismatch kl_k1 / kl_k3. The `rollout_is_*` weights are after truncation
    # (and per sequence in sequence modes), not grpokit's raw rho: unmapped.
    "rollout_corr/kl": ("mismatch/kl_k1",),
    "rollout_corr/k3_kl": ("mismatch/kl_k3",),
    "mismatch/kl": ("mismatch/kl_k1",),  # verl's earlier `mismatch/` prefix for the same metrics
    "mismatch/k3_kl": ("mismatch/kl_k3",),
}

#: OpenRLHF PPO/GRPO trainer metrics (checked against OpenRLHF's `ppo_trainer.py`, `ray/ppo_actor.py`,
#: `ppo_utils/experience_maker.py`, `utils/logging_utils.py` at commit 3c3be62, 2026-08). Its W&B and TensorBoard
#: loggers write them as `train/<name>` (and `eval/<name>`), like transformers, so the flavour is told apart by
#: the names themselves.
OPENRLHF_NAMES: dict[str, tuple[str, ...]] = {
    "reward": ("reward/mean",),  # per-sample reward (after any length penalty)
    "response_length": ("length/mean",),
    "response_clip_ratio": ("length/truncation_rate",),  # samples that hit the generation limit
    # `compute_approx_kl(action_logp, base_logp, --algo.kl.estimator)` vs the reference; the estimator's default is
    # k1. Mapped to k1 (a run set to k2/k3 logs that estimator under the same name).
    "kl": ("kl_ref/k1",),
    "ppo_clip_ratio": ("actor/clipfrac",),  # torch.lt(surr2, surr1): clipping on either side
    "ppo_kl": ("actor/ppo_kl",),
    "policy_loss": ("actor/pg_loss",),
    "entropy_loss": ("entropy/token_mean",),  # aggregate of the token entropy (logged when computed)
    "actor_grad_norm": ("train/grad_norm",),
    "actor_lr": ("train/lr",),
    "critic_loss": ("critic/value_loss",),
}
# The console's short names (`act_loss`, `rm`, `glen`, ...) are expanded to these first
# (`readers_openrlhf.SHORT_NAMES`).

#: verl names with a variable part. `val-core/<data_source>/acc/mean@N` is held-out accuracy; when a run
#: validates on several data sources (several names match) it is left unmapped rather than averaged.
VERL_PATTERNS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"^val-core/.+/acc/mean@\d+$"), "eval/accuracy"),
    # verl <= 0.3: `val/test_score/<data_source>` (the verifier's score, an accuracy for 0/1 verifiers)
    (re.compile(r"^val/test_score/.+$"), "eval/accuracy"),
]

# TensorBoard tags: grpokit and verl log their own names; TRL (transformers' TensorBoardCallback) writes
# `train/<key>` for training logs and `eval/<key>` for `eval_<key>` logs.
_TRL_TB_PREFIXES = (("train/", ""), ("eval/", "eval_"))


# --------------------------------------------------------------------------------------------------- result


@dataclass
class RunLog:
    """A training log in canonical form."""

    source: str  # "grpokit" | "trl" | "trl-console" | "verl" | "openrlhf-console" | "tensorboard" | "wandb"
    rows: list[dict[str, float]]  # one per step, sorted by step; each has "step" and every name in `available`
    available: set[str]  # canonical names recorded at least once
    raw_names: set[str]  # the source's own metric names seen
    path: Path
    flavor: str | None = None  # whose metric names the log uses ("grpokit" | "trl" | "verl"), when not implied
    name: str = ""  # which run of `path` this is (a sub-folder, a file, `file#2` for a file's second run)
    context: dict[str, Any] = field(default_factory=dict)  # the run's switches, when the log says (detector context)
    config: dict[str, Any] = field(default_factory=dict)  # grpokit's full config, when the log carries it
    notes: list[str] = field(default_factory=list)  # how the log was read (inferred steps, skipped parts)

    @property
    def steps(self) -> list[int]:
        return [int(r["step"]) for r in self.rows]

    def series(self, name: str) -> tuple[list[int], list[float]]:
        """(steps, values) of one canonical signal, skipping steps where it is NaN."""
        pts = [(int(r["step"]), r[name]) for r in self.rows if name in r and math.isfinite(r[name])]
        return [s for s, _ in pts], [v for _, v in pts]


# -------------------------------------------------------------------------------------------- value parsing

_WRAPPED = re.compile(r"^(?:np|numpy|torch)?\.?(?:float|int|uint|bool_?|tensor)\w*\((.*)\)$")


def _to_float(v: Any) -> float | None:
    """A number from a JSON value or a logged token (`0.5`, `nan`, `np.float64(0.5)`, `tensor(0.5)`); None if
    the value is not numeric. JSON null (grpokit writes NaN as null) reads as NaN."""
    if v is None:
        return NAN
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, str):
        s = v.strip().rstrip(",")
        m = _WRAPPED.match(s)
        if m:
            s = m.group(1).split(",")[0].strip()  # tensor(0.5, device='cuda:0') -> 0.5
        try:
            return float(s)
        except ValueError:
            return None
    return None


def _numeric_items(d: dict[str, Any]) -> dict[str, float]:
    out = {}
    for k, v in d.items():
        f = _to_float(v)
        if f is not None:
            out[str(k)] = f
    return out


def _step_of(v: Any) -> int | None:
    f = _to_float(v)
    if f is None or not math.isfinite(f):
        return None
    return int(f)


# ------------------------------------------------------------------------------------------ canonicalising

RawRows = dict[int, dict[str, float]]  # step -> {source name: value}; later writes to a step win


def _merge(rows: RawRows, step: int, values: dict[str, float]) -> None:
    rows.setdefault(step, {}).update(values)


Mapper = Callable[[Iterable[str]], dict[str, tuple[str, ...]]]


def _table_mapper(table: dict[str, tuple[str, ...]], patterns: list[tuple[re.Pattern[str], str]] = ()) -> Mapper:
    """Source names -> canonical names through an exact table, then patterns (a pattern that matches several
    distinct names in one run is ambiguous and maps none of them)."""

    def mapper(names: Iterable[str]) -> dict[str, tuple[str, ...]]:
        names = set(names)
        out = {n: table[n] for n in names if n in table}
        for pat, canon in patterns:
            hits = [n for n in names if n not in out and pat.match(n)]
            if len(hits) == 1:
                out[hits[0]] = (canon,)
        return out

    return mapper


def _identity_mapper(names: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """grpokit's own names are canonical: everything passes through."""
    return {n: (n,) for n in names}


def _prefixed_mapper(inner: Mapper, prefixes: tuple[tuple[str, str], ...]) -> Mapper:
    """TensorBoard tags `train/x` / `eval/x` written by transformers for log keys `x` / `eval_x`."""

    def mapper(names: Iterable[str]) -> dict[str, tuple[str, ...]]:
        key_of = {}
        for n in names:
            for pre, repl in prefixes:
                if n.startswith(pre):
                    key_of[n] = repl + n[len(pre) :]
                    break
        inner_map = inner(key_of.values())
        return {n: inner_map[k] for n, k in key_of.items() if k in inner_map}

    return mapper


_TRL_MAPPER = _table_mapper(TRL_NAMES)
_TRL_TB_MAPPER = _prefixed_mapper(_TRL_MAPPER, _TRL_TB_PREFIXES)
_VERL_MAPPER = _table_mapper(VERL_NAMES, VERL_PATTERNS)
_OPENRLHF_CONSOLE_MAPPER = _table_mapper(OPENRLHF_NAMES)
_OPENRLHF_MAPPER = _prefixed_mapper(_OPENRLHF_CONSOLE_MAPPER, (("train/", ""), ("eval/", "eval_")))


def _grpokit_score(names: Iterable[str]) -> int:
    return sum(1 for n in names if n in CANONICAL)


#: How each flavour maps names, and how strongly a set of names looks like that flavour (for sniffing JSONL and
#: TensorBoard tags, where several flavours share a container format).
FLAVORS: dict[str, tuple[Mapper, Callable[[Iterable[str]], int]]] = {
    "grpokit": (_identity_mapper, _grpokit_score),
    "trl": (_TRL_TB_MAPPER, lambda ns: len(_TRL_TB_MAPPER(ns))),
    "verl": (_VERL_MAPPER, lambda ns: len(_VERL_MAPPER(ns))),
    "openrlhf": (_OPENRLHF_MAPPER, lambda ns: len(_OPENRLHF_MAPPER(ns))),
}


def _best_flavor(names: Iterable[str], candidates: Iterable[str]) -> tuple[str, int]:
    names = list(names)
    scored = [(FLAVORS[f][1](names), i, f) for i, f in enumerate(candidates)]
    score, _, flavor = max(scored, key=lambda t: (t[0], -t[1]))  # ties go to the earlier candidate
    return flavor, score


def _canonicalise(raw: RawRows, mapper: Mapper) -> tuple[list[dict[str, float]], set[str], set[str]]:
    raw_names = {k for r in raw.values() for k in r}
    name_map = mapper(raw_names)
    available = {c for cs in name_map.values() for c in cs}
    rows = []
    for step in sorted(raw):
        row: dict[str, float] = {"step": step}
        for name, value in raw[step].items():
            for canon in name_map.get(name, ()):
                # the first source name seen for a canonical name wins, unless it is NaN and a later one is not
                if canon not in row or (math.isnan(row[canon]) and not math.isnan(value)):
                    row[canon] = value
        for canon in available:
            row.setdefault(canon, NAN)
        rows.append(row)
    return rows, available, raw_names


def _ordered(raw: RawRows, order: list[str]) -> RawRows:
    """Reorder each row's keys by mapping-table priority so that `_canonicalise`'s first-wins is table order."""
    rank = {n: i for i, n in enumerate(order)}
    return {s: dict(sorted(r.items(), key=lambda kv: rank.get(kv[0], len(rank)))) for s, r in raw.items()}


# ------------------------------------------------------------------------------------------------ the readers


#: A parsed run before canonicalisation: raw rows, the name mapper, the flavour, a sub-name, context and notes.
@dataclass
class Segment:
    raw: RawRows
    mapper: Mapper
    flavor: str | None = None
    name: str = ""
    context: dict[str, Any] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def _read_jsonl_objects(path: Path) -> list[dict[str, Any]]:
    out = []
    with path.open(encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                obj = json.loads(line)
            except (json.JSONDecodeError, RecursionError):
                continue  # a line cut by a running writer
            if isinstance(obj, dict):
                out.append(obj)
    return out


def _jsonl_rows(objs: list[dict[str, Any]], step_key: str = "step") -> RawRows:
    """Flat `{"step": N, k: v}` objects, or verl's file logger `{"step": N, "data": {k: v}}`."""
    rows: RawRows = {}
    for obj in objs:
        step = _step_of(obj.get(step_key))
        if step is None:
            continue
        data = obj["data"] if isinstance(obj.get("data"), dict) else {k: v for k, v in obj.items() if k != step_key}
        _merge(rows, step, _numeric_items(data))
    return rows


def _jsonl_flavor(path: Path, max_lines: int = 50) -> str | None:
    """'grpokit', 'verl' or 'wandb' for a JSONL metrics file (None if it is none of them)."""
    names: set[str] = set()
    nested = wandb = False
    seen = 0
    with path.open(encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                obj = json.loads(line)
            except (json.JSONDecodeError, RecursionError):
                continue
            if not isinstance(obj, dict):
                return None
            if "step" not in obj:
                if "_step" in obj:
                    wandb = True
                    seen += 1
                    if seen >= max_lines:
                        break
                    continue
                return None
            if isinstance(obj.get("data"), dict):
                nested = True
                names |= set(obj["data"])
            else:
                names |= set(obj) - {"step"}
            seen += 1
            if seen >= max_lines:
                break
    if wandb and not names:
        return "wandb"
    if nested:
        return "verl"
    if not seen:
        return None
    flavor, score = _best_flavor(names, ("grpokit", "verl"))
    return flavor if score > 0 else None


def _yaml_load(text: str) -> dict[str, Any]:
    import yaml

    try:
        cfg = yaml.safe_load(text)
    except yaml.YAMLError:
        return {}
    return cfg if isinstance(cfg, dict) else {}


def grpokit_context(cfg: dict[str, Any]) -> dict[str, Any]:
    """The detectors' context from a grpokit config (config.yaml, or the copy in TensorBoard)."""
    if not cfg:
        return {}
    a = cfg.get("algo") if isinstance(cfg.get("algo"), dict) else {}
    t = cfg.get("train") if isinstance(cfg.get("train"), dict) else {}
    r = cfg.get("rollout") if isinstance(cfg.get("rollout"), dict) else {}
    ctx = {
        "dynamic_sampling": a.get("dynamic_sampling"),
        "policy_loss": a.get("policy_loss"),
        "eps_low": a.get("eps_low"),
        "eps_high": a.get("eps_high"),
        "epochs": t.get("epochs", 1),
        "mini_batches": t.get("mini_batches", 1),
        "is_correction": a.get("is_correction"),
        "entropy_coef": a.get("entropy_coef"),
        "kl_controller": a.get("kl_controller"),
        "soft_overlong": a.get("soft_overlong"),
        "max_gen_rounds": a.get("max_gen_rounds"),
        "temperature": r.get("temperature"),
        "recipe": cfg.get("recipe"),
    }
    return {k: v for k, v in ctx.items() if v is not None}


class Reader:
    """One log format. `runs(path)` returns the runs it finds *at* a path (a file, or a directory that is one run
    in this format), as (name, files) pairs, or [] if the path is not in this format; `read(files)` returns the
    run's segments (a console log may hold several runs one after another)."""

    name = ""

    def runs(self, path: Path) -> list[tuple[str, list[Path]]]:
        raise NotImplementedError

    def read(self, files: list[Path]) -> list[Segment]:
        raise NotImplementedError

    # backwards-compatible single-run view
    def locate(self, path: Path) -> list[Path] | None:
        found = self.runs(path)
        return found[0][1] if found else None


class GrpokitReader(Reader):
    name = "grpokit"

    def runs(self, path: Path) -> list[tuple[str, list[Path]]]:
        f = path / "metrics.jsonl" if path.is_dir() else path
        if f.is_file() and f.suffix == ".jsonl":
            flavor = _jsonl_flavor(f)
            if flavor == "grpokit" or (flavor is None and f.name == "metrics.jsonl" and _looks_empty(f)):
                return [("", [f])]
        return []

    def read(self, files: list[Path]) -> list[Segment]:
        f = files[0]
        cfg_path = f.parent / "config.yaml"
        cfg = _yaml_load(cfg_path.read_text(encoding="utf-8", errors="replace")) if cfg_path.is_file() else {}
        return [
            Segment(_jsonl_rows(_read_jsonl_objects(f)), _identity_mapper, "grpokit", "", grpokit_context(cfg), cfg)
        ]


def _looks_empty(f: Path) -> bool:
    """A just-started grpokit run: metrics.jsonl exists but holds no complete line yet."""
    try:
        return not f.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return False


def _checkpoint_number(p: Path) -> int:
    m = re.search(r"checkpoint-(\d+)$", p.parent.name)
    return int(m.group(1)) if m else -1


class TrlReader(Reader):
    name = "trl"

    def runs(self, path: Path) -> list[tuple[str, list[Path]]]:
        if path.is_dir():
            top = path / "trainer_state.json"
            if top.is_file():
                return [("", [top])]
            ckpts = sorted(path.glob("checkpoint-*/trainer_state.json"), key=_checkpoint_number)
            return [("", [ckpts[-1]])] if ckpts else []
        if path.suffix == ".json" and path.is_file():
            try:
                state = json.loads(path.read_text(encoding="utf-8"))
            except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
                return []
            if isinstance(state, dict) and isinstance(state.get("log_history"), list):
                return [("", [path])]
        return []

    def read(self, files: list[Path]) -> list[Segment]:
        state = json.loads(files[0].read_text(encoding="utf-8"))
        rows: RawRows = {}
        for entry in state.get("log_history", []):
            step = _step_of(entry.get("step")) if isinstance(entry, dict) else None
            if step is not None:
                _merge(rows, step, _numeric_items({k: v for k, v in entry.items() if k != "step"}))
        ctx: dict[str, Any] = {}
        notes = []
        interval = state.get("logging_steps")
        if isinstance(interval, (int, float)) and interval > 1:
            notes.append(f"trainer_state.json: logging_steps = {int(interval)}")
        return [Segment(_ordered(rows, list(TRL_NAMES)), _TRL_MAPPER, "trl", "", ctx, {}, notes)]


# --------------------------------------------------------------------------------------------- console logs

# verl: `step:12 - actor/entropy:0.43 - ...`, after any prefix (`(TaskRunner pid=1) `, timestamps); not `global_step:`
_VERL_LINE = re.compile(r"(?<![\w/])step:(\d+)\s+-\s+(.*)$")
# TRL / transformers: the Trainer prints each log as a Python dict (`{'loss': 0.1, 'reward': ...}`); ms-swift as JSON
_TRL_DICT = re.compile(r"\{\s*['\"](?:loss|reward|train_runtime|eval_loss|learning_rate|grad_norm)['\"]\s*:")
# a tqdm bar's counter: `| 12/300 [00:41<...`
_BAR = re.compile(r"(\d+)/(\d+) \[")
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_TEXT_SNIFF_BYTES = 4 << 20


def _is_binary(path: Path) -> bool:
    try:
        with path.open("rb") as f:
            return b"\x00" in f.read(8192)
    except OSError:
        return True


def _read_text(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace")


def _verl_row_kind(values: dict[str, float]) -> str | None:
    if any(k.startswith(("actor/", "critic/", "response_length/")) for k in values):
        return "rl"
    if any(k in ("train/loss", "val/loss") for k in values):
        return "sft"  # verl's SFT trainer prints `step:N - train/loss:...` in the same format
    return None  # a validation-only line: it joins whichever run it sits in


def _verl_console_segments(text: str) -> list[RawRows]:
    """verl console lines grouped into runs: a new run starts when the lines switch between SFT and RL, or when
    the step goes back (a fresh training, not a resume: verl resumes at the next step)."""
    segments: list[RawRows] = []
    rows: RawRows = {}
    kind: str | None = None
    last: int | None = None
    for line in text.splitlines():
        m = _VERL_LINE.search(_ANSI.sub("", line))
        if not m:
            continue
        values = {}
        for part in m.group(2).split(" - "):
            key, sep, val = part.strip().rpartition(":")
            v = _to_float(val) if sep and key else None
            if v is not None:
                values[key.strip()] = v
        if not values:
            continue
        step, k = int(m.group(1)), _verl_row_kind(values)
        if rows and ((k is not None and kind is not None and k != kind) or (last is not None and step < last)):
            segments.append(rows)
            rows, kind = {}, None
        kind = k or kind
        _merge(rows, step, values)
        last = step
    if rows:
        segments.append(rows)
    return segments


def _verl_console_rows(text: str) -> RawRows:
    """All verl console rows of a text, merged by step (one run)."""
    rows: RawRows = {}
    for seg in _verl_console_segments(text):
        for step, values in seg.items():
            _merge(rows, step, values)
    return rows


_ERROR_LINE = re.compile(r"^\W*(?:\(\w+ pid=\d+\)\s*)?([A-Za-z_.]*(?:Error|Exception|Interrupt)\b.*)$")


def _tail_error(text: str) -> str | None:
    """The exception a log ends with: the error line after the last bare `Traceback (most recent call last):` near
    its end. A traceback printed by a logger (`ERROR:...:Traceback`) was handled and is not a crash."""
    tail = _ANSI.sub("", text[-30000:]).splitlines()
    idx = max((i for i, line in enumerate(tail) if "Traceback (most recent call last)" in line), default=None)
    if idx is None or re.search(r"(ERROR|WARNING|INFO)[:\s].*Traceback", tail[idx]):
        return None
    if any(
        _VERL_LINE.search(line) or _TRL_DICT.search(line) or readers_openrlhf.GLOBAL_STEP.search(line)
        for line in tail[idx:]
    ):
        return None  # training went on after it
    after = tail[idx + 1 :]
    for i, line in enumerate(after):
        m = _ERROR_LINE.match(line.strip())
        if m:
            # Ray wraps a worker's exception (`RayTaskError(ValueError): ray::Actor.fit() ...`): name the worker's own
            # error line when the log prints it
            inner = re.match(r"[\w.]*RayTaskError\((\w+)\)", m.group(1))
            for later in after[i + 1 :] if inner else ():
                m2 = _ERROR_LINE.match(later.strip())
                if m2 and m2.group(1).startswith(inner.group(1) + ":"):
                    return m2.group(1)[:200]
            return m.group(1)[:200]
    return None


# the config dict verl prints before training, and transformers' Trainer banner
_VERL_START = re.compile(r"'actor_rollout_ref':\s*\{")
_TRAINER_START = re.compile(r"\*\*\*\*\* Running training \*\*\*\*\*|Num examples = ")


_VERL_CFG = {
    "ppo_epochs": re.compile(r"'ppo_epochs':\s*(\d+)"),
    "ppo_mini_batch_size": re.compile(r"'ppo_mini_batch_size':\s*(\d+)"),
    "train_batch_size": re.compile(r"'train_batch_size':\s*(\d+)"),
    "clip_ratio_low": re.compile(r"'clip_ratio_low':\s*([0-9.eE+-]+)"),
    "clip_ratio_high": re.compile(r"'clip_ratio_high':\s*([0-9.eE+-]+)"),
    "clip_ratio": re.compile(r"'clip_ratio':\s*([0-9.eE+-]+)"),
    "entropy_coeff": re.compile(r"'entropy_coeff':\s*([0-9.eE+-]+)"),
    "adv_estimator": re.compile(r"'adv_estimator':\s*'(\w+)'"),
    "loss_mode": re.compile(r"'loss_mode':\s*'(\w+)'"),
    "kl_ctrl_type": re.compile(r"'kl_ctrl':\s*\{[^}]*'type':\s*'(\w+)'"),
}


def verl_context(text: str) -> dict[str, Any]:
    """The detectors' context from the config verl prints at start (the first value of each key: the actor's)."""
    found: dict[str, str] = {}
    head = text[: 2 << 20]
    for key, pat in _VERL_CFG.items():
        m = pat.search(head)
        if m:
            found[key] = m.group(1)
    if not found:
        return {}
    ctx: dict[str, Any] = {"trainer": "verl"}
    try:
        if "ppo_epochs" in found:
            ctx["epochs"] = int(found["ppo_epochs"])
        if "train_batch_size" in found and "ppo_mini_batch_size" in found and int(found["ppo_mini_batch_size"]) > 0:
            ctx["mini_batches"] = max(int(found["train_batch_size"]) // int(found["ppo_mini_batch_size"]), 1)
        low = float(found.get("clip_ratio_low", found.get("clip_ratio", "nan")))
        high = float(found.get("clip_ratio_high", found.get("clip_ratio", "nan")))
        if math.isfinite(low):
            ctx["eps_low"] = low
        if math.isfinite(high):
            ctx["eps_high"] = high
        if "entropy_coeff" in found:
            ctx["entropy_coef"] = float(found["entropy_coeff"])
    except ValueError:
        pass
    if "adv_estimator" in found:
        ctx["recipe"] = found["adv_estimator"]
    if "loss_mode" in found:
        ctx["policy_loss"] = {"vanilla": "ppo_clip"}.get(found["loss_mode"], found["loss_mode"])
    if found.get("kl_ctrl_type") == "adaptive":
        ctx["kl_controller"] = "adaptive"
    return ctx


def _dict_at(line: str, start: int) -> dict[str, Any] | None:
    """The flat Python/JSON dict starting at `start` in a line (None if it does not parse)."""
    end = line.find("}", start)
    while end != -1:
        chunk = line[start : end + 1]
        try:
            obj = ast.literal_eval(chunk)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            try:
                obj = json.loads(chunk)
            except (json.JSONDecodeError, RecursionError):
                obj = None
        if isinstance(obj, dict):
            return obj
        end = line.find("}", end + 1)
    return None


_RL_KEYS = ("reward", "kl", "entropy", "frac_reward_zero_std", "reward_std", "completion_length")


def _is_rl_row(d: dict[str, Any]) -> bool:
    return any(k in d or any(str(x).startswith(k) for x in d) for k in _RL_KEYS) or any(
        str(k).startswith(("rewards/", "completions/", "clip_ratio")) for k in d
    )


def _trl_console_segments(text: str) -> list[tuple[RawRows, list[str]]]:
    """Per-step dicts printed by transformers' Trainer (TRL, Unsloth, ms-swift), among progress bars and other
    output. The step of a dict is its `global_step/max_steps` (ms-swift) or `step` entry, else the counter of the
    training progress bar printed since the previous dict, else the previous step plus the logging interval seen
    so far (1 at first). A new run starts when rows switch between supervised (no reward) and RL, when the
    progress bar's total changes, or when the step goes back."""
    segments: list[tuple[RawRows, list[str]]] = []
    rows: RawRows = {}
    kind: bool | None = None
    total: int | None = None
    last_step: int | None = None
    interval = 1
    inferred = known = 0
    bar: tuple[int, int] | None = None

    def close() -> None:
        nonlocal rows, inferred, known, last_step, interval, total, kind
        if rows:
            notes = []
            if inferred and not known:
                notes.append(
                    "this console log prints no step numbers or progress bars for these rows: they are numbered "
                    "1, 2, ... and the logging interval is unknown"
                )
            elif inferred:
                notes.append(f"{inferred} of {inferred + known} rows had no progress bar: their step was inferred")
            segments.append((rows, notes))
        rows, inferred, known, last_step, interval, total, kind = {}, 0, 0, None, 1, None, None

    for raw_line in text.replace("\r", "\n").splitlines():
        line = _ANSI.sub("", raw_line)
        m = _TRL_DICT.search(line)
        for b in _BAR.finditer(line[: m.start()] if m else line):
            n, t = int(b.group(1)), int(b.group(2))
            if 1 <= n <= t:
                bar = (n, t)
        if not m:
            continue
        d = _dict_at(line, m.start())
        if d is None or "train_runtime" in d:
            if d is not None:
                close()  # the end-of-training summary closes a run
            bar = None
            continue
        step: int | None = None
        this_total = None
        gs = d.get("global_step/max_steps")
        if isinstance(gs, str) and "/" in gs:
            a, _, b_ = gs.partition("/")
            step, this_total = _step_of(a), _step_of(b_)
        elif _step_of(d.get("step")) is not None:
            step = _step_of(d.get("step"))
        elif bar is not None:
            step, this_total = bar
        if all(str(k).startswith("eval_") or k in ("epoch", "step") for k in d):
            # an evaluation log: it belongs to the training step it was printed at
            at = step if step is not None else last_step
            if at is not None:
                _merge(rows, at, _numeric_items({k: v for k, v in d.items() if k != "step"}))
            bar = None
            continue
        is_rl = _is_rl_row(d)
        restart = (
            (kind is not None and is_rl != kind)
            or (this_total is not None and total is not None and this_total != total)
            or (step is not None and last_step is not None and step < last_step)
        )
        if restart:
            close()
        kind = is_rl
        total = this_total if this_total is not None else total
        if step is None or (last_step is not None and step == last_step):
            if step is None:
                inferred += 1
            step = (last_step or 0) + interval
        else:
            known += 1
            if last_step is not None and step > last_step:
                interval = step - last_step
        values = _numeric_items({k: v for k, v in d.items() if k not in ("step", "global_step/max_steps")})
        _merge(rows, step, values)
        last_step = step
        bar = None
    close()
    return segments


def _console_kind(text: str) -> str | None:
    """'verl', 'trl-console' or 'openrlhf' for a text log, by which kind of metric line it holds more of."""
    sample = text[:_TEXT_SNIFF_BYTES]
    verl = sum(1 for line in sample.splitlines() if _VERL_LINE.search(_ANSI.sub("", line)))
    orlhf = readers_openrlhf.score(_ANSI.sub("", sample))
    # an OpenRLHF status line is a dict too; count only the others as TRL's
    trl = len(_TRL_DICT.findall(sample)) - len(readers_openrlhf.GLOBAL_STEP.findall(sample))
    if not verl and trl <= 0 and not orlhf:
        # a training that printed its start but no step (it crashed or was stopped before step 1)
        if _VERL_START.search(sample):
            return "verl"
        if _TRAINER_START.search(sample):
            return "trl-console"
        if readers_openrlhf.started(sample):
            return "openrlhf"
        return None
    if orlhf >= max(verl, trl):
        return "openrlhf"
    return "verl" if verl >= trl else "trl-console"


class ConsoleReader(Reader):
    """Printed training output: verl's console logger, the per-step dicts of transformers' Trainer (TRL, Unsloth,
    ms-swift) mixed with progress bars, or OpenRLHF's status lines and progress bars. Any text file (`.log`,
    `.txt`, `.out`, `.md`, no suffix, ...)."""

    name = "console"

    def runs(self, path: Path) -> list[tuple[str, list[Path]]]:
        if not path.is_file() or path.suffix.lower() in _STRUCTURED_SUFFIXES or _is_binary(path):
            return []
        if path.name.startswith("events.out.tfevents."):
            return []
        try:
            with path.open(encoding="utf-8", errors="replace") as f:
                head = f.read(_TEXT_SNIFF_BYTES)
        except OSError:
            return []
        return [("", [path])] if _console_kind(head) else []

    def read(self, files: list[Path]) -> list[Segment]:
        text = _read_text(files[0])
        kind = _console_kind(text)
        err = _tail_error(text)
        tail = [f"the log ends with an error: {err}"] if err else []
        if kind == "openrlhf":
            rows, notes = readers_openrlhf.read(text)
            raw = _ordered(rows, list(OPENRLHF_NAMES))
            ctx = readers_openrlhf.context(text)
            return [Segment(raw, _OPENRLHF_CONSOLE_MAPPER, "openrlhf", "", ctx, {}, notes + tail)]
        if kind == "verl":
            ctx = verl_context(text)
            segs = _verl_console_segments(text) or [{}]
            return [
                Segment(
                    _ordered(rows, list(VERL_NAMES)),
                    _VERL_MAPPER,
                    "verl",
                    f"#{i + 1}" if len(segs) > 1 else "",
                    ctx,
                    {},
                    list(tail) if i == len(segs) - 1 else [],
                )
                for i, rows in enumerate(segs)
            ]
        out = []
        segs = _trl_console_segments(text) or [({}, [])]
        for i, (rows, notes) in enumerate(segs):
            name = f"#{i + 1}" if len(segs) > 1 else ""
            notes = notes + (tail if i == len(segs) - 1 else [])
            out.append(Segment(_ordered(rows, list(TRL_NAMES)), _TRL_MAPPER, "trl", name, {}, {}, notes))
        return out


class VerlJsonlReader(Reader):
    """verl's JSONL file logger (`{"step": N, "data": {...}}` per line, or flat keys)."""

    name = "verl"

    def runs(self, path: Path) -> list[tuple[str, list[Path]]]:
        if path.is_file() and path.suffix == ".jsonl" and _jsonl_flavor(path) == "verl":
            return [("", [path])]
        return []

    def read(self, files: list[Path]) -> list[Segment]:
        rows = _jsonl_rows(_read_jsonl_objects(files[0]))
        return [Segment(_ordered(rows, list(VERL_NAMES)), _VERL_MAPPER, "verl")]


# ------------------------------------------------------------------------------------------------- W&B exports

_WANDB_STEP_COLUMNS = ("train/global_step", "trainer/global_step", "global_step", "Step", "step", "_step")
_WANDB_SKIP = re.compile(r"(__MIN|__MAX|_runtime|_timestamp|_wandb.*)$")


def _wandb_records_to_runs(records: list[dict[str, Any]]) -> dict[str, RawRows]:
    """W&B history records (CSV rows or JSON objects) -> raw rows per run. The UI's panel export names columns
    `<run name> - <metric>` (several runs in one file) with `__MIN`/`__MAX` companions; the API export
    (`run.history()`, `scan_history()`) has plain metric names and `_step`. TRL's `train/global_step` is the
    trainer's step (W&B's `_step` counts log calls) and wins when present."""
    cols = {k for r in records for k in r}
    step_col = next((c for c in _WANDB_STEP_COLUMNS if c in cols), None)
    if step_col is None:
        return {}
    runs: dict[str, RawRows] = {}
    for r in records:
        step = _step_of(r.get(step_col))
        if step is None:
            continue
        for k, v in r.items():
            if k == step_col or k in _WANDB_STEP_COLUMNS or _WANDB_SKIP.search(str(k)):
                continue
            run, sep, metric = str(k).partition(" - ")
            if not sep:
                run, metric = "", str(k)
            f = _to_float(v) if not (isinstance(v, str) and not v.strip()) else None
            if f is None or (isinstance(v, str) and not v.strip()):
                continue
            _merge(runs.setdefault(run, {}), step, {metric: f})
    return runs


class WandbReader(Reader):
    """W&B run-history exports: the UI's CSV download (one or several runs), the API's `run.history()` saved as
    CSV or JSON (records with `_step`), or JSONL of such records."""

    name = "wandb"

    def _records(self, path: Path) -> list[dict[str, Any]] | None:
        suffix = path.suffix.lower()
        if suffix == ".csv":
            try:
                with path.open(encoding="utf-8", errors="replace", newline="") as f:
                    reader = csv.DictReader(f)
                    if not reader.fieldnames or not any(c in _WANDB_STEP_COLUMNS for c in reader.fieldnames):
                        return None
                    return list(reader)
            except (csv.Error, OSError):
                return None
        if suffix == ".json":
            try:
                obj = json.loads(path.read_text(encoding="utf-8"))
            except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
                return None
            if isinstance(obj, dict) and isinstance(obj.get("history"), list):
                obj = obj["history"]
            if isinstance(obj, list) and obj and all(isinstance(x, dict) for x in obj):
                if any(c in obj[0] for c in _WANDB_STEP_COLUMNS):
                    return obj
            return None
        if suffix == ".jsonl" and _jsonl_flavor(path) == "wandb":
            return _read_jsonl_objects(path)
        return None

    def runs(self, path: Path) -> list[tuple[str, list[Path]]]:
        if not path.is_file():
            return []
        recs = self._records(path)
        return [("", [path])] if recs and _wandb_records_to_runs(recs) else []

    def read(self, files: list[Path]) -> list[Segment]:
        runs = _wandb_records_to_runs(self._records(files[0]) or [])
        out = []
        for run, rows in runs.items():
            flavor, _ = _best_flavor({k for r in rows.values() for k in r}, ("grpokit", "trl", "verl", "openrlhf"))
            if flavor == "trl":
                rows = _ordered(rows, [pre + n for pre, _ in _TRL_TB_PREFIXES for n in TRL_NAMES] + list(TRL_NAMES))
                mapper = _table_or_prefixed(_TRL_MAPPER, _TRL_TB_MAPPER)
            elif flavor == "verl":
                rows, mapper = _ordered(rows, list(VERL_NAMES)), _VERL_MAPPER
            elif flavor == "openrlhf":
                mapper = _OPENRLHF_MAPPER
            else:
                mapper = _identity_mapper
            out.append(Segment(rows, mapper, flavor, run if len(runs) > 1 else ""))
        return out


def _table_or_prefixed(plain: Mapper, prefixed: Mapper) -> Mapper:
    """TRL names logged bare (`reward`) or with transformers' `train/` / `eval/` prefixes."""

    def mapper(names: Iterable[str]) -> dict[str, tuple[str, ...]]:
        names = list(names)
        return {**plain(names), **prefixed(names)}

    return mapper


# ------------------------------------------------------------------------------------------------- TensorBoard

_EVENTS_GLOB = "events.out.tfevents.*"


def _tb_scalars(files: list[Path]) -> tuple[RawRows, dict[str, str]]:
    """Every scalar (classic `simple_value` summaries, and rank-0 tensor summaries) grouped by step, and the text
    summaries (tag -> latest text)."""
    from tensorboard.backend.event_processing import event_accumulator as ea
    from tensorboard.util import tensor_util

    rows: RawRows = {}
    texts: dict[str, str] = {}
    for f in files:  # file names carry the creation time: later files (restarts) win
        acc = ea.EventAccumulator(str(f), size_guidance={ea.SCALARS: 0, ea.TENSORS: 0})
        acc.Reload()
        tags = acc.Tags()
        for tag in tags.get(ea.SCALARS, []):
            for ev in sorted(acc.Scalars(tag), key=lambda e: e.wall_time):
                _merge(rows, int(ev.step), {tag: float(ev.value)})
        for tag in tags.get(ea.TENSORS, []):
            for ev in sorted(acc.Tensors(tag), key=lambda e: e.wall_time):
                try:
                    arr = tensor_util.make_ndarray(ev.tensor_proto)
                except (ValueError, TypeError):
                    continue
                if arr.dtype.kind in "SO" and arr.size >= 1:
                    v = arr.reshape(-1)[0]
                    texts[tag] = v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)
                elif arr.ndim == 0 and arr.dtype.kind in "fiub":
                    _merge(rows, int(ev.step), {tag: float(arr)})
    return rows, texts


#: the TensorBoard text tag grpokit writes the run's config under (YAML inside a code fence)
CONFIG_TEXT_TAG = "grpokit/config"


def _config_from_texts(texts: dict[str, str]) -> dict[str, Any]:
    for tag, text in texts.items():
        if tag.split("/text_summary")[0] == CONFIG_TEXT_TAG:
            body = text.strip()
            if body.startswith("```"):
                body = body.split("\n", 1)[1] if "\n" in body else ""
                body = body.rsplit("```", 1)[0]
            return _yaml_load(body)
    return {}


class TensorBoardReader(Reader):
    """Event files: each directory holding `events.out.tfevents.*` files is one run (restarts in the same directory
    are merged by step, later files winning)."""

    name = "tensorboard"

    def runs(self, path: Path) -> list[tuple[str, list[Path]]]:
        if path.is_file():
            return [("", [path])] if path.name.startswith("events.out.tfevents.") else []
        files = sorted(path.glob(_EVENTS_GLOB), key=lambda p: p.name)
        return [("", files)] if files else []

    def read(self, files: list[Path]) -> list[Segment]:
        rows, texts = _tb_scalars(files)
        flavor, _ = _best_flavor({k for r in rows.values() for k in r}, FLAVORS)
        if flavor == "trl":
            rows = _ordered(rows, [pre + n for pre, _ in _TRL_TB_PREFIXES for n in TRL_NAMES])
        elif flavor == "verl":
            rows = _ordered(rows, list(VERL_NAMES))
        cfg = _config_from_texts(texts)
        notes = []
        if not cfg and flavor == "grpokit":
            # a grpokit run's tb/ folder: the config sits next to it
            parent_cfg = files[0].parent.parent / "config.yaml"
            if parent_cfg.is_file():
                cfg = _yaml_load(parent_cfg.read_text(encoding="utf-8", errors="replace"))
                notes.append(f"config read from {parent_cfg}")
        elif cfg:
            notes.append("config read from the events' text summary")
        return [Segment(rows, FLAVORS[flavor][0], flavor, "", grpokit_context(cfg), cfg, notes)]


#: The readers, in detection order (a grpokit run directory also holds TensorBoard events; a TRL output
#: directory too: the richer, native log wins).
READERS: dict[str, Reader] = {
    r.name: r
    for r in (GrpokitReader(), TrlReader(), VerlJsonlReader(), WandbReader(), ConsoleReader(), TensorBoardReader())
}
_STRUCTURED_SUFFIXES = {".json", ".jsonl", ".csv", ".yaml", ".yml", ".parquet", ".safetensors", ".bin", ".pt", ".png"}

SUPPORTED = (
    "grpokit run directory (metrics.jsonl); "
    "TRL output directory or trainer_state.json (also checkpoint-*/trainer_state.json); "
    "a console log of TRL/transformers (per-step dicts), verl (lines 'step:N - key:value - ...') or OpenRLHF "
    "('Global step N: {...}' lines or its progress bars); "
    "verl JSONL metrics file; W&B history export (CSV or JSON); "
    "TensorBoard event file or directory (events.out.tfevents.*); or a folder holding any of these"
)

_MAX_DEPTH = 8
_MAX_ENTRIES = 20000


def _native_run_dir(p: Path) -> tuple[str, list[Path]] | None:
    """A directory that is one run in a native format (grpokit run, TRL output dir): its sub-folders (tb/,
    checkpoints) belong to it and are not searched."""
    for name in ("grpokit", "trl"):
        found = READERS[name].runs(p)
        if found:
            return name, found[0][1]
    return None


def _file_run(p: Path) -> tuple[str, list[Path]] | None:
    for name, reader in READERS.items():
        if name == "tensorboard":
            continue
        found = reader.runs(p)
        if found:
            return name, found[0][1]
    return None


def discover(path: str | Path) -> list[tuple[str, str, list[Path]]]:
    """Every run under a path as (name, reader, files); names are paths relative to `path` ('' for `path` itself).
    A native run directory (grpokit, TRL) is one run; otherwise each log file is a run and each directory of
    TensorBoard event files is a run, searched recursively."""
    root = Path(path).expanduser()
    if not root.exists():
        raise ValueError(f"{root}: no such file or directory. Supported logs: {SUPPORTED}")
    if root.is_file():
        if root.name.startswith("events.out.tfevents."):
            return [("", "tensorboard", [root])]
        found = _file_run(root)
        return [("", found[0], found[1])] if found else []
    out: list[tuple[str, str, list[Path]]] = []
    seen = 0

    def rel(p: Path) -> str:
        r = str(p.relative_to(root))
        return "" if r == "." else r

    def walk(d: Path, depth: int) -> None:
        nonlocal seen
        native = _native_run_dir(d)
        if native:
            out.append((rel(d), native[0], native[1]))
            return
        try:
            entries = sorted(d.iterdir(), key=lambda p: p.name)
        except OSError:
            return
        seen += len(entries)
        events = [e for e in entries if e.is_file() and e.name.startswith("events.out.tfevents.")]
        if events:
            out.append((rel(d), "tensorboard", events))
        for e in entries:
            if e.name.startswith("."):
                continue
            if e.is_file() and not e.name.startswith("events.out.tfevents."):
                found = _file_run(e)
                if found:
                    out.append((rel(e), found[0], found[1]))
            elif e.is_dir() and depth < _MAX_DEPTH and seen < _MAX_ENTRIES:
                walk(e, depth + 1)

    walk(root, 0)
    return out


def detect(path: str | Path) -> tuple[str, list[Path]]:
    """(source name, files to read) of the first run under a path; ValueError if none is recognised."""
    runs = discover(path)
    if not runs:
        raise ValueError(f"{Path(path).expanduser()}: not a supported training log. Supported logs: {SUPPORTED}")
    _, source, files = runs[0]
    return ("verl" if source == "console" and _console_kind(_read_text(files[0])) == "verl" else source), files


def _source_name(reader: str, seg: Segment) -> str:
    if reader == "console":
        return {"verl": "verl", "openrlhf": "openrlhf-console"}.get(seg.flavor or "", "trl-console")
    return reader


def read_runs(path: str | Path, run: str | None = None) -> list[RunLog]:
    """Every run under a path, each read into canonical rows (see the module docstring); `run` keeps the runs whose
    name equals it (or, if none does, contains it). ValueError when nothing is found."""
    p = Path(path).expanduser()
    found = discover(p)
    if not found:
        raise ValueError(f"{p}: not a supported training log. Supported logs: {SUPPORTED}")
    logs: list[RunLog] = []
    for name, reader, files in found:
        for seg in READERS[reader].read(files):
            rows, available, raw_names = _canonicalise(seg.raw, seg.mapper)
            full = (name + seg.name) if name or seg.name else ""
            logs.append(
                RunLog(
                    source=_source_name(reader, seg),
                    rows=rows,
                    available=available,
                    raw_names=raw_names,
                    path=p / name if name else p,
                    flavor=seg.flavor,
                    name=full,
                    context=seg.context,
                    config=seg.config,
                    notes=seg.notes,
                )
            )
    if run is not None:
        exact = [lg for lg in logs if lg.name == run]
        logs = exact or [lg for lg in logs if run in lg.name]
        if not logs:
            names = ", ".join(repr(n) for n in (lg.name for lg in read_runs(p)) if n) or "(one unnamed run)"
            raise ValueError(f"{p}: no run named {run!r}; runs here: {names}")
    return logs


def read_run(path: str | Path, run: str | None = None) -> RunLog:
    """The one run at a path (ValueError naming the runs when the path holds several: pick one with `run`)."""
    logs = read_runs(path, run)
    if len(logs) > 1:
        names = ", ".join(repr(lg.name) for lg in logs)
        raise ValueError(f"{Path(path).expanduser()} holds {len(logs)} runs ({names}): pick one with --run NAME")
    return logs[0]


__all__ = [
    "CANONICAL",
    "CONFIG_TEXT_TAG",
    "FLAVORS",
    "OPENRLHF_NAMES",
    "READERS",
    "SUPPORTED",
    "TRL_NAMES",
    "VERL_NAMES",
    "VERL_PATTERNS",
    "Reader",
    "RunLog",
    "detect",
    "discover",
    "grpokit_context",
    "read_run",
    "read_runs",
    "verl_context",
]
