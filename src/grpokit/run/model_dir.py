"""A Hugging Face model directory as a run writes it: saved (`save_pretrained` of the model, a PEFT adapter or the
merged model, and the tokenizer), hard-linked from a checkpoint (the final model, stored once), and put in place
whole (a directory replaced, never written into: its files may be links shared with a checkpoint)."""

from __future__ import annotations

import copy
import os
import shutil
from pathlib import Path
from typing import Any

import torch

from ..common import faults


def is_peft(model: torch.nn.Module) -> bool:
    return hasattr(model, "peft_config") and hasattr(model, "merge_and_unload")


def save_model_dir(model: torch.nn.Module, tokenizer: Any, out: Path, *, merged: bool = False) -> None:
    """`out` as a Hugging Face directory: the model (a PEFT adapter stays an adapter unless `merged`), its
    generation config and the tokenizer."""
    if merged and is_peft(model):
        model = copy.deepcopy(model).merge_and_unload()
    model.save_pretrained(out, safe_serialization=True)
    faults.point("model_saved")
    if tokenizer is not None:
        tokenizer.save_pretrained(out)


def link_model_dir(checkpoint: Path, out: Path) -> bool:
    """`out` as the same Hugging Face directory as `checkpoint`'s model part (its top-level files: weights, config,
    tokenizer), each file a hard link, so a final model equal to the last checkpoint takes no disk space of its own.
    False (and `out` removed) where the file system has no hard links; the caller then writes the model."""
    out.mkdir(parents=True)
    files = sorted((f for f in checkpoint.iterdir() if f.is_file()), key=lambda f: f.suffix != ".safetensors")
    try:
        for i, f in enumerate(files):
            os.link(f, out / f.name)
            if f.suffix == ".safetensors" and (i + 1 == len(files) or files[i + 1].suffix != ".safetensors"):
                faults.point("model_saved")  # as `save_model_dir`: the weights in place, the rest not yet
    except OSError:
        shutil.rmtree(out, ignore_errors=True)
        return False
    return True


def replace_dir(tmp: Path, final: Path) -> None:
    """Put the complete directory `tmp` at `final`, replacing what was there. The old one is removed first, never
    written into: its files may be hard links shared with a checkpoint."""
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)
