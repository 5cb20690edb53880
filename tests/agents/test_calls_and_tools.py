"""Tool calls read from a turn (hermes tags; the template's own parser is refused where the tokenizer has none),
tools from plain functions in TRL's convention, and their calls run in the reward sandbox with timeouts: results,
errors and timeouts all come back as text the model reads."""

from __future__ import annotations

import sys
import time

import pytest

from grpokit.agents.calls import ToolCall, call_parser, parse_hermes
from grpokit.agents.execution import ToolExecutor
from grpokit.agents.tools import calculator, tool_from_function
from grpokit.rewards.limits import SandboxLimits


def test_hermes_reads_wellformed_calls_and_counts_each_malformed_block() -> None:
    text = (
        'first <tool_call>{"name": "calculator", "arguments": {"expression": "1 + 2"}}</tool_call> then '
        '<tool_call>{"name": "calculator", "arguments": "{\\"expression\\": \\"3\\"}"}</tool_call> '
        "<tool_call>{name: calculator}</tool_call> "
        '<tool_call>{"arguments": {}}</tool_call> '
        '<tool_call>{"name": "x", "arguments": [1]}</tool_call> '
        '<tool_call>{"name": "calculator"'
    )
    p = parse_hermes(text)
    assert p.calls == [ToolCall("calculator", {"expression": "1 + 2"}), ToolCall("calculator", {"expression": "3"})]
    assert p.attempts == 6 and p.failures == 4
    assert "not valid JSON" in p.errors[0]
    assert 'string "name"' in p.errors[1]
    assert "must be a JSON object" in p.errors[2]
    assert "not closed" in p.errors[3]
    assert parse_hermes("The answer is 5.").attempts == 0
    nested = parse_hermes('<tool_call>{"function": {"name": "f", "arguments": {"a": 1}}}</tool_call>')
    assert nested.calls == [ToolCall("f", {"a": 1})]


def test_template_format_is_refused_without_a_response_parser(smollm_tokenizer) -> None:  # noqa: ANN001
    with pytest.raises(ValueError, match="agent.tool_format=template.*hermes"):
        call_parser("template", smollm_tokenizer)
    assert call_parser("auto", smollm_tokenizer)("<tool_call>{}</tool_call>").failures == 1  # hermes fallback


def weather(city: str, days: int = 1) -> str:
    """Forecast for a city.

    Args:
        city: the city's name.
        days: how many days ahead.
    """
    return f"{city}: sunny for {days} day(s)"


def no_docs(x):  # noqa: ANN001, ANN201
    return x


def test_a_tool_schema_comes_from_signature_and_docstring_as_in_trl() -> None:
    tool = tool_from_function(weather)
    fn = tool.schema["function"]
    assert fn["name"] == "weather" and fn["description"] == "Forecast for a city."
    assert fn["parameters"]["properties"]["days"] == {"type": "integer", "description": "how many days ahead."}
    assert fn["parameters"]["required"] == ["city"]
    with pytest.raises(ValueError, match="agent.tools: 'no_docs' cannot be a tool"):
        tool_from_function(no_docs)
    with pytest.raises(ValueError, match="agent.tools: 'calculatr' is neither.*did you mean 'calculator'"):
        ToolExecutor(["calculatr"], sandbox=None)
    assert calculator("(21 + 47) * 2") == "136" and calculator("7 / 2") == "3.5"


def slow(seconds: float) -> str:
    """Sleep.

    Args:
        seconds: how long.
    """
    time.sleep(seconds)
    return "woke"


def read_file(path: str) -> str:
    """Read a file.

    Args:
        path: which file.
    """
    with open(path) as f:
        return f.read()[:20]


def test_calls_run_sandboxed_with_timeouts_and_every_outcome_is_text_for_the_model(tmp_path) -> None:  # noqa: ANN001
    secret = tmp_path.parent / "secret.txt"
    secret.write_text("top secret")
    tools = [tool_from_function(f) for f in (calculator, weather, slow, read_file)]
    ex = ToolExecutor(tools, timeout_s=1.0, sandbox=SandboxLimits(), max_chars=300)
    try:
        ok = ex.run(ToolCall("calculator", {"expression": "21 + 47"}))
        assert (ok.status, ok.text) == ("ok", "68")
        cut = ex.run(ToolCall("weather", {"city": "L" * 400, "days": 3}))
        assert (
            cut.status == "ok" and cut.text == "L" * 300 + "... [120 more characters]"
        )  # 400 + len(": sunny for 3 day(s)")
        bad = ex.run(ToolCall("calculator", {"expr": "1"}))
        assert bad.status == "error" and "unexpected keyword argument 'expr'" in bad.text
        raised = ex.run(ToolCall("calculator", {"expression": "1 / 0"}))
        assert raised.status == "error" and "division by zero" in raised.text
        unknown = ex.run(ToolCall("search", {}))
        assert unknown.status == "error" and "no tool named 'search'" in unknown.text
        t0 = time.monotonic()
        hung = ex.run(ToolCall("slow", {"seconds": 30}))
        assert hung.status == "timeout" and time.monotonic() - t0 < 10
        after = ex.run(ToolCall("calculator", {"expression": "2 * 3"}))  # a fresh worker took over
        assert (after.status, after.text) == ("ok", "6")
        leaked = ex.run(ToolCall("read_file", {"path": str(secret)}))  # outside what the sandbox may read
        assert leaked.status in ("error", "timeout") and "top secret" not in leaked.text
    finally:
        ex.close()


TOOL_MODULE = """
import os

SEEN = []
try:
    with open({marker!r}, "w") as f:  # outside the sandbox's private directory
        f.write("imported")
except OSError:
    SEEN.append("write denied")
SEEN.append("token" if os.environ.get("HF_TOKEN") else "no token")


def forecast(city: str) -> str:
    \"\"\"Forecast for a city.

    Args:
        city: the city's name.
    \"\"\"
    return city + ": " + ", ".join(SEEN)
"""


def test_a_tool_module_is_imported_only_in_the_worker(tmp_path, monkeypatch) -> None:  # noqa: ANN001
    """A tool named by its spec is imported in the sandboxed worker, never in the trainer: its top-level code can
    neither write outside nor see HF_TOKEN; the trainer gets its schema from the worker, and its calls work."""
    marker = tmp_path / "imported.txt"
    module = tmp_path / "tools_mod" / "my_tools.py"
    module.parent.mkdir()
    module.write_text(TOOL_MODULE.format(marker=str(marker)))
    monkeypatch.setenv("HF_TOKEN", "hf_secret")
    ex = ToolExecutor([f"{module}:forecast", "calculator"], timeout_s=5.0, sandbox=SandboxLimits(), max_chars=300)
    try:
        assert sorted(ex.tools) == ["calculator", "forecast"]
        schema = ex.tools["forecast"].schema["function"]
        assert schema["name"] == "forecast" and schema["parameters"]["required"] == ["city"]
        assert ex.tools["forecast"].fn is None and "my_tools" not in sys.modules
        assert not marker.exists()
        out = ex.run(ToolCall("forecast", {"city": "Oslo"}))
        assert (out.status, out.text) == ("ok", "Oslo: write denied, no token")
        assert ex.run(ToolCall("calculator", {"expression": "2 + 2"})).text == "4"
    finally:
        ex.close()
    module.write_text("def forecast(city):\n    return city\n")  # no type hints or docstring: not a tool
    with pytest.raises(ValueError, match="agent.tools: 'forecast' cannot be a tool"):
        ToolExecutor([f"{module}:forecast"], sandbox=SandboxLimits())
