"""Checkpoints that are Hugging Face model directories, with the trainer state beside them; written atomically.

    checkpoints/step_N/
        config.json, generation_config.json, model.safetensors   the policy (`save_pretrained`); a LoRA run writes
                                                                  the PEFT adapter (adapter_config.json,
                                                                  adapter_model.safetensors) instead
        tokenizer.json, tokenizer_config.json, ...               the tokenizer
        merged/                                                   LoRA runs with train.save_merged: the full model
        trainer_state/
            state.json                                            step, data position, coefficients, precision, ...
            optimizer.pt                                          optimizer, scheduler, RNG states, `extra` states
            critic.safetensors, ref_model.safetensors             other modules a resume needs
A model-only checkpoint (`model_only` in state.json) has neither of the last two.

So `AutoModelForCausalLM.from_pretrained("runs/x/checkpoints/step_N")`, `grpokit eval --model ...step_N` and vLLM
load a checkpoint directly (the trainer state lies in a sub-folder a `*.safetensors` glob does not reach).

A checkpoint is written into `checkpoints/.tmp-step_N` and renamed to `checkpoints/step_N` only when complete, so
a crash mid-write never corrupts the last good checkpoint. Older ones beyond `keep` are removed afterwards.
A checkpoint is read completely before anything is restored, so an unreadable one (a truncated safetensors file,
a bad state.json, a tensor shaped unlike the model's) changes nothing: `load_latest` then moves it aside to
`step_N.corrupt` and falls back to the previous checkpoint, saying so in one line. Only real folders inside the run
count as checkpoints: a `step_N` (or `checkpoints/`) that is a symbolic link is never loaded, and never pruned
through. A state.json whose numbers no run can reach, or an optimizer state shaped unlike the model, is unreadable
too (`grpokit.run.checkpoint_checks`).

Reading a checkpoint never runs code: tensors come from safetensors files, `optimizer.pt` is read with
`torch.load(weights_only=True)` (a pickle that would build anything but tensors and plain data is refused in one
line), and the RNG states, there and in state.json's per-rank entries, are plain numbers (`grpokit.run.rng`).
"""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import re
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_file, save_file

from ..common import faults
from . import rng
from .checkpoint_checks import CheckpointError, check_optimizer, check_ranges, check_ranks
from .model_dir import is_peft, replace_dir, save_model_dir

STEP_RE = re.compile(r"^step_(\d+)$")
STATE_DIR = "trainer_state"
FORMAT = 2  # 1: flat files (model.safetensors, state.json, trainer_state.pt), read for runs written before


class ModelOnlyCheckpoint(CheckpointError):
    """A whole checkpoint `path` that holds the model only: no run resumes from it (the message says the ways on)."""

    def __init__(self, path: Path) -> None:
        super().__init__(
            f"{path.name} holds the model only (written with train.save_only_model=true, or by an older grpokit at "
            f"a finished run's last step): no optimizer state, so no run resumes from it; start a new run from its "
            f"weights with --model {path}, or keep optimizer state with train.save_only_model=false (the default)"
        )


def save_checkpoint(
    run_dir: Path,
    step: int,
    *,
    modules: dict[str, torch.nn.Module],
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
    state: dict[str, Any],
    keep: int = 2,
    extra: dict[str, Any] | None = None,
    tokenizer: Any = None,
    save_merged: bool = False,
    model_only: bool = False,
) -> Path:
    """Write checkpoint `step` atomically; returns its directory.

    `modules["model"]` is the policy, written as a Hugging Face directory with `tokenizer`; other modules (critic,
    moving reference) go to `trainer_state/<name>.safetensors`. `extra` holds further objects with state dicts
    (e.g. the critic's optimizer), restored by name. Per-rank state (prompt-stream position, RNG) travels in
    `state` (the trainer gathers it to rank 0 as `state["ranks"]`). `model_only` (TRL's `save_only_model`) writes
    the model and state.json only: no optimizer, scheduler, RNG or other modules, a third of the size of a full
    checkpoint with AdamW, and a checkpoint no run can resume from (`ModelOnlyCheckpoint`)."""
    root = run_dir / "checkpoints"
    if root.is_symlink():
        raise CheckpointError(f"{root} is a symbolic link grpokit did not make: no checkpoint is written through it")
    root.mkdir(parents=True, exist_ok=True)
    tmp = root / f".tmp-step_{step}"
    if tmp.exists():
        shutil.rmtree(tmp)
    (tmp / STATE_DIR).mkdir(parents=True)
    model = modules["model"]
    save_model_dir(model, tokenizer, tmp)
    faults.point("checkpoint")
    if save_merged and is_peft(model):
        save_model_dir(model, tokenizer, tmp / "merged", merged=True)
    sd = tmp / STATE_DIR
    if model_only:
        state = {**state, "model_only": True}
    for name, mod in modules.items():
        if name != "model" and not model_only:
            save_file(_contiguous(mod.state_dict()), str(sd / f"{name}.safetensors"))
    if not model_only:
        _save_trainer_state(sd / "optimizer.pt", optimizer, scheduler, extra)
    (sd / "state.json").write_text(json.dumps({"step": step, "format": FORMAT, **state}, indent=1))
    final = root / f"step_{step}"
    replace_dir(tmp, final)
    faults.point("checkpoint_saved")
    for old in list_checkpoints(run_dir)[:-keep] if keep > 0 else []:
        shutil.rmtree(old, ignore_errors=True)
    return final


def _save_trainer_state(path: Path, optimizer: Any, scheduler: Any, extra: dict[str, Any] | None) -> None:
    """Optimizer, scheduler, RNG and `extra` states: tensors and plain data, read back with `weights_only=True`."""
    torch.save(
        {
            "optimizer": optimizer.state_dict(),
            "scheduler": scheduler.state_dict(),
            "rng": rng.capture(),  # plain lists of numbers (`grpokit.run.rng`), never pickled objects
            "extra": {k: v.state_dict() for k, v in (extra or {}).items()},
        },
        path,
    )


def _contiguous(sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """safetensors refuses shared or non-contiguous storage: one contiguous copy per tensor."""
    return {k: v.detach().contiguous().clone() for k, v in sd.items()}


def list_checkpoints(run_dir: Path) -> list[Path]:
    root = run_dir / "checkpoints"
    if not _real_dir(root):
        return []
    # real folders only: a planted `step_N` link is never loaded, nor pruned through
    found = [(int(m.group(1)), p) for p in root.iterdir() if (m := STEP_RE.match(p.name)) and _real_dir(p)]
    return [p for _, p in sorted(found)]


def _real_dir(p: Path) -> bool:
    return p.is_dir() and not p.is_symlink()


def latest_checkpoint(run_dir: Path) -> Path | None:
    cps = list_checkpoints(run_dir)
    return cps[-1] if cps else None


def _state_path(path: Path) -> Path:
    new = path / STATE_DIR / "state.json"
    return new if new.exists() or not (path / "state.json").exists() else path / "state.json"


def read_state(path: Path, require: dict[str, type | tuple[type, ...]] | None = None) -> dict[str, Any]:
    """A checkpoint's state.json (either layout); CheckpointError when it is missing, not a JSON object, or lacks
    an integer `step` or a key of `require` (name -> the types its value may have; never a bool)."""
    p = _state_path(path)
    try:
        state = json.loads(p.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
        raise CheckpointError(f"{p.relative_to(path.parent)}: {_short(e)}") from e
    if not isinstance(state, dict) or not _is_a(state.get("step"), int):
        raise CheckpointError(f"{p.relative_to(path.parent)}: no integer 'step'")
    for key, types in (require or {}).items():
        if not _is_a(state.get(key), types):
            got = "missing" if key not in state else f"{type(state[key]).__name__} {str(state[key])[:40]!r}"
            raise CheckpointError(f"{p.relative_to(path.parent)}: {key!r} is {got}, not a number")
    check_ranges(state, p.relative_to(path.parent))  # numbers a run can have written (grpokit.run.checkpoint_checks)
    if state.get("ranks") is not None:
        check_ranks(state["ranks"], p.relative_to(path.parent))
    return state


def _is_a(value: Any, types: type | tuple[type, ...]) -> bool:
    return isinstance(value, types) and not isinstance(value, bool)


def _short(e: BaseException) -> str:
    return str(e).splitlines()[0][:200] if str(e) else type(e).__name__


def _read_weights(path: Path, modules: dict[str, torch.nn.Module]) -> dict[str, dict[str, torch.Tensor]]:
    """Every module's tensors, read completely (a truncated file fails here, before anything is restored)."""
    legacy = not (path / STATE_DIR).is_dir()
    out: dict[str, dict[str, torch.Tensor]] = {}
    for name, mod in modules.items():
        if legacy:
            files = [path / f"{name}.safetensors"]
        elif name != "model":
            files = [path / STATE_DIR / f"{name}.safetensors"]
        elif is_peft(mod):
            files = [path / "adapter_model.safetensors"]
        else:
            index = path / "model.safetensors.index.json"
            shards = sorted(set(json.loads(index.read_text())["weight_map"].values())) if index.exists() else []
            files = [path / s for s in shards] or [path / "model.safetensors"]
        tensors: dict[str, torch.Tensor] = {}
        for f in files:
            if not f.exists():
                raise CheckpointError(f"{f.relative_to(path.parent)} is missing")
            try:
                tensors.update(load_file(str(f)))
            except Exception as e:  # safetensors raises its own error types for truncated or garbled files
                raise CheckpointError(f"{f.relative_to(path.parent)}: {_short(e)}") from e
        out[name] = tensors
    return out


def _check_shapes(path: Path, name: str, mod: torch.nn.Module, tensors: dict[str, torch.Tensor]) -> None:
    """CheckpointError naming the first tensor whose shape is not the model's, with both shapes, before anything is
    restored (`load_state_dict` copies the tensors that fit, then raises: a half-restored model)."""
    params = {k: tuple(v.shape) for k, v in mod.state_dict().items()}
    if name == "model" and is_peft(mod) and (path / "adapter_model.safetensors").exists():
        adapter = getattr(mod, "active_adapter", "default")  # saved adapter keys lack the adapter's name
        adapter = adapter[0] if isinstance(adapter, list) else adapter
        params = {k.replace(f".{adapter}.", "."): v for k, v in params.items()}
    for key, t in tensors.items():
        if params.get(key, tuple(t.shape)) != tuple(t.shape):
            raise CheckpointError(
                f"{path.name}/{name}: {key} has shape {list(t.shape)} in the checkpoint but {list(params[key])} in "
                "the model (a checkpoint of another model, or an edited one)"
            )


def _apply_weights(path: Path, name: str, mod: torch.nn.Module, tensors: dict[str, torch.Tensor]) -> None:
    if name == "model" and is_peft(mod) and (path / "adapter_model.safetensors").exists():
        from peft import set_peft_model_state_dict

        try:
            result = set_peft_model_state_dict(mod, tensors)
        except RuntimeError as e:  # a mismatch `_check_shapes` could not map to the model's keys
            raise CheckpointError(f"{path.name}: adapter does not match the model ({_short(e)})") from e
        unexpected = list(getattr(result, "unexpected_keys", []) or [])
        if unexpected:
            raise CheckpointError(f"{path.name}: adapter does not match the model (unexpected {unexpected[:3]})")
        return
    missing, unexpected = mod.load_state_dict(tensors, strict=False)
    loaded = {p.data_ptr() for k, p in mod.state_dict().items() if k in tensors}
    params = mod.state_dict()
    missing = [k for k in missing if params[k].data_ptr() not in loaded]  # tied weights (lm_head) are not saved
    if unexpected or missing:
        raise CheckpointError(
            f"{path.name}/{name} does not match the model (missing {missing[:3]}, unexpected {list(unexpected)[:3]})"
        )


def _numpy_globals() -> list[Any]:
    """What unpickling a numpy array takes (RNG states of checkpoints older than plain-number ones): the array
    type, its dtype and its rebuilder, under numpy 2's and numpy 1's module names. None of them runs code."""
    rebuild = np._core.multiarray._reconstruct if hasattr(np, "_core") else np.core.multiarray._reconstruct
    return [np.ndarray, np.dtype, rebuild, (rebuild, "numpy.core.multiarray._reconstruct"), type(np.dtype(np.uint32))]


def _numpy_allowed() -> contextlib.AbstractContextManager[Any]:
    """`torch.load(weights_only=True)` may rebuild numpy arrays within this context (torch 2.5+; torch 2.4, which
    has no such context, gets the plain objects allowed for the process)."""
    allowed = _numpy_globals()
    if hasattr(torch.serialization, "safe_globals"):
        return torch.serialization.safe_globals(allowed)
    torch.serialization.add_safe_globals([g for g in allowed if not isinstance(g, tuple)])
    return contextlib.nullcontext()


def _refusal(ts_path: Path, rel: Path, e: Exception) -> CheckpointError:
    """The one-line error for a trainer state that holds more than tensors and plain data (a pickle that would
    build or call arbitrary objects, e.g. run a command): refused, never executed."""
    try:
        names = torch.serialization.get_unsafe_globals_in_checkpoint(ts_path)  # read, not run
    except Exception:
        names = []
    what = ", ".join(names[:3]) if names else _short(e)
    return CheckpointError(
        f"{rel}: refused: it holds Python objects ({what}) where grpokit writes only tensors and numbers; "
        "a checkpoint is never allowed to run code. Use a checkpoint this run wrote, or start a new run"
    )


def read_trainer_state(path: Path, ts_path: Path) -> dict[str, Any]:
    """Optimizer, scheduler, RNG and `extra` states of checkpoint `path`, read with `weights_only=True` (tensors
    and plain data only: a crafted pickle is refused, never run) and checked; CheckpointError otherwise."""
    rel = ts_path.relative_to(path.parent)
    try:
        with _numpy_allowed():
            ts = torch.load(ts_path, weights_only=True)
    except pickle.UnpicklingError as e:
        if "Weights only load failed" in str(e):
            raise _refusal(ts_path, rel, e) from e
        raise CheckpointError(f"{rel}: {_short(e)}") from e
    except Exception as e:  # a truncated file raises EOFError, RuntimeError...
        raise CheckpointError(f"{rel}: {_short(e)}") from e
    if not isinstance(ts, dict) or not all(isinstance(ts.get(k), dict) for k in ("optimizer", "scheduler", "rng")):
        raise CheckpointError(f"{rel}: not a trainer state (optimizer, scheduler and rng mappings)")
    if not isinstance(ts.get("extra", {}), dict):
        raise CheckpointError(f"{rel}: 'extra' is not a mapping")
    try:
        rng.check(rng.plain(ts["rng"]))
    except ValueError as e:
        raise CheckpointError(f"{rel}: {e}") from e
    return {**ts, "extra": ts.get("extra", {})}


def load_checkpoint(
    path: Path,
    *,
    modules: dict[str, torch.nn.Module],
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
    extra: dict[str, Any] | None = None,
    require: dict[str, type | tuple[type, ...]] | None = None,
    finished_at: int | None = None,
) -> dict[str, Any]:
    """Restore modules, optimizer, scheduler, `extra` state dicts and RNG states from `path`; returns state.json
    (which must hold the keys of `require`, see `read_state`). Everything is read before anything is restored: an
    unreadable checkpoint raises CheckpointError and leaves the trainer as it was. A model-only checkpoint restores
    the model alone, and only at step `finished_at` or later (nothing left to train, the final model to write)."""
    state = read_state(path, require)
    only = bool(state.get("model_only"))
    if only and (finished_at is None or state["step"] < finished_at):
        raise ModelOnlyCheckpoint(path)
    modules = {"model": modules["model"]} if only else modules
    weights = _read_weights(path, modules)
    ts_path = path / STATE_DIR / "optimizer.pt" if (path / STATE_DIR).is_dir() else path / "trainer_state.pt"
    ts = None if only else read_trainer_state(path, ts_path)
    if ts is not None and (missing := [name for name in (extra or {}) if name not in ts["extra"]]):
        raise CheckpointError(f"checkpoint {path} has no state for {missing[0]!r}")
    if ts is not None:
        check_optimizer(ts["optimizer"], optimizer, ts_path.relative_to(path.parent))
        for name, obj in (extra or {}).items():
            check_optimizer(ts["extra"][name], obj, ts_path.relative_to(path.parent), name)
    for apply in (_check_shapes, _apply_weights):  # every shape checked before any weight is set
        for name, mod in modules.items():
            apply(path, name, mod, weights[name])
    if ts is not None:
        optimizer.load_state_dict(ts["optimizer"])
        scheduler.load_state_dict(ts["scheduler"])
        for name, obj in (extra or {}).items():
            obj.load_state_dict(ts["extra"][name])
        rng.restore(rng.plain(ts["rng"]))  # older checkpoints stored tensors and numpy arrays: the same numbers
    return state


def load_latest(
    run_dir: Path, *, say: Callable[[str], None] | None = None, **kwargs: Any
) -> tuple[Path, dict[str, Any]] | None:
    """Load the newest readable checkpoint of `run_dir` (None when there is none). An unreadable newer one is
    renamed `step_N.corrupt` (kept for inspection, out of the way of pruning) and named in one line by `say`
    (default: stderr). When none is readable: CheckpointError naming each."""
    say = say or (lambda msg: print(msg, file=sys.stderr, flush=True))
    bad: list[tuple[Path, str]] = []
    for path in reversed(list_checkpoints(run_dir)):
        try:
            state = load_checkpoint(path, **kwargs)
        except ModelOnlyCheckpoint:  # whole, not unreadable: said as it is, never moved aside
            raise
        except CheckpointError as e:
            bad.append((path, str(e)))
            continue
        for corrupt, why in bad:
            aside = corrupt.with_name(f"{corrupt.name}.corrupt")
            shutil.rmtree(aside, ignore_errors=True)
            os.replace(corrupt, aside)
            say(f"grpokit: checkpoint {corrupt.name} is unreadable ({why}), moved to {aside.name}; "
                f"resuming from {path.name}")  # fmt: skip
        return path, state
    if bad:
        names = "; ".join(f"{p.name} ({why})" for p, why in bad)
        raise CheckpointError(
            f"no readable checkpoint in {run_dir / 'checkpoints'}: {names}. Start a new run, or delete the "
            "checkpoints to restart this one"
        )
    return None


def recorded_precision(run_dir: Path) -> str | None:
    """The resolved precision (`fp32`, `bf16-autocast`, ...) the newest readable checkpoint was trained in; None
    when no checkpoint records one as a name."""
    for path in reversed(list_checkpoints(Path(run_dir))):
        try:
            precision = read_state(path).get("precision")
        except CheckpointError:
            continue
        return precision if isinstance(precision, str) else None
    return None
