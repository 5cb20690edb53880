"""Atomic checkpoints: model (safetensors), value head, reference, optimizer, RNG states and data position.

A checkpoint is written into `checkpoints/.tmp-step_N` and renamed to `checkpoints/step_N` only when complete,
so a crash mid-write never corrupts the last good checkpoint. Older ones beyond `keep` are removed afterwards.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_model, save_model

STEP_RE = re.compile(r"^step_(\d+)$")


class CheckpointError(RuntimeError):
    """A checkpoint that cannot be read."""


def rng_state() -> dict[str, Any]:
    return {
        "torch": torch.get_rng_state(),
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
    }


def set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    if state.get("cuda") is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


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
) -> Path:
    """Write checkpoint `step` atomically; returns its directory. `extra` holds further state dicts (e.g. the
    critic's optimizer), restored by name with `load_checkpoint(..., extra=...)`."""
    root = run_dir / "checkpoints"
    root.mkdir(parents=True, exist_ok=True)
    tmp = root / f".tmp-step_{step}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    for name, mod in modules.items():
        save_model(mod, str(tmp / f"{name}.safetensors"))
    torch.save(
        {
            "optimizer": optimizer.state_dict(),
            "scheduler": scheduler.state_dict(),
            "rng": rng_state(),
            "extra": {k: v.state_dict() for k, v in (extra or {}).items()},
        },
        tmp / "trainer_state.pt",
    )
    (tmp / "state.json").write_text(json.dumps({"step": step, **state}, indent=1))
    final = root / f"step_{step}"
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)
    for old in list_checkpoints(run_dir)[:-keep] if keep > 0 else []:
        shutil.rmtree(old, ignore_errors=True)
    return final


def list_checkpoints(run_dir: Path) -> list[Path]:
    root = run_dir / "checkpoints"
    if not root.exists():
        return []
    found = [(int(m.group(1)), p) for p in root.iterdir() if (m := STEP_RE.match(p.name)) and p.is_dir()]
    return [p for _, p in sorted(found)]


def latest_checkpoint(run_dir: Path) -> Path | None:
    cps = list_checkpoints(run_dir)
    return cps[-1] if cps else None


def load_checkpoint(
    path: Path,
    *,
    modules: dict[str, torch.nn.Module],
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Restore modules, optimizer, scheduler, `extra` state dicts and RNG states from `path`; returns state.json."""
    try:
        state = json.loads((path / "state.json").read_text())
        for name, mod in modules.items():
            f = path / f"{name}.safetensors"
            if not f.exists():
                raise CheckpointError(f"{f} is missing")
            missing, unexpected = load_model(mod, str(f), strict=False)
            if unexpected or [k for k in missing if "lm_head" not in k]:
                raise CheckpointError(
                    f"{f} does not match the model (missing {list(missing)[:3]}, unexpected {list(unexpected)[:3]})"
                )
        ts = torch.load(path / "trainer_state.pt", weights_only=False)
    except (OSError, json.JSONDecodeError, RuntimeError) as e:
        raise CheckpointError(
            f"cannot read checkpoint {path}: {e}. Delete it to resume from the previous one, or start a new run"
        ) from e
    optimizer.load_state_dict(ts["optimizer"])
    scheduler.load_state_dict(ts["scheduler"])
    for name, obj in (extra or {}).items():
        if name not in ts.get("extra", {}):
            raise CheckpointError(f"checkpoint {path} has no state for {name!r}")
        obj.load_state_dict(ts["extra"][name])
    set_rng_state(ts["rng"])
    return state


def recorded_precision(run_dir: Path) -> str | None:
    """The resolved precision (`fp32`, `bf16-autocast`, ...) the latest checkpoint of `run_dir` was trained in."""
    path = latest_checkpoint(Path(run_dir))
    if path is None:
        return None
    try:
        return json.loads((path / "state.json").read_text()).get("precision")
    except (OSError, json.JSONDecodeError):
        return None
