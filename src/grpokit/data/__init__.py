"""Training data: built-in verifiable tasks, local file loaders and chat-template rendering."""

from __future__ import annotations

from .chat import render_prompt
from .example import Example
from .loaders import load_examples, load_hf_dataset, load_jsonl
from .registry import TASKS, get_task, list_tasks
from .task import Task

__all__ = [
    "TASKS",
    "Example",
    "Task",
    "get_task",
    "list_tasks",
    "load_examples",
    "load_hf_dataset",
    "load_jsonl",
    "render_prompt",
]
