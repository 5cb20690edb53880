"""Name -> built-in task table, with helpful errors for unknown names."""

from __future__ import annotations

import difflib

from ..common.registry import Registry
from .arithmetic import ADD1, ADD2, ADD2_TOOL, MUL1
from .code import CODE1
from .countdown import COUNTDOWN
from .task import Task

TASKS = Registry.of("task", {t.name: t for t in (ADD1, ADD2, ADD2_TOOL, MUL1, COUNTDOWN, CODE1)})


def unknown_name_error(kind: str, name: str, known: list[str], extra: str = "") -> ValueError:
    """A ValueError naming the bad value, the known names and the closest match."""
    close = difflib.get_close_matches(str(name), known, n=1)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    return ValueError(f"unknown {kind} {name!r}.{hint} Known: {', '.join(sorted(known))}.{extra}")


def get_task(name: str) -> Task:
    """The built-in task called `name`; ValueError with the known names and closest match otherwise."""
    try:
        return TASKS[name]
    except KeyError:
        raise unknown_name_error("task", name, list(TASKS)) from None


def task_tools(task: str) -> list[str]:
    """The tools a built-in task brings (none for other tasks and data files): such a task runs multi-turn."""
    return list(getattr(TASKS.get(task), "tools", ()) or ()) if task in TASKS else []


def list_tasks() -> dict[str, str]:
    """Task name -> one-line description."""
    return {name: task.description for name, task in sorted(TASKS.items())}


def default_reward_for(task: str, answer_key: str | None) -> str | None:
    """The reward used when `reward.functions` is empty: a built-in task's own, `math_verify` for data with
    reference answers, None for data without (`data.answer_key: null`)."""
    if task in TASKS:
        return TASKS[task].default_reward
    return "math_verify" if answer_key else None
