"""Turning an `Example` into the model's prompt text: its conversation (or its prompt as one user message), with
the system prompt, through the tokenizer's chat template."""

from __future__ import annotations

from typing import Any

from .example import Example


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
    `enable_thinking: false`).
    """
    messages = conversation(example, system_prompt)
    if not getattr(tokenizer, "chat_template", None):
        return "\n\n".join(str(m["content"]) for m in messages)
    kwargs = {"tokenize": False, "add_generation_prompt": True, **(chat_template_kwargs or {})}
    try:
        return tokenizer.apply_chat_template(messages, **kwargs)
    except Exception:
        if messages[0].get("role") != "system":
            raise
        return tokenizer.apply_chat_template(_merge_system(messages), **kwargs)
