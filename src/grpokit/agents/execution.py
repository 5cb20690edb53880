"""Running the policy's tool calls: in the reward sandbox's worker process, one call at a time, each with a timeout.

A call's arguments are written by the model, so it runs where rewards run (`grpokit.rewards.isolation`: no network,
memory/CPU/file/process limits, a private directory, killed on timeout) and never in the trainer. Every outcome is a
`ToolResult` the model reads back as a tool message: the tool's return value as text, or an error naming what went
wrong (an unknown tool, arguments the function does not take, the exception it raised, a timeout or limit).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..rewards.isolation import ProcessRunner, RewardCallError, RewardCallLimit, RewardCallTimeout
from ..rewards.limits import SandboxLimits
from ..rewards.wire import ToolReply
from ..rewards.worker import describe_exception
from .calls import ToolCall
from .tools import Tool

STATUSES = ("ok", "error", "timeout")


@dataclass
class ToolResult:
    """One call's outcome: `status` ok | error | timeout and the text the model reads."""

    name: str
    status: str
    text: str


def result_text(value: Any) -> str:
    """A tool's return value as the text of its tool message (JSON for mappings and lists)."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value) if isinstance(value, (dict, list)) else str(value)
    except (TypeError, ValueError):
        return str(value)


def call_batch(fn: Callable[..., Any]) -> Callable[..., list[ToolReply]]:
    """The worker-side entry of one tool: each JSON argument object in `completions` -> fn(**args) as a ToolReply."""

    def run(completions: list[str], examples: Any = None, context: Any = None) -> list[ToolReply]:
        out = []
        for args in completions:
            try:
                out.append(ToolReply("ok", result_text(fn(**json.loads(args)))))
            except Exception as e:
                out.append(ToolReply("error", describe_exception(e)))
        return out

    return run


def clip(text: str, max_chars: int) -> str:
    return text if len(text) <= max_chars else text[:max_chars] + f"... [{len(text) - max_chars} more characters]"


class ToolExecutor:
    """Runs calls to `tools` in a sandboxed worker (`sandbox=None`: a worker without confinement, for tests of the
    plumbing only), each limited to `timeout_s`; results longer than `max_chars` are cut."""

    def __init__(
        self, tools: list[Tool], *, timeout_s: float = 5.0, sandbox: SandboxLimits | None, max_chars: int = 1000
    ) -> None:
        self.tools = {t.name: t for t in tools}
        self.timeout_s, self.max_chars = float(timeout_s), int(max_chars)
        self.runner = ProcessRunner({t.name: call_batch(t.fn) for t in tools}, sandbox=sandbox, cpu_s=timeout_s)
        self.runner.tool_replies = True

    def run(self, call: ToolCall) -> ToolResult:
        """The outcome of one call (never raises)."""
        if call.name not in self.tools:
            known = ", ".join(sorted(self.tools)) or "none"
            return ToolResult(call.name, "error", f"Error: there is no tool named {call.name!r} (tools: {known})")
        try:
            payload = json.dumps(call.arguments)
        except (TypeError, ValueError) as e:
            return ToolResult(call.name, "error", f"Error: the arguments are not JSON ({e})")
        try:
            (reply,) = self.runner.call(call.name, None, [payload], [], self.timeout_s)
        except RewardCallTimeout:
            return ToolResult(call.name, "timeout", f"Error: {call.name} did not return within {self.timeout_s:g} s")
        except RewardCallLimit as e:
            return ToolResult(call.name, "timeout", f"Error: {call.name} was stopped by the sandbox ({e})")
        except (RewardCallError, ValueError) as e:
            return ToolResult(call.name, "error", f"Error: {call.name} failed ({e})")
        if not isinstance(reply, ToolReply):
            return ToolResult(call.name, "error", f"Error: {call.name} returned nothing readable")
        text = reply.text if reply.status == "ok" else f"Error: {reply.text}"
        return ToolResult(call.name, reply.status, clip(text, self.max_chars))

    def close(self) -> None:
        self.runner.close()
