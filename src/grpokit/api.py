"""The Python API: `grpokit.train(...)` from a notebook or script, with in-memory datasets and reward functions.

    result = grpokit.train(recipe="grpo", model="tiny", train_dataset=ds, reward_funcs=[brevity], steps=2)

* `train_dataset` / `eval_dataset`: a `datasets.Dataset`, a list of dicts, or a `data.task`-style string. An
  in-memory dataset is saved into the run directory (`data/train`, a `save_to_disk` folder) and `data.task` points
  there, so config.yaml names data that exists and `grpokit train --resume` finds it.
* `reward_funcs`: callables (any convention of `grpokit.rewards.signature`) and/or reward names. A callable is
  recorded in config.yaml by its qualified name, `module:qualname` (`__main__:brevity` from a notebook), and called
  as the object itself, so lambdas and closures work too.
* `**overrides`: config keys as dotted names (`**{"algo.eps_high": 0.28}`), a section as a dict
  (`train={"steps": 2}`), or a bare key name (`steps=2`, `lr=1e-6`, `group_size=4`), which means the key of the
  first section that has it in the order train, rollout, data, model, reward, algo, monitor, critic.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .config import Config, ConfigError, build_config, did_you_mean
from .run.directory import claimed_run
from .run.output_dir import claim_new_run

SECTION_ORDER = ("train", "rollout", "data", "model", "reward", "algo", "monitor", "critic")


@dataclass
class TrainResult:
    """What `train` returns: the run directory, the final model directory and the run summary."""

    run_dir: Path
    final_model: Path | None
    summary: dict[str, Any]
    config: Config

    def __fspath__(self) -> str:
        return str(self.run_dir)


def qualified_name(fn: Callable[..., Any]) -> str:
    """`module:qualname` of a callable (a callable object: its class), as recorded in config.yaml."""
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or type(fn).__qualname__
    return f"{getattr(fn, '__module__', None) or type(fn).__module__}:{name}"


def _section_keys() -> dict[str, list[str]]:
    cfg = Config()
    return {s: [f.name for f in dataclasses.fields(getattr(cfg, s))] for s in SECTION_ORDER}


def dotted_overrides(overrides: dict[str, Any]) -> dict[str, Any]:
    """`**overrides` of `train` as dotted config keys (see the module docstring); ConfigError for unknown names."""
    sections = _section_keys()
    out: dict[str, Any] = {}
    for key, value in overrides.items():
        if "." in key:
            out[key] = value
        elif key in sections and isinstance(value, dict):
            out |= {f"{key}.{k}": v for k, v in value.items()}
        else:
            section = next((s for s in SECTION_ORDER if key in sections[s]), None)
            if section is None:
                known = [f"{s}.{k}" for s in SECTION_ORDER for k in sections[s]] + [
                    k for s in sections.values() for k in s
                ]
                raise ConfigError(f"grpokit.train: unknown keyword {key}={value!r}.{did_you_mean(key, known)}")
            out[f"{section}.{key}"] = value
    return out


def reward_specs(reward_funcs: Any) -> tuple[list[str], dict[str, Callable[..., Any]]]:
    """(names for `reward.functions`, name -> callable) for `reward_funcs`: a callable, a name, or a list of both."""
    entries = [reward_funcs] if callable(reward_funcs) or isinstance(reward_funcs, str) else list(reward_funcs)
    names, functions = [], {}
    for entry in entries:
        if isinstance(entry, str):
            names.append(entry)
            continue
        if not callable(entry):
            raise ConfigError(f"reward_funcs: {entry!r} is neither a function nor a reward name")
        name = qualified_name(entry)
        if name in functions and functions[name] is not entry:
            raise ConfigError(
                f"reward_funcs: two different functions are both named {name!r}; give each its own name (def ...)"
            )
        names.append(name)
        functions[name] = entry
    return names, functions


def save_dataset(data: Any, path: Path, arg: str) -> str:
    """Save an in-memory dataset (a `datasets.Dataset` or a list of dicts) as a `save_to_disk` folder at `path`."""
    import datasets

    if isinstance(data, (datasets.DatasetDict, datasets.IterableDataset, datasets.IterableDatasetDict)):
        raise ConfigError(
            f"{arg}: got a {type(data).__name__}; pass one split as a datasets.Dataset (e.g. ds['train'], or "
            "Dataset.from_list(list(iterable)) for a streamed dataset)"
        )
    if isinstance(data, list):
        if not data or not all(isinstance(r, dict) for r in data):
            raise ConfigError(f"{arg}: a list must hold one dict per example, e.g. [{{'prompt': ..., 'answer': ...}}]")
        data = datasets.Dataset.from_list(data)
    if not isinstance(data, datasets.Dataset):
        raise ConfigError(
            f"{arg}: expected a datasets.Dataset, a list of dicts or a data.task string, got {type(data).__name__} "
            "(a pandas DataFrame: datasets.Dataset.from_pandas(df))"
        )
    quiet = not datasets.utils.are_progress_bars_disabled()
    if quiet:
        datasets.disable_progress_bars()
    try:
        data.save_to_disk(str(path))
    finally:
        if quiet:
            datasets.enable_progress_bars()
    return str(path.resolve())


def train(
    recipe: str = "grpo",
    model: str | None = None,
    train_dataset: Any = None,
    reward_funcs: Any = None,
    *,
    eval_dataset: Any = None,
    reward_weights: Sequence[float] | None = None,
    config: str | None = None,
    run_name: str | None = None,
    eval_samples: int = 1,
    **overrides: Any,
) -> TrainResult:
    """Train with `recipe` (a name or YAML path) on `model` (embedded default, `tiny`, or a from_pretrained name or
    directory); `config` is a YAML file of config sections applied over the recipe, `overrides` win over both.

    Returns a `TrainResult` (its `run_dir` holds config.yaml, metrics.jsonl and the final model)."""
    direct = dotted_overrides(overrides)
    functions: dict[str, Callable[..., Any]] = {}
    given = direct.pop("reward.functions", None)  # also reward={"functions": [...]} or functions=[...]
    if reward_funcs is not None and given is not None:
        raise ConfigError("grpokit.train: give the reward functions once, as reward_funcs=[...]")
    if reward_funcs is not None or given is not None:
        direct["reward.functions"], functions = reward_specs(reward_funcs if reward_funcs is not None else given)
    if reward_weights is not None:
        direct["reward.weights"] = list(reward_weights)
    if model is not None:
        direct["model.name"] = model
    in_memory = train_dataset is not None and not isinstance(train_dataset, str)
    if isinstance(train_dataset, str):
        direct["data.task"] = train_dataset
    if isinstance(eval_dataset, str):
        direct["data.eval_data"] = eval_dataset
    cfg = build_config(recipe, config_file=config, **direct)
    stem = "dataset" if in_memory else Path(cfg.data.task).stem
    run_dir = claim_new_run(cfg.train.out, cfg.train.output_dir, cfg.recipe, stem, run_name)
    with claimed_run(run_dir, new=True):  # its outcome written, its claim released; nothing left if it never started
        if in_memory:
            cfg.data.task = save_dataset(train_dataset, run_dir / "data" / "train", "train_dataset")
        if eval_dataset is not None and not isinstance(eval_dataset, str):
            cfg.data.eval_data = save_dataset(eval_dataset, run_dir / "data" / "eval", "eval_dataset")
        summary = _fit(cfg, run_dir, functions, eval_samples)
    final = summary.get("final_model")
    return TrainResult(run_dir, Path(final) if final else None, summary, cfg)


def _fit(cfg: Config, run_dir: Path, functions: dict[str, Callable[..., Any]], eval_samples: int) -> dict[str, Any]:
    """`grpokit.training.run.run` with the console display, as `grpokit train` runs it."""
    from .cli.console import Display
    from .training.run import run

    return run(cfg, run_dir, display=Display(cfg.train.steps), functions=functions, eval_samples=eval_samples)
