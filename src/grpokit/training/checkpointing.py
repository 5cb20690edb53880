"""A run's checkpoints: what is saved (modules, optimizers, controller values, data position, autopilot state, and
under torchrun each rank's prompt position and RNG), how it is restored (the newest readable checkpoint, chosen by
rank 0 and loaded by every rank), and the final model. Functions of a `Trainer`.

A checkpoint also records how long each log was when it was written (`log_sizes`, bytes); a restore cuts the logs
back to exactly that, so whatever a killed process logged after its checkpoint (the rest of a step, the final
evaluation row) is dropped, and the resumed run writes the same rows as a run that was never killed. Checkpoints
written before `log_sizes` existed fall back to dropping the rows of later steps."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import torch

from ..common import faults
from ..parallel.distributed import all_gather_objects, barrier, broadcast_object
from ..run import rng
from ..run.checkpoint import CheckpointError, latest_checkpoint, load_checkpoint, load_latest, save_checkpoint
from ..run.model_dir import is_peft, link_model_dir, replace_dir, save_model_dir
from .autopilot import truncate_rows_after


def modules(t: Any) -> dict[str, torch.nn.Module]:
    mods: dict[str, torch.nn.Module] = {"model": t.model}
    if t.critic is not None:
        mods["critic"] = t.critic
    mods.update(t.reference.checkpoint_modules())
    return mods


def extra_state(t: Any) -> dict[str, Any]:
    return {"critic_optimizer": t.critic_opt} if t.critic_opt is not None else {}


# what `restore` reads from a checkpoint's state.json, with the types it must have
STATE_FIELDS: dict[str, type | tuple[type, ...]] = {
    "data_position": int,
    "group_counter": int,
    "kl_coef": (int, float),
    "entropy_coef": (int, float),
}


def save(t: Any) -> Path:
    state = {
        "data_position": t.stream.position,
        "group_counter": t.group_counter,
        "kl_coef": t.kl_ctl.value,
        "entropy_coef": t.ent_coef.value,
        "precision": t.precision.name,
    }
    if t.log is not None:
        state["log_sizes"] = t.log.sizes()
    if t.autopilot is not None:
        state["autopilot"] = t.autopilot.state_dict()
    optimizer = _Saved(t.sharding.optimizer_state(t.optimizer).state_dict())  # FSDP2: gathered on every rank
    if t.info.world > 1:  # each rank's own prompt position and RNG, written by rank 0
        state["ranks"] = all_gather_objects(rank_state(t), t.info)
        if not t.info.is_main:
            barrier(t.info)
            return t.run_dir / "checkpoints" / f"step_{t.step}"
    path = save_checkpoint(
        t.run_dir,
        t.step,
        modules=modules(t),
        optimizer=optimizer,
        scheduler=t.scheduler,
        state=state,
        keep=t.cfg.train.save_total_limit,
        extra=extra_state(t),
        tokenizer=t.tokenizer,
        save_merged=t.cfg.train.save_merged,
        model_only=t.cfg.train.save_only_model,
    )
    barrier(t.info)
    return path


class _Saved:
    """A state dict taken once (collectively, on every rank) for the rank that writes the checkpoint."""

    def __init__(self, sd: dict[str, Any]) -> None:
        self.sd = sd

    def state_dict(self) -> dict[str, Any]:
        return self.sd


def rank_state(t: Any) -> dict[str, Any]:
    return {
        "data_position": t.stream.position,
        "group_counter": t.group_counter,
        "rng": rng.capture(),  # plain numbers: reading a checkpoint back never unpickles anything
    }


def restore_rank(t: Any, st: dict[str, Any]) -> None:
    """Under torchrun: this rank's own position and RNG; the world size must be the one that wrote it."""
    ranks = st.get("ranks") or []
    if len(ranks) != t.info.world:
        raise CheckpointError(
            f"checkpoint step {st['step']} was written by {max(len(ranks), 1)} process(es), this run has "
            f"{t.info.world}: resume with the same --nproc-per-node"
        )
    mine = ranks[t.info.rank]
    t.stream.position = int(mine["data_position"])
    t.group_counter = int(mine["group_counter"])
    try:
        rng.restore(mine["rng"])  # checked when the checkpoint was read; a state.json edited since is refused here
    except ValueError as e:
        raise CheckpointError(f"checkpoint step {st['step']}: rank {t.info.rank}: {e}") from e


def restore(t: Any, path: Path | None = None) -> int:
    """Load checkpoint `path`, or the newest readable one (an unreadable newer one is moved aside, said in one
    line); returns its step, 0 when there is none."""
    parts = {"modules": modules(t), "optimizer": t.sharding.optimizer_state(t.optimizer), "scheduler": t.scheduler}
    parts["extra"] = extra_state(t)
    parts["require"] = STATE_FIELDS
    if path is None and t.info.world > 1:  # rank 0 picks (and moves aside a corrupt one); all load that
        found = load_latest(t.run_dir, **parts) if t.info.is_main else None
        path = broadcast_object(found[0] if found else None, t.info)
        if path is None:
            return 0
        st = found[1] if found else load_checkpoint(path, **parts)
    elif path is not None:
        st = load_checkpoint(path, **parts)
    else:
        found = load_latest(t.run_dir, **parts)
        if found is None:
            return 0
        path, st = found
    t.step = int(st["step"])
    t.stream.position = int(st["data_position"])
    t.group_counter = int(st["group_counter"])
    t.kl_ctl.value = float(st["kl_coef"])
    t.ent_coef.value = float(st["entropy_coef"])
    if t.info.world > 1 or st.get("ranks"):
        restore_rank(t, st)
    if t.autopilot is not None and st.get("autopilot"):
        # the interventions made before the checkpoint stay in force, and count against the budget
        t.autopilot.load_state_dict(st["autopilot"])
    t.sharding.after_restore()  # FSDP2: the sharded learner takes the restored weights
    t.engine.sync_weights(t.model)
    if t.log is not None:
        t.log.truncate_after(t.step, st.get("log_sizes"))
        if not t.log.cut_to_size(t.run_dir / "interventions.jsonl", st.get("log_sizes")):
            truncate_rows_after(t.run_dir / "interventions.jsonl", t.step)
    return t.step


def save_final(t: Any) -> Path:
    """The final model in `final/`: hard links to the last checkpoint's model files when that checkpoint is of this
    step (the same weights, stored once), else written; a LoRA run's final model is merged. Built beside and put in
    place whole, so a kill mid-write leaves the previous `final/` or none, never a half model."""
    out = t.run_dir / "final"
    if t.info.is_main:
        tmp = t.run_dir / ".tmp-final"
        shutil.rmtree(tmp, ignore_errors=True)
        last = latest_checkpoint(t.run_dir)
        same = last is not None and last.name == f"step_{t.step}" and not is_peft(t.model)
        if not (same and link_model_dir(last, tmp)):
            save_model_dir(t.model, t.tokenizer, tmp, merged=True)
        replace_dir(tmp, out)
        faults.point("final_saved")
    barrier(t.info)
    return out
