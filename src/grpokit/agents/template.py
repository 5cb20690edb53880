"""The chat template's side of an episode: the token ids of the messages an environment appends, and how the tools
are shown to the model.

**Exact ids.** The ids trained on are the ids sampled: a policy turn's tokens are kept as drawn, never decoded and
re-encoded, and only the environment's messages are encoded, as the difference between the template rendered with
and without them (verl's and TRL's way of extending a conversation). The turn the policy ended with its EOS token
(e.g. `<|im_end|>`); what the template writes after that token (ChatML: a newline) opens the appended chunk, and the
chunk ends with the generation prompt of the next assistant turn.

**Tools in the prompt.** A template that renders `tools` (its source uses them) gets the schemas through
`apply_chat_template(tools=...)`, as TRL does. Other templates (SmolLM2's ChatML) get them in the system prompt
with the `<tool_call>` tag format (`grpokit.agents.calls`, `hermes`).

**Foreign text.** The appended messages carry what the policy wrote (echoed by an environment, a tool's result, an
argument named in an error). A lone surrogate (what a `\\udc80` escape or bytes decoded with `surrogateescape`
leave) cannot be encoded as UTF-8, and tokenizers and templates raise on it: each becomes U+FFFD before rendering.
Control characters are text to a tokenizer and pass as they are.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ..data.chat import apply_template

_PROBE_USER, _PROBE_REPLY = "Hi.", "GRPOKIT_PROBE_REPLY"
_SURROGATE = re.compile(r"[\ud800-\udfff]")


def render(tokenizer: Any, messages: list[dict[str, Any]], generation_prompt: bool, **kwargs: Any) -> str:
    return apply_template(tokenizer, messages, tokenize=False, add_generation_prompt=generation_prompt, **kwargs)


def encodable(value: Any) -> Any:
    """`value` (a message, its content, a list of parts) with every lone surrogate in its strings replaced by U+FFFD."""
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {encodable(k): encodable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [encodable(v) for v in value]
    return value


class MessageChunker:
    """Token ids of environment messages appended after a policy turn that ended with an EOS token."""

    def __init__(self, tokenizer: Any, template_kwargs: dict[str, Any] | None = None) -> None:
        if not getattr(tokenizer, "chat_template", None):
            raise ValueError(
                "multi-turn episodes need a chat template (the model's tokenizer has none); use an instruct model "
                "or set tokenizer.chat_template"
            )
        self.tokenizer = tokenizer
        self.kwargs = {k: v for k, v in (template_kwargs or {}).items() if k != "tools"}
        self.base = [{"role": "user", "content": _PROBE_USER}, {"role": "assistant", "content": _PROBE_REPLY}]
        closed = render(tokenizer, self.base, False, **self.kwargs)
        after = closed[closed.rindex(_PROBE_REPLY) + len(_PROBE_REPLY) :]
        eos = tokenizer.decode([tokenizer.eos_token_id]) if tokenizer.eos_token_id is not None else ""
        # what the template writes after the EOS token that ended the sampled turn ("\n" in ChatML)
        self.after_eos = after[len(eos) :] if eos and after.startswith(eos) else ""
        self.closed = closed

    def text(self, messages: list[dict[str, Any]]) -> str:
        """The template text `messages` add after a closed assistant turn, up to the next assistant's prompt."""
        full = render(self.tokenizer, [*self.base, *(encodable(m) for m in messages)], True, **self.kwargs)
        if not full.startswith(self.closed):
            raise ValueError(
                "the chat template renders earlier turns differently once a message is appended; multi-turn "
                "episodes need a template whose rendering of a conversation extends the shorter one"
            )
        return self.after_eos + full[len(self.closed) :]

    def ids(self, messages: list[dict[str, Any]]) -> list[int]:
        return self.tokenizer.encode(self.text(messages), add_special_tokens=False)


def renders_tools(tokenizer: Any) -> bool:
    """Whether the chat template uses the `tools` it is given (else the tools go into the system prompt)."""
    template = getattr(tokenizer, "chat_template", None)
    return isinstance(template, str) and "tools" in template


def tool_instructions(schemas: list[dict[str, Any]]) -> str:
    """The system-prompt text that shows the tools and the `<tool_call>` format to a model whose template has no
    tool support."""
    listed = "\n".join(json.dumps(s) for s in schemas)
    return (
        "You can call these tools:\n<tools>\n"
        f"{listed}\n</tools>\n"
        'To call one, write <tool_call>{"name": <tool name>, "arguments": <arguments as JSON>}</tool_call> and '
        "stop; its result comes back in a tool message. When you know the answer, reply without a tool call."
    )
