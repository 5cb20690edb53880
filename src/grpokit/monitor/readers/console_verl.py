"""verl's console logger: `step:N - key:value - ...` lines split into runs, and the detectors' context from the
config verl prints at start."""

from __future__ import annotations

import math
import re
from typing import Any

from .canonical import RawRows, merge_segments
from .values import ANSI_ESCAPE, to_float

# verl: `step:12 - actor/entropy:0.43 - ...`, after any prefix (`(TaskRunner pid=1) `, timestamps); not `global_step:`
VERL_LINE = re.compile(r"(?<![\w/])step:(\d{1,12})\s+-\s+(.*)$")

# the config dict verl prints before training, and transformers' Trainer banner
VERL_START = re.compile(r"'actor_rollout_ref':\s*\{")


def _verl_row_kind(values: dict[str, float]) -> str | None:
    if any(k.startswith(("actor/", "critic/", "response_length/")) for k in values):
        return "rl"
    if any(k in ("train/loss", "val/loss") for k in values):
        return "sft"  # verl's SFT trainer prints `step:N - train/loss:...` in the same format
    return None  # a validation-only line: it joins whichever run it sits in


class VerlConsoleLines:
    """verl console lines read one at a time (`grpokit watch` reads a growing log this way): `feed(line)` returns
    (run index, step, values) for a metric line, else None. A new run starts when the lines switch between SFT and
    RL, or when the step goes back (a fresh training, not a resume: verl resumes at the next step)."""

    def __init__(self) -> None:
        self.run = 0
        self.kind: str | None = None
        self.last: int | None = None  # the previous metric line's step (None before the first)

    def feed(self, line: str) -> tuple[int, int, dict[str, float]] | None:
        m = VERL_LINE.search(ANSI_ESCAPE.sub("", line))
        if not m:
            return None
        values = {}
        for part in m.group(2).split(" - "):
            key, sep, val = part.strip().rpartition(":")
            v = to_float(val) if sep and key else None
            if v is not None:
                values[key.strip()] = v
        if not values:
            return None
        step, k = int(m.group(1)), _verl_row_kind(values)
        if self.last is not None and ((k is not None and self.kind is not None and k != self.kind) or step < self.last):
            self.run, self.kind = self.run + 1, None
        self.kind = k or self.kind
        self.last = step
        return self.run, step, values


def verl_console_segments(text: str) -> list[RawRows]:
    """verl console lines grouped into runs (`VerlConsoleLines`)."""
    segments: list[RawRows] = []
    lines = VerlConsoleLines()
    for line in text.splitlines():
        row = lines.feed(line)
        if row is not None:
            run, step, values = row
            if run == len(segments):
                segments.append({})
            merge_segments(segments[run], step, values)
    return segments


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
