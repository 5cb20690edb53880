"""Turning an `Example` into the model's prompt text: its conversation (or its prompt as one user message), with
the system prompt, through the tokenizer's chat template."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .example import Example

# where a tokenizer directory keeps its chat template, in the order transformers reads them
TEMPLATE_FILES = ("chat_template.jinja", "chat_template.json", "tokenizer_config.json")


class ChatTemplateError(ValueError):
    """The model's chat template failed to render (a syntax error, its own `raise_exception`, or code jinja's
    sandbox stopped): one line naming the file that holds the template."""


def template_file(tokenizer: Any) -> str:
    """The file the tokenizer's chat template came from, or a description when it is not a local directory's."""
    where = str(getattr(tokenizer, "name_or_path", "") or "")
    folder = Path(where) if where else None
    if folder is not None and folder.is_dir():
        for name in TEMPLATE_FILES:
            if (folder / name).is_file():
                return str(folder / name)
    return f"the chat template of {where or 'the tokenizer'}"


def template_error(tokenizer: Any, e: Exception) -> ChatTemplateError:
    """The one-line error for a template that raised `e` while rendering."""
    detail = f"{type(e).__name__}: {e}".splitlines()[0] if str(e) else type(e).__name__
    detail = detail if len(detail) <= 300 else detail[:300] + "..."
    why = ""
    if type(e).__name__ == "SecurityError":
        why = " (stopped by jinja's sandbox: the template reached for Python internals, which no chat template needs)"
    return ChatTemplateError(
        f"{template_file(tokenizer)}: the chat template failed to render ({detail}){why}; fix or replace its "
        "chat_template, or use a model whose template renders"
    )


def apply_template(tokenizer: Any, messages: list[dict[str, Any]], **kwargs: Any) -> Any:
    """`tokenizer.apply_chat_template(messages, **kwargs)`; a template that fails is a `ChatTemplateError`."""
    from jinja2.exceptions import TemplateError

    try:
        return tokenizer.apply_chat_template(messages, **kwargs)
    except TemplateError as e:
        raise template_error(tokenizer, e) from e


def conversation(example: Example, system_prompt: str | None = None) -> list[dict[str, Any]]:
    """The example's messages: its own conversation (TRL conversational / verl data) or one user message, with
    `system_prompt` in front unless the conversation already starts with a system message of its own."""
    messages = (
        [dict(m) for m in example.messages] if example.messages else [{"role": "user", "content": example.prompt}]
    )
    if system_prompt and messages[0].get("role") != "system":
        messages.insert(0, {"role": "system", "content": system_prompt})
    return messages


def _merge_system(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The system message folded into the first user message (templates that reject a system role)."""
    if messages[0].get("role") != "system" or len(messages) < 2:
        return messages
    system, first, *rest = messages
    return [{**first, "content": f"{system['content']}\n\n{first['content']}"}, *rest]


def has_own_system(example: Example) -> bool:
    """Whether the example's conversation brings its own system message (a `data.system_prompt` is then unused)."""
    return bool(example.messages) and example.messages[0].get("role") == "system"


def render_prompt(
    tokenizer: Any,
    example: Example,
    system_prompt: str | None = None,
    chat_template_kwargs: dict[str, Any] | None = None,
) -> str:
    """The prompt string for generation: the tokenizer's chat template with the generation prompt appended.

    Without a chat template (a base model) this is the messages' contents joined by blank lines (the plain prompt,
    preceded by the system prompt when one is given). Templates that reject a system role get the system prompt
    merged into the first user message. `chat_template_kwargs` go to `apply_chat_template` (e.g.
    `enable_thinking: false`). A template that fails (e.g. code jinja's sandbox stops) is one `ChatTemplateError`.
    """
    messages = conversation(example, system_prompt)
    if not getattr(tokenizer, "chat_template", None):
        return "\n\n".join(str(m["content"]) for m in messages)
    kwargs = {"tokenize": False, "add_generation_prompt": True, **(chat_template_kwargs or {})}
    try:
        return apply_template(tokenizer, messages, **kwargs)
    except Exception:
        if messages[0].get("role") != "system":
            raise
        return apply_template(tokenizer, _merge_system(messages), **kwargs)
