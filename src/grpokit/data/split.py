"""A run's training and held-out examples, encoded once: what `data.*` in the config resolves to.

Built-in tasks have their own seeded disjoint splits. A data file, directory or dataset name (`data.split`, default
"train"; `data.subset` = the configuration of a datasets name) gets a seeded held-out split of 10% (at
most `data.eval_size`, default 200); examples with the same prompt text land on the same side, so a duplicated
prompt never leaks into the held-out set.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import torch

from .chat import conversation, has_own_system, render_prompt
from .example import Example
from .limits import PromptLimit, encode_prompts
from .loaders import load_files
from .registry import default_reward_for, get_task

log = logging.getLogger(__name__)
DEFAULT_EVAL_SIZE = 200


@dataclass
class TaskData:
    """Examples and their prompt token ids; `default_reward` is the reward used when `reward.functions` is empty
    (None when the data has no reference answers: `data.answer_key: null`)."""

    train: list[Example]
    held_out: list[Example]
    train_tokens: list[list[int]]
    held_out_tokens: list[list[int]]
    default_reward: str | None
    limit: PromptLimit | None = None  # the prompt length limit applied, with the ids it skipped


def load_task_data(data_cfg: Any, tokenizer: Any, seed: int, limit: PromptLimit | None = None) -> TaskData:
    """Resolve `data.task` (a built-in task name, a local file or directory, a datasets name) into encoded train /
    held-out examples; `data.system_prompt` goes in front of every conversation without a system message of its own
    (those that have one keep it: counted and logged), and makes a plain prompt a conversation (system + user), as
    open-r1's `make_conversation` does: TRL-style rewards then get conversational prompts and completions. Prompts
    over `limit` are skipped and counted in `limit.skipped`, or refused (`grpokit.data.limits`)."""
    train, held_out, reward = _examples(data_cfg, seed)
    if not train:
        raise ValueError(f"data.task={data_cfg.task!r} gave no training examples")
    system, template_kwargs = data_cfg.system_prompt, dict(data_cfg.chat_template_kwargs or {})
    if system:
        own = sum(has_own_system(e) for e in train + held_out)
        if own:
            log.warning("data.system_prompt not used on %d examples that bring their own system message", own)
        for ex in train + held_out:
            if not ex.messages:
                ex.messages = conversation(ex, system)

    def render(ex: Example) -> str:
        return render_prompt(tokenizer, ex, system, template_kwargs)

    train, train_ids = encode_prompts(train, render, tokenizer, limit, "training")
    held_out, held_out_ids = encode_prompts(held_out, render, tokenizer, limit, "held-out")
    return TaskData(train, held_out, train_ids, held_out_ids, reward, limit)


def _examples(d: Any, seed: int) -> tuple[list[Example], list[Example], str | None]:
    try:
        task = get_task(d.task)
    except (ValueError, KeyError):
        task = None
    eval_size = d.eval_size if d.eval_size is not None else DEFAULT_EVAL_SIZE
    if task is not None and (d.extra_files or d.extra_eval_files):
        raise ValueError(
            f"data.extra_files / extra_eval_files add data files to a data file, and data.task={d.task!r} is a "
            "built-in task: give a data file in data.task, or drop the extra files"
        )
    if task is not None:
        return (
            task.examples("train", d.train_size, seed),
            task.examples("test", None, seed + 1)[:eval_size],
            (task.default_reward),
        )
    keys = {"prompt_key": d.prompt_key, "answer_key": d.answer_key, "subset": d.subset}
    reward = default_reward_for(d.task, d.answer_key)
    files = [d.task, *(d.extra_files or [])]
    if d.eval_data:
        train = load_files(files, d.split, d.train_size, seed, **keys)
        held_out = load_files([d.eval_data, *(d.extra_eval_files or [])], "test", None, seed + 1, **keys)
        return train, held_out[:eval_size], reward
    if d.extra_eval_files:
        raise ValueError("data.extra_eval_files adds to data.eval_data, which is not set: set data.eval_data too")
    pool = load_files(files, d.split, None, seed, **keys)
    train, held_out = split_by_prompt(pool, eval_size, seed)
    return (train[: d.train_size] if d.train_size else train), held_out, reward


def split_by_prompt(pool: list[Example], eval_size: int, seed: int) -> tuple[list[Example], list[Example]]:
    """Seeded split holding out 10% of the distinct prompts (at most `eval_size` examples, none for one prompt).

    Examples sharing a prompt text stay together, so the held-out set never contains a training prompt.
    """
    groups: dict[str, list[int]] = {}
    for i, ex in enumerate(pool):
        groups.setdefault(ex.prompt if isinstance(ex.prompt, str) else repr(ex.prompt), []).append(i)
    keys = list(groups)
    order = torch.randperm(len(keys), generator=torch.Generator().manual_seed(seed)).tolist()
    n_eval = min(eval_size, max(1, len(keys) // 10)) if len(keys) > 1 else 0
    held = [i for k in order[:n_eval] for i in groups[keys[k]]][:eval_size]
    held_set = set(held)
    train = [i for k in order[n_eval:] for i in groups[keys[k]]]
    train = [i for i in train if i not in held_set]
    return [pool[i] for i in train], [pool[i] for i in held]
