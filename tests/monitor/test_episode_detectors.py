"""Multi-turn / tool-use detectors (issue 26): malformed tool calls, failing tools, episodes cut by limits, context
spent on tool output — each fires on its failure with its fix and sample episodes, stays quiet on healthy
multi-turn and on single-turn series; the doctor shows them on grpokit runs (with excerpts of the run's failing
episodes) and on the foreign logs whose names map onto the episode signals."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from grpokit import metric_names as mn
from grpokit.monitor.detectors import (
    DETECTORS,
    EnvTokenShare,
    EpisodeLimits,
    MalformedToolCalls,
    Monitor,
    ToolFailures,
)
from grpokit.monitor.doctor import diagnose, render
from grpokit.monitor.readers import TRL_NAMES, read_run
from grpokit.monitor.readers.episodes import episode_examples, excerpt, failure_kinds
from grpokit.monitor.readers.names_more import PRIME_RL_NAMES

EPISODE_DETECTORS = ("malformed_tool_calls", "tool_failures", "episode_limits", "env_token_share")
EXAMPLES = {
    "parse_failure": ['assistant: <tool_call>{"name": "calc", "arguments": {"x": 1</tool_call>', "second", "third"],
    "tool_error": ["assistant: ...\n  call calc({})\ntool calc [error]: missing argument 'x'"],
    "tool_timeout": ["tool search [timeout]: no reply in 5 s"],
    "turn_limit": ["(ended by turn_limit after 8 turns)"],
    "context_limit": ["(ended by context_limit after 5 turns)"],
}


def healthy(**changes: float) -> dict[str, float]:
    """One step of a working multi-turn run: 16 episodes, 2.5 turns each, calls that parse and work."""
    row = {
        mn.REWARD_MEAN: 0.5,
        mn.EPISODE_N: 16,
        mn.EPISODE_TURNS_MEAN: 2.5,
        mn.EPISODE_TOOL_CALLS_MEAN: 1.5,
        mn.EPISODE_CALL_FRAC: 0.9,
        mn.EPISODE_CALL_ATTEMPTS: 25,
        mn.EPISODE_PARSE_FAIL_RATE: 0.04,
        mn.EPISODE_TOOL_CALLS: 24,
        mn.EPISODE_TOOL_ERROR_RATE: 0.05,
        mn.EPISODE_TOOL_TIMEOUT_RATE: 0.0,
        mn.EPISODE_TURN_LIMIT_FRAC: 0.06,
        mn.EPISODE_CONTEXT_LIMIT_FRAC: 0.0,
        mn.EPISODE_LENGTH_LIMIT_FRAC: 0.06,
        mn.EPISODE_POLICY_TOKENS_MEAN: 300.0,
        mn.EPISODE_ENV_TOKENS_MEAN: 400.0,
        mn.EPISODE_ENV_TOKEN_FRAC: 0.57,
    }
    return {**row, **changes}


def replay(rows: list[dict[str, Any]], context: dict[str, Any] | None = None, names=EPISODE_DETECTORS) -> Monitor:
    mon = Monitor(context, factories={n: DETECTORS[n] for n in names})
    for step, row in enumerate(rows, 1):
        mon.observe(step, row)
    return mon


def only_alert(mon: Monitor, detector: str):
    alerts = [a for a in mon.alerts if a.detector == detector]
    assert len(alerts) == 1, [(a.detector, a.step) for a in mon.alerts]
    return alerts[0]


# ------------------------------------------------------------------------------------------------ each detector


def test_malformed_tool_calls_fire_with_the_format_fix_and_sample_episodes() -> None:
    rows = [healthy()] * 5 + [healthy(**{mn.EPISODE_PARSE_FAIL_RATE: 0.35})] * 6
    mon = replay(rows, {"temperature": 1.0, "episode_examples": EXAMPLES})
    a = only_alert(mon, "malformed_tool_calls")
    # the 5-step mean passes 0.2 at step 8: (2 x 0.04 + 3 x 0.35) / 5 = 0.226; onset is the window's first step
    assert (a.step, a.fired_at, a.severity, a.mode) == (4, 8, "warning", "malformed tool calls")
    assert a.evidence["parse_fail_rate"] == 0.226 and a.evidence["parse_fail_rate_now"] == 0.35
    assert a.evidence["call_attempts_per_step"] == 25.0
    assert a.evidence["sample_episodes"] == EXAMPLES["parse_failure"][:2]  # at most 2 of the 3
    assert "agent.tool_format" in a.fix and "rollout.temperature (now 1.0)" in a.fix and "demonstrations" in a.fix
    # a run already sampling cold is not told to lower the temperature
    cold = only_alert(replay(rows, {"temperature": 0.3}), "malformed_tool_calls")
    assert "temperature" not in cold.fix and "sample_episodes" not in cold.evidence


def test_malformed_tool_calls_escalate_to_critical_and_respect_the_attempt_floor() -> None:
    mon = replay([healthy(**{mn.EPISODE_PARSE_FAIL_RATE: 0.8})] * 6)
    assert only_alert(mon, "malformed_tool_calls").severity == "critical"
    # every try failing, but only 3 tries per step: below the floor of 4, nothing to judge
    few = [healthy(**{mn.EPISODE_PARSE_FAIL_RATE: 1.0, mn.EPISODE_CALL_ATTEMPTS: 3})] * 20
    assert replay(few).alerts == []


def test_malformed_tool_calls_clear_once_the_failing_calls_stop() -> None:
    bad = healthy(**{mn.EPISODE_PARSE_FAIL_RATE: 0.9})
    stopped = healthy(**{mn.EPISODE_CALL_ATTEMPTS: 0, mn.EPISODE_PARSE_FAIL_RATE: 0.0})
    mon = replay([bad] * 6 + [stopped] * 3, names=("malformed_tool_calls",))
    (det,) = mon.detectors
    assert det.active  # a few steps without tries do not clear it...
    mon.observe(20, stopped)
    assert not det.active and det.alert is not None and det.alert.cleared_at == 20  # ...a window without any does


def test_tool_errors_fire_with_the_tool_fix_and_their_samples() -> None:
    rows = [healthy(**{mn.EPISODE_TOOL_ERROR_RATE: 0.4})] * 5
    a = only_alert(replay(rows, {"episode_examples": EXAMPLES, "tool_timeout_s": 5}), "tool_failures")
    assert (a.fired_at, a.severity, a.mode) == (5, "warning", "failing tool calls")
    assert a.evidence["tool_error_rate"] == 0.4 and a.evidence["tool_calls_per_step"] == 24.0
    assert a.evidence["sample_episodes"] == EXAMPLES["tool_error"]
    assert "docstring" in a.fix and "validate arguments" in a.fix and "tool_timeout_s" not in a.fix
    assert a.actions == []


def test_tool_timeouts_name_agent_tool_timeout_s_and_double_it() -> None:
    rows = [healthy(**{mn.EPISODE_TOOL_TIMEOUT_RATE: 0.3})] * 5
    a = only_alert(replay(rows, {"episode_examples": EXAMPLES, "tool_timeout_s": 5}), "tool_failures")
    assert "30% timed out" in a.message and a.evidence["tool_timeout_rate"] == 0.3
    assert "raise agent.tool_timeout_s (now 5)" in a.fix and a.actions == ["agent.tool_timeout_s*=2"]
    assert a.evidence["sample_episodes"] == EXAMPLES["tool_timeout"]
    # both at once: critical, both fixes, samples of both kinds
    both = [healthy(**{mn.EPISODE_TOOL_ERROR_RATE: 0.5, mn.EPISODE_TOOL_TIMEOUT_RATE: 0.3})] * 5
    b = only_alert(replay(both, {"episode_examples": EXAMPLES}), "tool_failures")
    assert b.severity == "critical" and "docstring" in b.fix and "agent.tool_timeout_s" in b.fix
    assert b.evidence["sample_episodes"] == EXAMPLES["tool_error"] + EXAMPLES["tool_timeout"]
    assert b.actions == []  # the timeout is not known: no multiplier to apply


def test_tool_failures_need_enough_calls() -> None:
    few = [healthy(**{mn.EPISODE_TOOL_ERROR_RATE: 1.0, mn.EPISODE_TOOL_CALLS: 2})] * 20
    assert replay(few).alerts == []
    # a log with only the per-episode mean (TRL): the floor is on the mean
    trl_like = {mn.EPISODE_TOOL_CALLS_MEAN: 0.2, mn.EPISODE_TOOL_ERROR_RATE: 1.0}
    assert replay([trl_like] * 20).alerts == []
    a = only_alert(replay([{**trl_like, mn.EPISODE_TOOL_CALLS_MEAN: 1.0}] * 5), "tool_failures")
    assert a.evidence["tool_calls_per_episode"] == 1.0 and a.severity == "critical"


def test_episodes_cut_by_limits_name_the_limit_that_cuts() -> None:
    rows = [healthy(**{mn.EPISODE_TURN_LIMIT_FRAC: 0.3, mn.EPISODE_CONTEXT_LIMIT_FRAC: 0.15})] * 5
    ctx = {"episode_examples": EXAMPLES, "max_turns": 8, "max_episode_tokens": 4096}
    a = only_alert(replay(rows, ctx), "episode_limits")
    assert (a.fired_at, a.severity, a.mode) == (5, "warning", "episodes cut by limits")
    assert a.evidence["cut_frac"] == 0.51 and a.evidence["turn_limit_frac"] == 0.3
    assert a.evidence["sample_episodes"] == EXAMPLES["turn_limit"] + EXAMPLES["context_limit"]
    # the largest limit first, each with its setting now, then the reward for finishing
    assert a.fix.index("raise agent.max_turns (now 8)") < a.fix.index("raise agent.max_episode_tokens (now 4096)")
    assert "rollout.max_new_tokens" in a.fix and "algo.truncated_reward" in a.fix
    already = only_alert(replay(rows, {**ctx, "truncated_reward": -1.0}), "episode_limits")
    assert "truncated_reward" not in already.fix
    # max_episode_tokens 0 is the model's whole context: nothing to raise, spend less of it
    whole = only_alert(replay(rows, {**ctx, "max_episode_tokens": 0}), "episode_limits")
    assert "raise agent.max_episode_tokens" not in whole.fix and "fill the model's whole context" in whole.fix
    severe = [healthy(**{mn.EPISODE_TURN_LIMIT_FRAC: 0.8})] * 5
    assert only_alert(replay(severe), "episode_limits").severity == "critical"


def test_episode_limits_skip_steps_with_too_few_episodes() -> None:
    rows = [healthy(**{mn.EPISODE_N: 4, mn.EPISODE_TURN_LIMIT_FRAC: 1.0})] * 20
    assert replay(rows).alerts == []


def test_env_token_share_is_information_then_a_warning_when_the_context_cuts() -> None:
    rows = [healthy(**{mn.EPISODE_ENV_TOKEN_FRAC: 0.9, mn.EPISODE_ENV_TOKENS_MEAN: 3000})] * 5
    a = only_alert(replay(rows, {"tool_result_max_chars": 8000}), "env_token_share")
    assert (a.fired_at, a.severity, a.mode) == (5, "info", "context spent on tool output")
    assert a.evidence["env_token_frac"] == 0.9 and a.evidence["env_tokens_mean_now"] == 3000.0
    assert "agent.tool_result_max_chars (now 8000)" in a.fix and "agent.max_turns" in a.fix
    crowded = [{**r, mn.EPISODE_CONTEXT_LIMIT_FRAC: 0.2} for r in rows]
    w = only_alert(replay(crowded, {"episode_examples": EXAMPLES}), "env_token_share")
    assert w.severity == "warning" and w.evidence["sample_episodes"] == EXAMPLES["context_limit"]
    # 90% of a few tokens is not a context spent on tools
    small = [healthy(**{mn.EPISODE_ENV_TOKEN_FRAC: 0.9, mn.EPISODE_ENV_TOKENS_MEAN: 40})] * 20
    assert replay(small, names=("env_token_share",)).alerts == []


# ------------------------------------------------------------------------------------- quiet where they should be


def test_a_healthy_multi_turn_run_raises_nothing() -> None:
    mon = replay([healthy()] * 60, {"episode_examples": EXAMPLES, "tool_timeout_s": 5, "max_turns": 8})
    assert mon.alerts == [] and mon.not_measurable(set(healthy())) == {}


def test_single_turn_series_never_fire_and_the_detectors_do_not_apply() -> None:
    """A log without any episode/* signal is single-turn: the multi-turn detectors are not gaps in it (a healthy
    single-turn run has every detector measurable); a multi-turn log lacking one of their signals lists it."""
    rows = [{mn.REWARD_MEAN: 0.1 * (i % 3), mn.LENGTH_MEAN: 200.0, mn.LENGTH_TRUNCATION_RATE: 0.9} for i in range(80)]
    mon = replay(rows, {"episode_examples": EXAMPLES})
    assert mon.alerts == []
    assert not set(mon.not_measurable({k for r in rows for k in r})) & set(EPISODE_DETECTORS)
    partial = mon.not_measurable({*rows[0], mn.EPISODE_TURNS_MEAN})
    assert set(partial) == set(EPISODE_DETECTORS)
    assert partial["malformed_tool_calls"] == [mn.EPISODE_PARSE_FAIL_RATE, mn.EPISODE_CALL_ATTEMPTS]


def test_thresholds_are_configurable() -> None:
    rows = [healthy(**{mn.EPISODE_PARSE_FAIL_RATE: 0.1})] * 5
    assert replay(rows).alerts == []
    strict = {"malformed_tool_calls": {"max_rate": 0.05}}
    mon = Monitor({}, strict, factories={"malformed_tool_calls": MalformedToolCalls})
    assert [a for s, r in enumerate(rows, 1) for a in mon.observe(s, r)][0].evidence["parse_fail_rate"] == 0.1
    with pytest.raises(ValueError, match="no threshold"):
        ToolFailures(None, max_rate=0.1)
    assert (EpisodeLimits().min_steps, EnvTokenShare(window=3).min_steps) == (5, 3)


# ------------------------------------------------------------------------------------------- episode excerpts


EPISODE_TOOL_ERROR = {
    "ended_by": "turn_limit",
    "policy_tokens": 120,
    "env_tokens": 40,
    "turns": [
        {"role": "assistant", "content": "Let me compute.", "calls": [{"name": "calc", "arguments": {"expr": "2+"}}]},
        {"role": "tool", "name": "calc", "content": "SyntaxError: unexpected EOF", "status": "error"},
        {"role": "assistant", "content": "<tool_call>{oops", "calls": [], "parse_error": "invalid JSON"},
    ],
}
EPISODE_ANSWERED = {
    "ended_by": "answer",
    "turns": [
        {"role": "assistant", "content": "x", "calls": [{"name": "calc", "arguments": {"expr": "1+1"}}]},
        {"role": "tool", "name": "calc", "content": "2", "status": "ok"},
        {"role": "assistant", "content": "The answer is 2.", "calls": []},
    ],
}


def test_failure_kinds_and_excerpts_of_an_episode() -> None:
    assert failure_kinds(EPISODE_TOOL_ERROR) == ["parse_failure", "tool_error", "turn_limit"]
    assert failure_kinds(EPISODE_ANSWERED) == []
    assert excerpt(EPISODE_TOOL_ERROR, "tool_error") == (
        'assistant: Let me compute.\n  call calc({"expr":"2+"})\n'
        "tool calc [error]: SyntaxError: unexpected EOF\n(ended by turn_limit after 3 turns)"
    )
    assert excerpt(EPISODE_TOOL_ERROR, "parse_failure") == (
        "assistant: <tool_call>{oops\n  parse error: invalid JSON\n(ended by turn_limit after 3 turns)"
    )
    rows = [{"step": 1, "text": "plain"}, {"step": 2, "episode": EPISODE_ANSWERED}, {"step": 3, "episode": "junk"}]
    assert episode_examples(rows) == {}
    many = [{"step": s, "episode": EPISODE_TOOL_ERROR} for s in range(5)]
    ex = episode_examples(many)
    assert set(ex) == {"parse_failure", "tool_error", "turn_limit"} and all(len(v) == 3 for v in ex.values())


# ----------------------------------------------------------------------------------------------------- doctor


def agent_run(d: Path, rows: list[dict[str, Any]], episodes: list[dict[str, Any]]) -> Path:
    """A grpokit agent-mode run directory: config.yaml with an agent section, metrics.jsonl, completions.jsonl."""
    import yaml

    d.mkdir(parents=True)
    (d / ".grpokit-run").write_text("")
    cfg = {
        "recipe": "grpo",
        "algo": {"eps_low": 0.2, "eps_high": 0.2},
        "train": {"ppo_epochs": 1, "mini_batches": 1},
        "rollout": {"temperature": 1.0, "max_new_tokens": 512},
        "agent": {"max_turns": 3, "tool_timeout_s": 10.0},
    }
    (d / "config.yaml").write_text(yaml.safe_dump(cfg))
    (d / "metrics.jsonl").write_text("".join(json.dumps({"step": i + 1, **r}) + "\n" for i, r in enumerate(rows)))
    completions = [
        {"step": s, "prompt": "What is 2+2?", "answer": "4", "text": "t", "reward": 0.0, "accuracy": 0.0, "episode": e}
        for s in (1, len(rows))
        for e in episodes
    ]
    (d / "completions.jsonl").write_text("".join(json.dumps(c) + "\n" for c in completions))
    return d


def test_doctor_on_a_grpokit_agent_run_shows_the_modes_with_sample_episodes(tmp_path: Path) -> None:
    rows = [healthy(**{mn.EPISODE_TOOL_ERROR_RATE: 0.5, mn.EPISODE_TURN_LIMIT_FRAC: 0.5})] * 12
    d = agent_run(tmp_path / "run", rows, [EPISODE_TOOL_ERROR, EPISODE_ANSWERED])
    diag = diagnose(d)
    by = {a["detector"]: a for a in diag["alerts"]}
    assert {"tool_failures", "episode_limits"} <= set(by)
    tool = by["tool_failures"]
    assert tool["evidence"]["sample_episodes"][0].startswith('assistant: Let me compute.\n  call calc({"expr":"2+"})')
    assert "raise agent.max_turns (now 3)" in by["episode_limits"]["fix"]  # the context comes from config.yaml
    assert "(ended by turn_limit after 3 turns)" in by["episode_limits"]["evidence"]["sample_episodes"][0]
    assert "episode_examples" not in diag["context"] and diag["context"]["tool_timeout_s"] == 10.0
    assert not set(EPISODE_DETECTORS) & set(diag["not_measurable"])
    text = render(diag)
    assert "   sample episode 1:\n     | assistant: Let me compute." in text
    assert "     | tool calc [error]: SyntaxError: unexpected EOF" in text


def test_doctor_on_a_single_turn_grpokit_run_does_not_list_the_multi_turn_detectors(tmp_path: Path) -> None:
    rows = [{mn.REWARD_MEAN: 0.5, mn.LENGTH_MEAN: 100.0, mn.ACTOR_PG_LOSS: 0.01}] * 10
    d = agent_run(tmp_path / "run", rows, [])
    diag = diagnose(d)
    assert not {a["detector"] for a in diag["alerts"]} & set(EPISODE_DETECTORS)
    assert not set(diag["not_measurable"]) & set(EPISODE_DETECTORS)


# --------------------------------------------------------------------------------------------- foreign names


@pytest.mark.parametrize(
    ("name", "canonical"),
    [
        ("tools/call_frequency", mn.EPISODE_TOOL_CALLS_MEAN),
        ("tools/failure_frequency", mn.EPISODE_TOOL_ERROR_RATE),
    ],
)
def test_trl_tool_names_map_onto_the_episode_signals(name: str, canonical: str) -> None:
    assert TRL_NAMES[name] == (canonical,)


def test_a_trl_tool_run_with_failing_tools_is_diagnosed(tmp_path: Path) -> None:
    history = [
        {
            "step": s,
            "reward": 0.2,
            "loss": 0.01,
            "grad_norm": 0.5,
            "tools/call_frequency": 1.5,
            "tools/failure_frequency": 0.6,
        }
        for s in range(1, 13)
    ]
    (tmp_path / "trainer_state.json").write_text(json.dumps({"log_history": history, "global_step": 12}))
    log = read_run(tmp_path)
    assert log.source == "trl"
    assert log.rows[-1][mn.EPISODE_TOOL_CALLS_MEAN] == 1.5 and log.rows[-1][mn.EPISODE_TOOL_ERROR_RATE] == 0.6
    diag = diagnose(tmp_path)
    tool = next(a for a in diag["alerts"] if a["detector"] == "tool_failures")
    assert tool["evidence"]["tool_error_rate"] == 0.6 and tool["evidence"]["tool_calls_per_episode"] == 1.5
    assert "malformed_tool_calls" in diag["not_measurable"]  # TRL logs no parse failures


def test_prime_rl_turns_map_onto_policy_turns_per_episode(tmp_path: Path) -> None:
    assert PRIME_RL_NAMES["Turns"] == (mn.EPISODE_TURNS_MEAN,)
    logs = tmp_path / "logs"
    logs.mkdir()
    lines = [
        f"10:0{s}:00 SUCCESS Step {s} |     37s | Reward 0.2 | Trainable 64/64 (100.0%) | Turns 3.5 | Branches 1.0 | "
        "Max Off-Policy 1 | Error 0.0% | Cancelled 0.0% | Truncation 3.1%"
        for s in range(1, 4)
    ]
    (logs / "orchestrator.log").write_text("\n".join(lines) + "\n")
    log = read_run(tmp_path)
    assert log.source == "prime-rl" and [r[mn.EPISODE_TURNS_MEAN] for r in log.rows] == [3.5, 3.5, 3.5]
