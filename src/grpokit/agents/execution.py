"""Running the policy's tool calls: in the reward sandbox's worker process, one call at a time, each with a timeout.

A call's arguments are written by the model, so it runs where rewards run (`grpokit.rewards.isolation`: no network,
memory/CPU/file/process limits, a private directory, killed on timeout) and never in the trainer. A tool named by its
spec is imported there too, never in the trainer: the worker builds its schema (`load_tool`) and reports it back as
JSON, which the trainer checks before showing it to the model. Every outcome is a `ToolResult` the model reads back
as a tool message: the tool's return value as text, or an error naming what went wrong (an unknown tool, arguments
the function does not take, the exception it raised, a timeout or limit).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..rewards.isolation import LOAD_TIMEOUT_S, ProcessRunner, RewardCallError, RewardCallLimit, RewardCallTimeout
from ..rewards.limits import SandboxLimits
from ..rewards.wire import ToolReply
from ..rewards.worker import WorkerSpec, describe_exception
from .calls import ToolCall
from .tools import Tool, check_tool_spec, tool_from_function, tool_function, unique_names

TOOL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,63}")

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


def load_tool(spec: str, cwd: str) -> tuple[Callable[..., list[ToolReply]], dict[str, str]]:
    """In the worker: the tool of `spec` imported, its batch entry (`call_batch`) and {"schema": JSON text}."""
    fn = tool_function(spec, cwd)
    return call_batch(fn), {"schema": json.dumps(tool_from_function(fn).schema)}


SCHEMA_MAX_CHARS = 1 << 20  # a tool's JSON schema as the worker reports it (a docstring of megabytes is refused)
SCHEMA_MAX_DEPTH = 32  # nesting of its objects and lists (what a chat template renders recursively)


def schema_from_worker(spec: str, text: str) -> Tool:
    """The `Tool` (without its function) of a schema the worker reported for `spec`, checked: the worker has run
    the tool's module, so what it sends is not trusted to be well-formed (ValueError naming the spec and the limit)."""
    where = f"agent.tools: {spec!r}: the worker reported"
    if len(text) > SCHEMA_MAX_CHARS:
        too_long = f"a schema of {len(text):,} characters, over {SCHEMA_MAX_CHARS:,}"
        raise ValueError(f"{where} {too_long}; shorten its docstring")
    try:
        schema = json.loads(text)
        name, params = schema["function"]["name"], schema["function"].get("parameters", {})
    except (ValueError, TypeError, KeyError, AttributeError) as e:
        raise ValueError(f"{where} an unreadable schema ({e})") from None
    except RecursionError:
        raise ValueError(f"{where} a schema nested deeper than JSON can be read; flatten its parameters") from None
    if not isinstance(name, str) or not TOOL_NAME.fullmatch(name):
        raise ValueError(f"agent.tools: {spec!r}: its name {str(name)[:40]!r} is not a function name")
    if not isinstance(params, dict):
        raise ValueError(f"{where} parameters of type {type(params).__name__}, not an object; describe them in Args:")
    if depth(schema) > SCHEMA_MAX_DEPTH:
        raise ValueError(f"{where} a schema nested over {SCHEMA_MAX_DEPTH} levels deep; flatten its parameters")
    return Tool(name, None, schema)


def depth(value: Any, limit: int = SCHEMA_MAX_DEPTH + 1) -> int:
    """How deep `value`'s dicts and lists nest (counted up to `limit`, iteratively: no recursion to exhaust)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, (dict, list)) and d <= limit:
            deepest = max(deepest, d)
            stack.extend((c, d + 1) for c in (v.values() if isinstance(v, dict) else v))
    return deepest


def clip(text: str, max_chars: int) -> str:
    return text if len(text) <= max_chars else text[:max_chars] + f"... [{len(text) - max_chars} more characters]"


class ToolExecutor:
    """Runs calls to `tools` in a sandboxed worker (`sandbox=None`: a worker without confinement, for tests of the
    plumbing only), each limited to `timeout_s`; results longer than `max_chars` are cut. `tools` are specs
    (built-in names, `module:function`, `file.py:function`), which only the worker imports, or `Tool`s of
    functions given in Python. `self.tools` holds every tool's schema once the worker has reported them."""

    def __init__(
        self,
        tools: Sequence[Tool | str],
        *,
        timeout_s: float = 5.0,
        sandbox: SandboxLimits | None,
        max_chars: int = 1000,
    ) -> None:
        given = [t for t in tools if isinstance(t, Tool)]
        specs = [t for t in tools if isinstance(t, str)]
        for spec in specs:
            check_tool_spec(spec)
        self.timeout_s, self.max_chars = float(timeout_s), int(max_chars)
        table: dict[str, Any] = {t.name: call_batch(t.fn) for t in given if t.fn is not None}
        table |= {spec: WorkerSpec(spec, load_tool) for spec in specs}
        self.runner = ProcessRunner(table, sandbox=sandbox, cpu_s=timeout_s)
        self.runner.tool_replies = True
        self._keys = {t.name: t.name for t in given}
        try:
            loaded = self._load(specs) if specs else []
        except BaseException:
            self.runner.close()
            raise
        self.tools = {t.name: t for t in unique_names([*given, *loaded])}

    def _load(self, specs: list[str]) -> list[Tool]:
        """The tools of `specs`, imported by the worker, which reports their schemas (ValueError naming what failed)."""
        try:
            report = self.runner.loaded(max(LOAD_TIMEOUT_S, self.timeout_s))
        except RewardCallError as e:  # its sandbox could not be set up or was refused, or it died
            raise ValueError(f"agent.tools: the tool worker could not load {', '.join(specs)}: {e}") from None
        tools = []
        for spec in specs:
            entry = report[spec]
            if "error" in entry:
                message = entry["error"]
                raise ValueError(message if message.startswith("agent.tools") else f"agent.tools: {message}")
            tool = schema_from_worker(spec, entry.get("schema", ""))
            self._keys[tool.name] = spec
            tools.append(tool)
        return tools

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
            (reply,) = self.runner.call(self._keys[call.name], None, [payload], [], self.timeout_s)
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
