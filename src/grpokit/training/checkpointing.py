"""A run's checkpoints: what is saved, how it is restored, and the final model.

A checkpoint is two typed values the trainer hands over, never the trainer itself:

- `Stateful`: what has a state dict (the policy and the other modules, the optimizer, the schedule, the critic's
  optimizer), written as weights and `trainer_state/optimizer.pt`, read back in place;
- `RunRecord`: the run's own numbers (step, prompt-stream position, group counter, KL and entropy coefficients,
  precision, log sizes, autopilot state; under torchrun each rank's position and RNG), written as state.json and
  returned by `restore` for the trainer to apply.

How much is written, as in TRL: `train.save_only_model=false` (the default) writes every state in every checkpoint,
a finished run's last one included, so `grpokit train --resume RUN --steps M` continues a finished run; `true`
writes the model only (a third of the size with AdamW; no run resumes from it). The final model (`final/`) is the
model only, as TRL's `save_model`, and hard links to the last checkpoint's weights rather than a second copy.

A checkpoint records how long each log was when it was written (`log_sizes`, bytes); a restore cuts the logs back
to exactly that, so whatever a killed process logged after its checkpoint is dropped, and the resumed run writes the
same rows as a run never killed. One kind of row is kept: when the resumed run trains past the checkpoint's step (a
finished run extended with `--steps`), the rows of that step itself logged after it (the final evaluation), which
no later step writes again. Checkpoints written before `log_sizes` existed fall back to dropping the rows of later
steps. Under torchrun rank 0 picks the newest readable checkpoint and every rank loads it."""

from __future__ import annotations

import dataclasses
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ..common import faults
from ..parallel.distributed import DistInfo, all_gather_objects, barrier, broadcast_object
from ..run import rng
from ..run.checkpoint import CheckpointError, latest_checkpoint, load_checkpoint, load_latest, save_checkpoint
from ..run.model_dir import is_peft, link_model_dir, replace_dir, save_model_dir
from ..run.writer import RunWriter
from .autopilot import truncate_rows_after

# what `restore` reads from a checkpoint's state.json, with the types it must have
STATE_FIELDS: dict[str, type | tuple[type, ...]] = {
    "data_position": int,
    "group_counter": int,
    "kl_coef": (int, float),
    "entropy_coef": (int, float),
}


@dataclass
class RunRecord:
    """The numbers of a run a checkpoint's state.json holds (module docstring)."""

    step: int
    data_position: int
    group_counter: int
    kl_coef: float
    entropy_coef: float
    precision: str | None = None
    log_sizes: dict[str, int] | None = None
    autopilot: dict[str, Any] | None = None
    ranks: list[dict[str, Any]] | None = None  # torchrun: each rank's position, group counter and RNG

    def to_json(self) -> dict[str, Any]:
        """state.json's fields (the step is written by `save_checkpoint`); unset ones left out."""
        out = {k: v for k, v in dataclasses.asdict(self).items() if v is not None}
        out.pop("step")
        return out

    @classmethod
    def from_json(cls, st: dict[str, Any]) -> RunRecord:
        """A state.json read by `read_state` (the `STATE_FIELDS` checked); fields it does not know are ignored."""
        return cls(
            step=int(st["step"]),
            data_position=int(st["data_position"]),
            group_counter=int(st["group_counter"]),
            kl_coef=float(st["kl_coef"]),
            entropy_coef=float(st["entropy_coef"]),
            precision=st.get("precision"),
            log_sizes=st.get("log_sizes"),
            autopilot=st.get("autopilot") or None,
            ranks=st.get("ranks") or None,
        )


@dataclass
class Stateful:
    """What a checkpoint writes and restores in place: modules by name ("model" is the policy, a Hugging Face
    directory), the policy's optimizer (its state as `Sharding.optimizer_state` gives it), the schedule, and further
    objects with state dicts by name (the critic's optimizer)."""

    modules: dict[str, torch.nn.Module]
    optimizer: Any
    scheduler: Any
    extra: dict[str, Any] = field(default_factory=dict)

    def parts(self) -> dict[str, Any]:
        return {"modules": self.modules, "optimizer": self.optimizer, "scheduler": self.scheduler, "extra": self.extra}


class _Taken:
    """A state dict taken once (collectively, on every rank) for the rank that writes the checkpoint."""

    def __init__(self, sd: dict[str, Any]) -> None:
        self.sd = sd

    def state_dict(self) -> dict[str, Any]:
        return self.sd


def model_only(save_only_model: bool | None) -> bool:
    """Whether a checkpoint holds the model only: `train.save_only_model`, TRL's meaning (None, which a config.yaml
    of an older grpokit holds for "unset", is TRL's default false: every state kept)."""
    return bool(save_only_model)


def save(
    run_dir: Path,
    record: RunRecord,
    state: Stateful,
    *,
    info: DistInfo,
    train: Any,
    tokenizer: Any,
) -> Path:
    """Checkpoint `record.step`; under torchrun every rank calls it, rank 0 writes. `train` is the run's TrainConfig
    (how many to keep, merged LoRA copy, model only: `model_only`)."""
    if info.world > 1:  # each rank's own prompt position and RNG, written by rank 0
        mine = {"data_position": record.data_position, "group_counter": record.group_counter, "rng": rng.capture()}
        record.ranks = all_gather_objects(mine, info)
    optimizer = _Taken(state.optimizer.state_dict())  # FSDP2: gathered on every rank
    if not info.is_main:
        barrier(info)
        return run_dir / "checkpoints" / f"step_{record.step}"
    path = save_checkpoint(
        run_dir,
        record.step,
        modules=state.modules,
        optimizer=optimizer,
        scheduler=state.scheduler,
        state=record.to_json(),
        keep=train.save_total_limit,
        extra=state.extra,
        tokenizer=tokenizer,
        save_merged=train.save_merged,
        model_only=model_only(train.save_only_model),
    )
    barrier(info)
    return path


def restore(
    run_dir: Path, state: Stateful, info: DistInfo, *, steps: int, path: Path | None = None
) -> RunRecord | None:
    """Load checkpoint `path`, or the newest readable one (an unreadable newer one is moved aside, said in one
    line), into `state`; returns its record (this rank's position and RNG restored under torchrun), None when there
    is no checkpoint. A model-only checkpoint loads only at `steps` (train.steps) or later: the model alone."""
    parts = {**state.parts(), "require": STATE_FIELDS, "finished_at": steps}
    if path is None and info.world > 1:  # rank 0 picks (and moves aside a corrupt one); all load that
        found = load_latest(run_dir, **parts) if info.is_main else None
        path = broadcast_object(found[0] if found else None, info)
        if path is None:
            return None
        st = found[1] if found else load_checkpoint(path, **parts)
    elif path is not None:
        st = load_checkpoint(path, **parts)
    else:
        found = load_latest(run_dir, **parts)
        if found is None:
            return None
        path, st = found
    record = RunRecord.from_json(st)
    if info.world > 1 or record.ranks:
        _restore_rank(record, info)
    return record


def _restore_rank(record: RunRecord, info: DistInfo) -> None:
    """Under torchrun: this rank's own position and RNG into `record`; the world size must be the one that wrote it."""
    ranks = record.ranks or []
    if len(ranks) != info.world:
        raise CheckpointError(
            f"checkpoint step {record.step} was written by {max(len(ranks), 1)} process(es), this run has "
            f"{info.world}: resume with the same --nproc-per-node"
        )
    mine = ranks[info.rank]
    record.data_position = int(mine["data_position"])
    record.group_counter = int(mine["group_counter"])
    try:
        rng.restore(mine["rng"])  # checked when the checkpoint was read; a state.json edited since is refused here
    except ValueError as e:
        raise CheckpointError(f"checkpoint step {record.step}: rank {info.rank}: {e}") from e


def cut_logs(log: RunWriter | None, run_dir: Path, record: RunRecord, *, steps: int | None = None) -> None:
    """The run's logs cut back to what they held when the checkpoint was written; with `steps` (train.steps) past
    the checkpoint's step, the metrics rows of that step logged after it are kept (module docstring)."""
    if log is None:
        return
    log.truncate_after(record.step, record.log_sizes, keep_own_step=steps is not None and steps > record.step)
    if not log.cut_to_size(run_dir / "interventions.jsonl", record.log_sizes):
        truncate_rows_after(run_dir / "interventions.jsonl", record.step)


def save_final(run_dir: Path, model: torch.nn.Module, tokenizer: Any, step: int, info: DistInfo) -> Path:
    """The final model in `final/`: hard links to the last checkpoint's model files when that checkpoint is of this
    step (the same weights, stored once), else written; a LoRA run's final model is merged. Built beside and put in
    place whole, so a kill mid-write leaves the previous `final/` or none, never a half model."""
    out = run_dir / "final"
    if info.is_main:
        tmp = run_dir / ".tmp-final"
        shutil.rmtree(tmp, ignore_errors=True)
        last = latest_checkpoint(run_dir)
        same = last is not None and last.name == f"step_{step}" and not is_peft(model)
        if not (same and link_model_dir(last, tmp)):
            save_model_dir(model, tokenizer, tmp, merged=True)
        replace_dir(tmp, out)
        faults.point("final_saved")
    barrier(info)
    return out
