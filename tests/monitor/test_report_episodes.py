"""The report's sample completions show a multi-turn episode turn by turn (the assistant's text and tool calls, each
tool reply with its status, what ended it); rows without an episode render as before; the diagnosis shows an alert's
sample episodes as text boxes, not inside the evidence JSON."""

from __future__ import annotations

import json
from pathlib import Path

from grpokit import metric_names as mn
from grpokit.monitor.report import make_report
from grpokit.monitor.report.episodes import EPISODE_STYLE, episode_html

EPISODE = {
    "ended_by": "turn_limit",
    "policy_tokens": 120,
    "env_tokens": 40,
    "turns": [
        {
            "role": "assistant",
            "content": "I will use <calc> & check.",
            "calls": [{"name": "calculator", "arguments": {"expr": "17*23"}}],
            "parse_error": None,
        },
        {"role": "tool", "name": "calculator", "content": "391", "status": "ok"},
        {"role": "assistant", "content": "<tool_call>{broken", "calls": [], "parse_error": "invalid JSON at 1:2"},
        {"role": "tool", "name": "search", "content": "no reply within 5 s", "status": "timeout"},
        {"role": "user", "content": "Time is up: answer now."},
    ],
}


def test_episode_html_has_one_box_per_turn_with_calls_results_status_and_end() -> None:
    html = episode_html(EPISODE)
    assert html.count("<div class='turn ") == 5
    assert "<div class='turn user'><span class='role'>user</span>\nTime is up: answer now.</div>" in html
    assert "I will use &lt;calc&gt; &amp; check." in html  # escaped
    assert "call calculator({&quot;expr&quot;: &quot;17*23&quot;})" in html
    assert "<span class='role'>tool calculator</span> [<span class='good'>ok</span>]\n391" in html
    assert "<div class='turn tool timeout'>" in html and "<span class='bad'>timeout</span>" in html
    assert "tool call did not parse: invalid JSON at 1:2" in html
    assert "ended by <b>turn_limit</b> (5 turns, tokens: policy 120, tool 40)" in html


def _run(d: Path, completions: list[dict], rows: list[dict] | None = None) -> Path:
    d.mkdir(parents=True)
    (d / ".grpokit-run").write_text("")
    rows = rows or [{mn.REWARD_MEAN: 0.5, mn.ACTOR_PG_LOSS: 0.01, mn.LENGTH_MEAN: 50.0}] * 4
    (d / "metrics.jsonl").write_text("".join(json.dumps({"step": i + 1, **r}) + "\n" for i, r in enumerate(rows)))
    (d / "completions.jsonl").write_text("".join(json.dumps(c) + "\n" for c in completions))
    return d


def test_report_renders_an_episode_and_keeps_plain_rows_as_they_were(tmp_path: Path) -> None:
    plain = {"step": 1, "prompt": "p?", "answer": "4", "text": "plain <b>text</b>", "reward": 1.0, "accuracy": 1.0}
    agent = {**plain, "step": 4, "text": "final answer", "reward": 0.0, "accuracy": 0.0, "episode": EPISODE}
    html = make_report(_run(tmp_path / "run", [plain, agent])).read_text()
    assert "<div class='completion'>plain &lt;b&gt;text&lt;/b&gt;</div>" in html  # the plain row: as before
    assert "call calculator({&quot;expr&quot;: &quot;17*23&quot;})" in html and "]\n391</div>" in html
    assert "no reply within 5 s" in html and "ended by <b>turn_limit</b>" in html
    assert html.count(EPISODE_STYLE) == 1
    assert "<div class='completion'>final answer</div>" not in html  # the episode replaces the final text

    only_plain = make_report(_run(tmp_path / "plain", [plain])).read_text()
    assert "<div class='completion'>plain &lt;b&gt;text&lt;/b&gt;</div>" in only_plain
    assert "class='episode'" not in only_plain and ".turn{" not in only_plain  # no episode styles either


def test_report_diagnosis_shows_sample_episodes_as_text(tmp_path: Path) -> None:
    failing = {
        mn.REWARD_MEAN: 0.2,
        mn.ACTOR_PG_LOSS: 0.01,
        mn.EPISODE_TOOL_CALLS: 20,
        mn.EPISODE_TOOL_ERROR_RATE: 0.0,
        mn.EPISODE_TOOL_TIMEOUT_RATE: 0.5,
    }
    row = {"step": 1, "prompt": "p?", "answer": "4", "text": "t", "reward": 0.0, "accuracy": 0.0, "episode": EPISODE}
    html = make_report(_run(tmp_path / "run", [row], [failing] * 6)).read_text()
    assert "failing tool calls" in html and "sample episodes:" in html
    assert "tool search [timeout]: no reply within 5 s" in html
    assert "sample_episodes" not in html.split("<h2>Charts</h2>")[0]  # not inside the evidence JSON
