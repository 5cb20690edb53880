"""Readers that turn any supported training log into grpokit's canonical per-step metric rows.

`read_run(path)` auto-detects the format of a file or directory and returns a `RunLog`: one row per training step
(`{"step": int, <canonical name>: float, ...}`, NaN where a row lacks a signal the run records elsewhere), the set
of canonical names the log records (`available`) and the source's own names (`raw_names`). A signal the log does
not record is simply absent from `available`: nothing is derived from unrelated metrics.

Supported sources (tried in this order; the registry `READERS` holds them):

- `grpokit`: a run directory (or its `metrics.jsonl`). Names are grpokit's own; every numeric key passes through.
  Rows that share a step (the eval-only row written after the last train step) are merged into one row.
- `trl`: a TRL output directory, its `trainer_state.json`, or the newest `checkpoint-*/trainer_state.json` when the
  top-level one is absent. Rows come from `log_history`; names are mapped with `TRL_NAMES`.
- `verl`: verl console logs (lines `... step:N - key:value - key:value ...`, values plain or `np.float64(x)`), and
  verl's JSONL file logger (`{"step": N, "data": {...}}` per line, or flat keys). Names are mapped with `VERL_NAMES`
  and `VERL_PATTERNS`.
- `tensorboard`: any directory holding `events.out.tfevents.*` files (searched recursively), or one such file.
  Scalars are grouped by step; the tag flavour (grpokit, TRL's `train/...`/`eval/...` tags, or verl) is chosen by
  which mapping recognises the most tags, and recorded in `RunLog.flavor`.

Canonical names are grpokit's (see `signals.py` and the trainer); the mappings below only ever map a source metric
to the canonical name whose definition it matches, and say where the match is only approximate.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

NAN = float("nan")

# The canonical names other sources are mapped onto (grpokit logs more; its own rows keep every key).
CANONICAL: frozenset[str] = frozenset(
    {
        "reward/mean",
        "reward/std",
        "reward/accuracy",
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
}

#: verl PPO/GRPO trainer metric names (`ray_trainer.py`, `metric_utils.py`, `dp_actor.py`, rollout correction).
VERL_NAMES: dict[str, tuple[str, ...]] = {
    # sequence score before any in-reward KL penalty (`critic/rewards/mean` is after it; equal without
    # use_kl_in_reward, but only the score is the reward grpokit means). verl logs no reward std.
    "critic/score/mean": ("reward/mean",),
    # `agg_loss(entropy, mask, loss_agg_mode)`: the token mean under verl's default loss_agg_mode="token-mean"
    "actor/entropy": ("entropy/token_mean",),
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

#: verl names with a variable part. `val-core/<data_source>/acc/mean@N` is held-out accuracy; when a run
#: validates on several data sources (several names match) it is left unmapped rather than averaged.
VERL_PATTERNS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"^val-core/.+/acc/mean@\d+$"), "eval/accuracy"),
]

# TensorBoard tags: grpokit and verl log their own names; TRL (transformers' TensorBoardCallback) writes
# `train/<key>` for training logs and `eval/<key>` for `eval_<key>` logs.
_TRL_TB_PREFIXES = (("train/", ""), ("eval/", "eval_"))


# --------------------------------------------------------------------------------------------------- result


@dataclass
class RunLog:
    """A training log in canonical form."""

    source: str  # "grpokit" | "trl" | "verl" | "tensorboard"
    rows: list[dict[str, float]]  # one per step, sorted by step; each has "step" and every name in `available`
    available: set[str]  # canonical names recorded at least once
    raw_names: set[str]  # the source's own metric names seen
    path: Path
    flavor: str | None = None  # for "tensorboard": whose tag names the events use ("grpokit" | "trl" | "verl")

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


def _grpokit_score(names: Iterable[str]) -> int:
    return sum(1 for n in names if n in CANONICAL)


#: How each flavour maps names, and how strongly a set of names looks like that flavour (for sniffing JSONL and
#: TensorBoard tags, where several flavours share a container format).
FLAVORS: dict[str, tuple[Mapper, Callable[[Iterable[str]], int]]] = {
    "grpokit": (_identity_mapper, _grpokit_score),
    "trl": (_TRL_TB_MAPPER, lambda ns: len(_TRL_TB_MAPPER(ns))),
    "verl": (_VERL_MAPPER, lambda ns: len(_VERL_MAPPER(ns))),
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


def _read_jsonl_objects(path: Path) -> list[dict[str, Any]]:
    out = []
    with path.open(encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut by a running writer
            if isinstance(obj, dict):
                out.append(obj)
    return out


def _jsonl_rows(objs: list[dict[str, Any]]) -> RawRows:
    """Flat `{"step": N, k: v}` objects, or verl's file logger `{"step": N, "data": {k: v}}`."""
    rows: RawRows = {}
    for obj in objs:
        step = _step_of(obj.get("step"))
        if step is None:
            continue
        data = obj["data"] if isinstance(obj.get("data"), dict) else {k: v for k, v in obj.items() if k != "step"}
        _merge(rows, step, _numeric_items(data))
    return rows


def _jsonl_flavor(path: Path, max_lines: int = 50) -> str | None:
    """'grpokit' or 'verl' for a JSONL metrics file (None if it is neither)."""
    names: set[str] = set()
    nested = False
    seen = 0
    with path.open(encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError:
                continue
            if not isinstance(obj, dict) or "step" not in obj:
                return None
            if isinstance(obj.get("data"), dict):
                nested = True
                names |= set(obj["data"])
            else:
                names |= set(obj) - {"step"}
            seen += 1
            if seen >= max_lines:
                break
    if nested:
        return "verl"
    if not seen:
        return "grpokit" if path.name == "metrics.jsonl" else None  # an empty, just-started grpokit run
    flavor, score = _best_flavor(names, ("grpokit", "verl"))
    return flavor if score > 0 else None


class Reader:
    """One log format: `locate` finds the file(s) to read under a path (or None), `read` returns raw rows."""

    name = ""

    def locate(self, path: Path) -> list[Path] | None:
        raise NotImplementedError

    def read(self, files: list[Path]) -> tuple[RawRows, Mapper, str | None]:
        raise NotImplementedError


class GrpokitReader(Reader):
    name = "grpokit"

    def locate(self, path: Path) -> list[Path] | None:
        f = path / "metrics.jsonl" if path.is_dir() else path
        if f.is_file() and f.suffix == ".jsonl" and _jsonl_flavor(f) == "grpokit":
            return [f]
        return None

    def read(self, files: list[Path]) -> tuple[RawRows, Mapper, str | None]:
        return _jsonl_rows(_read_jsonl_objects(files[0])), _identity_mapper, None


def _checkpoint_number(p: Path) -> int:
    m = re.search(r"checkpoint-(\d+)$", p.parent.name)
    return int(m.group(1)) if m else -1


class TrlReader(Reader):
    name = "trl"

    def locate(self, path: Path) -> list[Path] | None:
        if path.is_dir():
            top = path / "trainer_state.json"
            if top.is_file():
                return [top]
            ckpts = sorted(path.glob("checkpoint-*/trainer_state.json"), key=_checkpoint_number)
            return [ckpts[-1]] if ckpts else None
        if path.suffix == ".json" and path.is_file():
            try:
                state = json.loads(path.read_text(encoding="utf-8"))
            except (json.JSONDecodeError, UnicodeDecodeError):
                return None
            if isinstance(state, dict) and isinstance(state.get("log_history"), list):
                return [path]
        return None

    def read(self, files: list[Path]) -> tuple[RawRows, Mapper, str | None]:
        state = json.loads(files[0].read_text(encoding="utf-8"))
        rows: RawRows = {}
        for entry in state.get("log_history", []):
            step = _step_of(entry.get("step")) if isinstance(entry, dict) else None
            if step is not None:
                _merge(rows, step, _numeric_items({k: v for k, v in entry.items() if k != "step"}))
        return _ordered(rows, list(TRL_NAMES)), _TRL_MAPPER, None


# `step:12 - actor/entropy:0.43 - ...`, after any prefix (`(TaskRunner pid=1) `, timestamps); not `global_step:`
_VERL_LINE = re.compile(r"(?<![\w/])step:(\d+)\s+-\s+(.*)$")
_VERL_TEXT_SUFFIXES = {".log", ".txt", ".out", ".err", ".stdout", ""}


def _verl_console_rows(path: Path) -> RawRows:
    rows: RawRows = {}
    with path.open(encoding="utf-8", errors="replace") as f:
        for line in f:
            m = _VERL_LINE.search(line.rstrip("\r\n"))
            if not m:
                continue
            values = {}
            for part in m.group(2).split(" - "):
                key, sep, val = part.strip().rpartition(":")
                v = _to_float(val) if sep and key else None
                if v is not None:
                    values[key.strip()] = v
            if values:
                _merge(rows, int(m.group(1)), values)
    return rows


def _is_verl_console(path: Path) -> bool:
    if path.suffix.lower() not in _VERL_TEXT_SUFFIXES or not path.is_file():
        return False
    try:
        with path.open(encoding="utf-8", errors="replace") as f:
            return any(_VERL_LINE.search(line) for line in f)
    except OSError:
        return False


class VerlReader(Reader):
    name = "verl"

    def _one(self, f: Path) -> bool:
        if f.suffix == ".jsonl":
            return f.is_file() and _jsonl_flavor(f) == "verl"
        return _is_verl_console(f)

    def locate(self, path: Path) -> list[Path] | None:
        if path.is_file():
            return [path] if self._one(path) else None
        files = sorted(f for f in path.iterdir() if f.is_file() and self._one(f))
        return files or None

    def read(self, files: list[Path]) -> tuple[RawRows, Mapper, str | None]:
        rows: RawRows = {}
        for f in files:  # several logs (restarts) are merged by step, later files winning
            part = _jsonl_rows(_read_jsonl_objects(f)) if f.suffix == ".jsonl" else _verl_console_rows(f)
            for step, values in part.items():
                _merge(rows, step, values)
        return _ordered(rows, list(VERL_NAMES)), _VERL_MAPPER, None


_EVENTS_GLOB = "events.out.tfevents.*"


def _tb_scalars(files: list[Path]) -> RawRows:
    """Every scalar (classic `simple_value` summaries, and rank-0 tensor summaries) grouped by step."""
    from tensorboard.backend.event_processing import event_accumulator as ea
    from tensorboard.util import tensor_util

    rows: RawRows = {}
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
                if arr.ndim == 0 and arr.dtype.kind in "fiub":
                    _merge(rows, int(ev.step), {tag: float(arr)})
    return rows


class TensorBoardReader(Reader):
    name = "tensorboard"

    def locate(self, path: Path) -> list[Path] | None:
        if path.is_file():
            return [path] if path.name.startswith("events.out.tfevents.") else None
        files = sorted(path.rglob(_EVENTS_GLOB), key=lambda p: (p.name, str(p)))
        return files or None

    def read(self, files: list[Path]) -> tuple[RawRows, Mapper, str | None]:
        rows = _tb_scalars(files)
        flavor, _ = _best_flavor({k for r in rows.values() for k in r}, FLAVORS)
        if flavor == "trl":
            order = [pre + n for pre, _ in _TRL_TB_PREFIXES for n in TRL_NAMES]
            rows = _ordered(rows, order)
        elif flavor == "verl":
            rows = _ordered(rows, list(VERL_NAMES))
        return rows, FLAVORS[flavor][0], flavor


#: The readers, in detection order (a grpokit run directory also holds TensorBoard events; a TRL output
#: directory too: the richer, native log wins).
READERS: dict[str, Reader] = {r.name: r for r in (GrpokitReader(), TrlReader(), VerlReader(), TensorBoardReader())}

SUPPORTED = (
    "grpokit run directory (metrics.jsonl); "
    "TRL output directory or trainer_state.json (also checkpoint-*/trainer_state.json); "
    "verl console log (lines 'step:N - key:value - ...') or verl JSONL metrics file; "
    "TensorBoard event file or directory (events.out.tfevents.*)"
)


def detect(path: str | Path) -> tuple[str, list[Path]]:
    """(source name, files to read) for a path; ValueError if no reader recognises it."""
    p = Path(path).expanduser()
    if not p.exists():
        raise ValueError(f"{p}: no such file or directory. Supported logs: {SUPPORTED}")
    for name, reader in READERS.items():
        files = reader.locate(p)
        if files:
            return name, files
    raise ValueError(f"{p}: not a supported training log. Supported logs: {SUPPORTED}")


def read_run(path: str | Path) -> RunLog:
    """Read any supported training log into canonical per-step rows (see the module docstring)."""
    p = Path(path).expanduser()
    source, files = detect(p)
    raw, mapper, flavor = READERS[source].read(files)
    rows, available, raw_names = _canonicalise(raw, mapper)
    return RunLog(source=source, rows=rows, available=available, raw_names=raw_names, path=p, flavor=flavor)


__all__ = [
    "CANONICAL",
    "FLAVORS",
    "READERS",
    "TRL_NAMES",
    "VERL_NAMES",
    "VERL_PATTERNS",
    "Reader",
    "RunLog",
    "detect",
    "read_run",
]
