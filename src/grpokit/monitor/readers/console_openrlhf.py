"""OpenRLHF's printed training output (`train_ppo_ray` / `train_ppo` console logs, Ray prefixes included).

OpenRLHF prints its metrics three ways, depending on the version; a log is read from the best one it holds:

1. `✨ Global step N: {'policy_loss': ..., 'reward': ..., ...}` (a logger line per training step, since April
   2025): the full status dict of step N.
2. The `Episode [e/E]` progress bar with the full status as its postfix (`policy_loss=..., kl=..., reward=...,
   return=..., response_length=..., total_length=...`, 2023 to early 2025): one postfix per PPO update, printed
   when the update ends. Its counter counts rollout batches (or prompts), not updates, so rows are numbered by
   update: the n-th distinct postfix is step n.
3. The `Train epoch [k/K]` bar of the actor's PPO epochs, whose postfix is a short status of each micro-batch
   (`pg=, rm=, ret=, glen=, tlen=, kl=, act_lr=` until early 2025, then `act_loss=, reward=, return=, gen_len=,
   tot_len=, kl=, act_lr=, ent_loss=, grad_norm=`): used only when the log has neither of the above. A step is
   one completed pass of the bars (all K epochs); its row is the mean of the micro-batches' values. A pass cut off
   by a crash is not a step (a note says how far it got).

Short names are expanded to OpenRLHF's own metric names (`SHORT_NAMES`), which `readers.OPENRLHF_NAMES` maps to
grpokit's canonical names. The `Namespace(...)` of arguments OpenRLHF prints at start gives the detectors' context.
"""

from __future__ import annotations

import math
import re
from typing import Any

from .values import dict_at, numeric_items, to_float

#: the progress-bar postfix names of OpenRLHF's `short_status` -> the status names they abbreviate
SHORT_NAMES: dict[str, str] = {
    "pg": "policy_loss",
    "act_loss": "policy_loss",
    "rm": "reward",
    "ret": "return",
    "glen": "response_length",
    "gen_len": "response_length",
    "tlen": "total_length",
    "tot_len": "total_length",
    "act_lr": "actor_lr",
    "ent_loss": "entropy_loss",
    "grad_norm": "actor_grad_norm",
    "cri": "critic_loss",
    "vals": "values",
    "cri_lr": "critic_lr",
    "ptx": "ptx_loss",
}

# `✨ Global step 12: {...}` (also `Global step 12 [replay]: {...}` in forks)
GLOBAL_STEP = re.compile(r"Global step (\d{1,12})(?: \[[^\]]*\])?: (\{)")
# one render of a tqdm bar: `Episode [1/1]:  24%|██▍   | 2431/10050 [12:59:12<20:32:20,  9.70s/it, k=v, ...]`
BAR = re.compile(
    r"(Episode|Train epoch) \[(\d{1,12})/(\d{1,12})\]:\s*\d+%\|[^|]*\|\s*(\d{1,12})/(\d{1,12}) \[([^\]]*)\]"
)
_PAIR = re.compile(r"(?<![\w/])([A-Za-z_][\w/]*)=([^,\s]+)")  # a key starts a word: linear on long words
# the `key: value` pairs of a dict that does not parse as a literal (`np.float64(...)` values)
_KV = re.compile(r"'([^']+)':\s*([^,}]+)")
ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_POLICY_KEYS = ("policy_loss", "reward", "response_length")
# printed by a started training: a Ray actor's line prefix at the start of a line, or an Episode bar's render
_START = re.compile(
    r"^\((?:PolicyModelActor|ActorModelRayActor|PPOTrainer) pid=\d+\) |Episode \[\d+/\d+\]:\s*\d+%\|", re.M
)


def _status_dict(line: str, start: int) -> dict[str, float]:
    d = dict_at(line, start)
    if d is None:
        end = line.find("}", start)
        d = dict(_KV.findall(line[start : end if end != -1 else len(line)]))
    return numeric_items(d)


def _postfix(inside: str) -> dict[str, float]:
    """The numeric `k=v` pairs of a bar's bracket (`00:03<00:45,  3.04s/it, act_loss=-0.208, ...`)."""
    out = {}
    for k, v in _PAIR.findall(inside):
        f = to_float(v)
        if f is not None:
            out[SHORT_NAMES.get(k, k)] = f
    return out


def _lines(text: str) -> list[str]:
    return [ANSI_ESCAPE.sub("", x) for x in text.replace("\r", "\n").splitlines()]


def global_step_rows(text: str) -> dict[int, dict[str, float]]:
    rows: dict[int, dict[str, float]] = {}
    for line in _lines(text):
        for m in GLOBAL_STEP.finditer(line):
            values = _status_dict(line, m.start(2))
            if values:
                rows.setdefault(int(m.group(1)), {}).update(values)
    return rows


def _bar_renders(text: str, desc: str) -> list[tuple[int, int, int, int, dict[str, float]]]:
    """(epoch, epochs, n, total, postfix) of every render of the `desc` bars, in order."""
    out = []
    for line in _lines(text):
        for m in BAR.finditer(line):
            if m.group(1) == desc:
                out.append((int(m.group(2)), int(m.group(3)), int(m.group(4)), int(m.group(5)), _postfix(m.group(6))))
    return out


def episode_rows(text: str) -> dict[int, dict[str, float]]:
    """One row per distinct status postfix of the `Episode` bar, numbered 1, 2, ... in order (see the module
    docstring). Renders without a status (the bar before the first update) are skipped."""
    rows: dict[int, dict[str, float]] = {}
    last: dict[str, float] | None = None
    for _, _, _, _, post in _bar_renders(text, "Episode"):
        if not any(k in post for k in _POLICY_KEYS):
            continue
        if post != last:
            rows[len(rows) + 1] = post
            last = post
    return rows


def train_epoch_rows(text: str) -> tuple[dict[int, dict[str, float]], list[str]]:
    """One row per completed pass of the actor's `Train epoch` bars (the mean of its micro-batches' values); a
    trailing pass that did not complete is reported in a note. A pass starts where the bar goes back (a lower
    epoch, or a lower count in the same epoch). Bars without a policy loss or reward (the critic's) are ignored."""
    passes: list[list[dict[str, float]]] = []
    complete: list[bool] = []
    pos: tuple[int, int] | None = None
    total = 0
    for epoch, epochs, n, total, post in _bar_renders(text, "Train epoch"):
        if post and not any(k in post for k in _POLICY_KEYS):
            continue  # the critic's bar
        if pos is None or (epoch, n) < pos:
            passes.append([])
            complete.append(False)
        pos = (epoch, n)
        if post and (not passes[-1] or passes[-1][-1] != post):
            passes[-1].append(post)
        if epoch == epochs and n >= total:
            complete[-1] = True
    rows: dict[int, dict[str, float]] = {}
    notes: list[str] = []
    for mbs, done in zip(passes, complete):
        if not done:
            continue
        mean = {}
        for k in {k for mb in mbs for k in mb}:
            vals = [mb[k] for mb in mbs if k in mb]
            mean[k] = math.fsum(vals) / len(vals)  # a NaN micro-batch makes the step's value NaN
        rows[len(rows) + 1] = mean
    if rows:
        notes.append(
            "OpenRLHF console without per-step status lines: each step is a completed pass of the actor's Train "
            "epoch bars, its values the mean of the micro-batch values the bar shows"
        )
    if passes and not complete[-1] and pos is not None:
        notes.append(
            f"the last PPO update did not finish: the actor's Train epoch bar stopped at micro-batch {pos[1]} of "
            f"{total} (epoch {pos[0]})"
        )
    return rows, notes


def read(text: str) -> tuple[dict[int, dict[str, float]], list[str]]:
    """The per-step rows of an OpenRLHF console log, from the best source it holds, and notes on how."""
    rows = global_step_rows(text)
    if rows:
        return rows, []
    rows = episode_rows(text)
    if rows:
        return rows, [
            "steps are PPO updates numbered in order from the Episode bar's status (its counter counts rollout "
            "batches, not updates)"
        ]
    return train_epoch_rows(text)


def score(text: str) -> int:
    """How many OpenRLHF metric lines a text holds (status lines and bar renders with a status postfix)."""
    n = len(GLOBAL_STEP.findall(text))
    for m in BAR.finditer(text):
        if "=" in m.group(6):
            n += 1
    return n


def started(text: str) -> bool:
    """An OpenRLHF training that printed its start (it may have stopped before a step)."""
    return bool(_START.search(text))


_ARGS = {
    "advantage_estimator": re.compile(r"\badvantage_estimator='(\w+)'"),
    "max_epochs": re.compile(r"\bmax_epochs=(\d+)"),
    "rollout_batch_size": re.compile(r"\brollout_batch_size=(\d+)"),
    "n_samples_per_prompt": re.compile(r"\bn_samples_per_prompt=(\d+)"),
    "train_batch_size": re.compile(r"\btrain_batch_size=(\d+)"),
    "eps_clip": re.compile(r"\beps_clip=([0-9.eE+-]+)"),
    "eps_clip_low_high": re.compile(r"\beps_clip_low_high=\[([0-9.eE+-]+), ([0-9.eE+-]+)\]"),
    "entropy_loss_coef": re.compile(r"\bentropy_loss_coef=([0-9.eE+-]+)"),
    "dynamic_filtering": re.compile(r"\bdynamic_filtering=(True|False)"),
    "policy_loss_type": re.compile(r"\bpolicy_loss_type='(\w+)'"),
}


def context(text: str) -> dict[str, Any]:
    """The detectors' context from the `Namespace(...)` of arguments OpenRLHF prints at start (older releases)."""
    head = text[: 2 << 20]
    i = head.find("Namespace(")
    if i == -1:
        return {}
    ns = head[i : head.find("\n", i) if head.find("\n", i) != -1 else len(head)]
    found = {k: pat.search(ns) for k, pat in _ARGS.items()}
    ctx: dict[str, Any] = {"trainer": "openrlhf"}
    try:
        if found["max_epochs"]:
            ctx["epochs"] = int(found["max_epochs"].group(1))
        r, s, t = found["rollout_batch_size"], found["n_samples_per_prompt"], found["train_batch_size"]
        if r and t and int(t.group(1)) > 0:
            samples = int(r.group(1)) * (int(s.group(1)) if s else 1)
            ctx["mini_batches"] = max(samples // int(t.group(1)), 1)
        if found["eps_clip_low_high"]:
            ctx["eps_low"] = float(found["eps_clip_low_high"].group(1))
            ctx["eps_high"] = float(found["eps_clip_low_high"].group(2))
        elif found["eps_clip"]:
            ctx["eps_low"] = ctx["eps_high"] = float(found["eps_clip"].group(1))
        if found["entropy_loss_coef"]:
            ctx["entropy_coef"] = float(found["entropy_loss_coef"].group(1))
    except ValueError:
        pass
    if found["dynamic_filtering"]:
        ctx["dynamic_sampling"] = found["dynamic_filtering"].group(1) == "True"
    if found["advantage_estimator"]:
        ctx["recipe"] = found["advantage_estimator"].group(1)
    if found["policy_loss_type"]:
        loss = found["policy_loss_type"].group(1)
        ctx["policy_loss"] = {"ppo": "ppo_clip"}.get(loss, loss)
    return ctx
