"""Turning an `Example` into the model's prompt text."""

from __future__ import annotations

from typing import Any

from .example import Example


def _messages(example: Example, system_prompt: str | None, merge_system: bool) -> list[dict[str, str]]:
    if system_prompt and merge_system:
        return [{"role": "user", "content": f"{system_prompt}\n\n{example.prompt}"}]
    system = [{"role": "system", "content": system_prompt}] if system_prompt else []
    return [*system, {"role": "user", "content": example.prompt}]


def render_prompt(tokenizer: Any, example: Example, system_prompt: str | None = None) -> str:
    """The prompt string for generation: the tokenizer's chat template with the generation prompt appended.

    Without a chat template (a base model) this is the plain prompt, preceded by the system prompt and a
    blank line when one is given. Templates that reject a system role get the system prompt merged into
    the user message.
    """
    if not getattr(tokenizer, "chat_template", None):
        return _messages(example, system_prompt, merge_system=True)[0]["content"]
    try:
        return tokenizer.apply_chat_template(
            _messages(example, system_prompt, merge_system=False), tokenize=False, add_generation_prompt=True
        )
    except Exception:
        if not system_prompt:
            raise
        return tokenizer.apply_chat_template(
            _messages(example, system_prompt, merge_system=True), tokenize=False, add_generation_prompt=True
        )
