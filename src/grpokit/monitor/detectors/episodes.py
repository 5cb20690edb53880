"""Multi-turn / tool-use episodes (`agent.*`, the `episode/*` signals): malformed tool calls, failing tools, episodes
cut by a limit, and a context spent on tool output.

Every detector here reads `episode/*` signals. A log with none (a single-turn run) is not a multi-turn log: these
detectors do not apply to it, so they are not listed as not measurable there and never fire; a multi-turn log that
lacks some of them lists those. Each puts up to `SAMPLE_EPISODES` excerpts of failing episodes in its evidence
(`sample_episodes`) when the context carries them: `context["episode_examples"]` maps a failure kind
(`parse_failure`, `tool_error`, `tool_timeout`, `turn_limit`, `context_limit`, `length_limit`) to a list of short
rendered excerpts (the trainer fills it live, the doctor from a grpokit run's completions.jsonl).

Context keys read (each optional; a fix naming a value says "now X" only when the context has it): `temperature`,
`tool_timeout_s`, `max_turns`, `max_episode_tokens`, `max_new_tokens`, `tool_result_max_chars`, `truncated_reward`.
"""

from __future__ import annotations

import math
from typing import Any

from ... import metric_names as mn
from .base import Alert, Windowed, register
from .context import unknown_config_note
from .rows import StepWindow, finite_at, rounded

SAMPLE_EPISODES = 2  # excerpts of failing episodes an alert's evidence holds at most
SAMPLE_CHARS = 800  # an excerpt longer than this is cut (evidence is for reading, not for storing episodes)


def sample_episodes(context: dict[str, Any], *kinds: str) -> list[str]:
    """Up to `SAMPLE_EPISODES` excerpts from `context["episode_examples"]`, taken from `kinds` in order; anything
    that is not a list of strings there is skipped."""
    examples = context.get("episode_examples") if isinstance(context, dict) else None
    if not isinstance(examples, dict):
        return []
    out: list[str] = []
    for kind in kinds:
        found = examples.get(kind)
        if not isinstance(found, (list, tuple)):
            continue
        for text in found:
            if isinstance(text, str) and text.strip() and len(out) < SAMPLE_EPISODES:
                out.append(text if len(text) <= SAMPLE_CHARS else text[: SAMPLE_CHARS - 3] + "...")
    return out


def _now(context: dict[str, Any], key: str) -> str:
    """ " (now X)" when the context knows the setting `key`, else ""."""
    value = context.get(key)
    return f" (now {value})" if isinstance(value, (int, float, str)) and not isinstance(value, bool) else ""


def _number(context: dict[str, Any], key: str) -> float:
    value = context.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return math.nan
    return float(value)


class EpisodeDetector(Windowed):
    """A multi-turn detector: measurable only on a log with `episode/*` signals (module docstring)."""

    def applies(self, available: set[str]) -> bool:
        return any(k.startswith(mn.EPISODE_PREFIX) for k in available)  # a single-turn log has no episode/* signal

    def missing(self, available: set[str]) -> list[str]:
        if not self.applies(available):
            return []  # a single-turn log: nothing of this detector applies, so nothing is missing
        return super().missing(available)


class _FlooredWindow(EpisodeDetector):
    """A windowed rate whose rows count only above an absolute floor. A row below the floor (or without the rate)
    neither counts nor clears an active mode, unless the window holds nothing from the last `window` steps: then the
    mode is over (the failing calls stopped)."""

    def stale(self, step: int) -> bool:
        return not len(self.values) or self.values.items[-1][0] <= step - self.window

    def idle(self, step: int) -> tuple[bool, None]:
        return (self.active and not self.stale(step)), None


@register
class MalformedToolCalls(_FlooredWindow):
    """Tool calls that do not parse: over the last `window` steps with at least `min_attempts` tried calls each
    (`episode/call_attempts`), the mean share of tried calls that did not parse (`episode/parse_fail_rate`) exceeds
    `max_rate`; critical from `critical_rate` (the policy then almost never gets a tool result to learn from)."""

    name, mode = "malformed_tool_calls", "malformed tool calls"
    max_rate, critical_rate, window, min_attempts = 0.2, 0.5, 5, 4
    keys = (mn.EPISODE_PARSE_FAIL_RATE,)
    requires = ((mn.EPISODE_PARSE_FAIL_RATE,), (mn.EPISODE_CALL_ATTEMPTS,))

    def __init__(self, context: dict[str, Any] | None = None, **params: Any) -> None:
        super().__init__(context, **params)
        self.attempts = StepWindow(self.window)

    def check(self, step: int, m: dict[str, Any]) -> tuple[bool, Alert | None]:
        rate, attempts = finite_at(m, mn.EPISODE_PARSE_FAIL_RATE), finite_at(m, mn.EPISODE_CALL_ATTEMPTS)
        if not (math.isfinite(rate) and math.isfinite(attempts) and attempts >= self.min_attempts):
            return self.idle(step)
        self.values.add(step, min(max(rate, 0.0), 1.0))
        self.attempts.add(step, attempts)
        if not self.full() or self.mean() <= self.max_rate:
            return False, None
        mean = self.mean()
        temp = _number(self.context, "temperature")
        fix = (
            "show the exact call format in the system prompt with one worked example of a correct call, or set "
            f"agent.tool_format{_now(self.context, 'tool_format')} to the format the model's chat template was "
            "trained on; add a few demonstrations (few-shot turns) of correct calls"
        )
        if not (math.isfinite(temp) and temp <= 0.6):
            fix += f"; lower rollout.temperature{_now(self.context, 'temperature')} (e.g. 0.6)"
        evidence = {
            "parse_fail_rate": rounded(mean, 3),
            "parse_fail_rate_now": rounded(rate, 3),
            "call_attempts_per_step": rounded(sum(self.attempts.values()) / len(self.attempts), 1),
            "steps": len(self.vals()),
        }
        if samples := sample_episodes(self.context, "parse_failure"):
            evidence["sample_episodes"] = samples
        return True, self.new_alert(
            step,
            "critical" if mean >= self.critical_rate else "warning",
            f"{mean:.0%} of the tool calls the policy tried over the last {len(self.vals())} logged steps did not "
            "parse: those turns get no tool result",
            evidence,
            fix + unknown_config_note(self.context),
            onset=self.values.first_step(),
        )


@register
class ToolFailures(_FlooredWindow):
    """Tools that fail when called: over the last `window` steps with enough calls (`episode/tool_calls` >=
    `min_calls`; a log with only the per-episode mean, like TRL's `tools/call_frequency`, needs a mean >=
    `min_calls_mean`), the mean share of executed calls that errored (`episode/tool_error_rate`: raised, named no
    tool, bad arguments) exceeds `error_max`, or that timed out (`episode/tool_timeout_rate`) exceeds `timeout_max`;
    critical when errors and timeouts together reach `critical_rate`."""

    name, mode = "tool_failures", "failing tool calls"
    error_max, timeout_max, critical_rate, window, min_calls, min_calls_mean = 0.25, 0.1, 0.75, 5, 4, 0.5
    keys = (mn.EPISODE_TOOL_ERROR_RATE,)
    requires = (
        (mn.EPISODE_TOOL_ERROR_RATE, mn.EPISODE_TOOL_TIMEOUT_RATE),
        (mn.EPISODE_TOOL_CALLS, mn.EPISODE_TOOL_CALLS_MEAN),
    )

    def __init__(self, context: dict[str, Any] | None = None, **params: Any) -> None:
        super().__init__(context, **params)
        self.timeouts = StepWindow(self.window)
        self.calls = StepWindow(self.window)

    def enough_calls(self, m: dict[str, Any]) -> tuple[bool, float, str]:
        """(the row clears the floor, its call count or mean, which of the two it is)."""
        calls = finite_at(m, mn.EPISODE_TOOL_CALLS)
        if math.isfinite(calls):
            return calls >= self.min_calls, calls, "tool_calls_per_step"
        mean = finite_at(m, mn.EPISODE_TOOL_CALLS_MEAN)
        return math.isfinite(mean) and mean >= self.min_calls_mean, mean, "tool_calls_per_episode"

    def check(self, step: int, m: dict[str, Any]) -> tuple[bool, Alert | None]:
        errors, timeouts = finite_at(m, mn.EPISODE_TOOL_ERROR_RATE), finite_at(m, mn.EPISODE_TOOL_TIMEOUT_RATE)
        enough, calls, calls_key = self.enough_calls(m)
        if not enough or not (math.isfinite(errors) or math.isfinite(timeouts)):
            return self.idle(step)
        self.values.add(step, min(max(errors, 0.0), 1.0) if math.isfinite(errors) else 0.0)
        self.timeouts.add(step, min(max(timeouts, 0.0), 1.0) if math.isfinite(timeouts) else 0.0)
        self.calls.add(step, calls)
        if not self.full():
            return False, None
        err, tout = self.mean(), sum(self.timeouts.values()) / len(self.timeouts)
        erroring, timing_out = err > self.error_max, tout > self.timeout_max
        if not (erroring or timing_out):
            return False, None
        fixes, kinds, actions = [], [], []
        if erroring:
            kinds.append("tool_error")
            fixes.append(
                "make tool errors actionable: describe every argument (type, allowed values) in each tool's "
                "docstring, validate arguments and return a one-line message saying what was wrong; a tool that "
                "raises on valid input is a bug in the tool (see sample_episodes)"
            )
        if timing_out:
            kinds.append("tool_timeout")
            fixes.append(
                f"raise agent.tool_timeout_s{_now(self.context, 'tool_timeout_s')} or make the tool cheaper (cap "
                "its work or its input size)"
            )
            if math.isfinite(_number(self.context, "tool_timeout_s")):
                actions.append("agent.tool_timeout_s*=2")
        what = " and ".join(
            p for p, on in ((f"{err:.0%} of tool calls errored", erroring), (f"{tout:.0%} timed out", timing_out)) if on
        )
        evidence: dict[str, Any] = {
            "tool_error_rate": rounded(err, 3),
            "tool_timeout_rate": rounded(tout, 3),
            calls_key: rounded(sum(self.calls.values()) / len(self.calls), 2),
            "steps": len(self.vals()),
        }
        if samples := sample_episodes(self.context, *kinds):
            evidence["sample_episodes"] = samples
        return True, self.new_alert(
            step,
            "critical" if err + tout >= self.critical_rate else "warning",
            f"{what} over the last {len(self.vals())} logged steps: the policy reads errors instead of results",
            evidence,
            "; ".join(fixes) + unknown_config_note(self.context),
            actions,
            onset=self.values.first_step(),
        )


#: limit -> (its `episode/*` fraction, the context key of its setting, the setting, what else lifts it)
LIMITS: dict[str, tuple[str, str, str, str]] = {
    "turn_limit": (mn.EPISODE_TURN_LIMIT_FRAC, "max_turns", "agent.max_turns", ""),
    "context_limit": (
        mn.EPISODE_CONTEXT_LIMIT_FRAC,
        "max_episode_tokens",
        "agent.max_episode_tokens",
        " or shorten tool results (agent.tool_result_max_chars)",
    ),
    "length_limit": (mn.EPISODE_LENGTH_LIMIT_FRAC, "max_new_tokens", "rollout.max_new_tokens", ""),
}


@register
class EpisodeLimits(EpisodeDetector):
    """Episodes cut by a limit before an answer: over the last `window` steps the mean share of episodes ended by
    agent.max_turns (`episode/turn_limit_frac`), the context limit (`episode/context_limit_frac`) or
    rollout.max_new_tokens on their last turn (`episode/length_limit_frac`), together, exceeds `max_frac`; critical
    from `critical_frac` (most episodes earn no answer reward). Steps with fewer than `min_episodes` episodes
    (`episode/n`, when logged) do not count."""

    name, mode = "episode_limits", "episodes cut by limits"
    max_frac, critical_frac, window, min_episodes = 0.3, 0.7, 5, 8
    requires = ((mn.EPISODE_TURN_LIMIT_FRAC, mn.EPISODE_CONTEXT_LIMIT_FRAC, mn.EPISODE_LENGTH_LIMIT_FRAC),)

    def lift(self, kind: str) -> str:
        """The fix for episodes cut by limit `kind`. `agent.max_episode_tokens=0` is the model's whole context: it
        cannot be raised, so the fix is to spend less of it."""
        _, ctx_key, setting, other = LIMITS[kind]
        if kind == "context_limit" and _number(self.context, ctx_key) == 0:
            return (
                "the episodes fill the model's whole context (agent.max_episode_tokens=0): shorten tool results "
                "(agent.tool_result_max_chars) or lower agent.max_turns"
            )
        return f"raise {setting}{_now(self.context, ctx_key)}{other}"

    def check(self, step: int, m: dict[str, Any]) -> tuple[bool, Alert | None]:
        fracs = {kind: finite_at(m, spec[0]) for kind, spec in LIMITS.items()}
        n = finite_at(m, mn.EPISODE_N)
        if all(math.isnan(f) for f in fracs.values()) or (math.isfinite(n) and n < self.min_episodes):
            return self.active, None
        self.values.add(step, {k: min(max(f, 0.0), 1.0) if math.isfinite(f) else 0.0 for k, f in fracs.items()})
        rows = self.vals()
        means = {k: sum(r[k] for r in rows) / len(rows) for k in LIMITS}
        cut = sum(means.values())
        if not self.full() or cut <= self.max_frac:
            return False, None
        ranked = sorted((k for k in LIMITS if means[k] > 0), key=lambda k: -means[k])
        fixes = [self.lift(k) for k in ranked]
        reward = self.context.get("truncated_reward")
        if reward is None or isinstance(reward, bool):
            fixes.append(
                "or make finishing pay: give cut episodes a reward below a wrong answer's (algo.truncated_reward)"
            )
        turns = finite_at(m, mn.EPISODE_TURNS_MEAN)
        evidence: dict[str, Any] = {
            "cut_frac": rounded(cut, 3),
            **{f"{k}_frac": rounded(means[k], 3) for k in LIMITS},
            "turns_mean_now": rounded(turns, 2),
            "steps": len(rows),
        }
        if samples := sample_episodes(self.context, *ranked):
            evidence["sample_episodes"] = samples
        named = ", ".join(f"{means[k]:.0%} by the {k.replace('_', ' ')}" for k in ranked)
        return True, self.new_alert(
            step,
            "critical" if cut >= self.critical_frac else "warning",
            f"{cut:.0%} of episodes over the last {len(rows)} logged steps ended on a limit before an answer ({named})",
            evidence,
            "; ".join(fixes) + unknown_config_note(self.context),
            onset=self.values.first_step(),
        )


@register
class EnvTokenShare(EpisodeDetector):
    """The context spent on tool output: over the last `window` steps the mean share of the tokens after the prompt
    that the environment wrote (`episode/env_token_frac`, masked from the loss) exceeds `max_frac`, in steps whose
    episodes hold at least `min_env_tokens` environment tokens on average (`episode/env_tokens_mean`, when logged).
    Information: the run works, but pays for tokens it does not train on; a warning when the context limit also
    cuts more than `context_cut_frac` of the step's episodes."""

    name, mode = "env_token_share", "context spent on tool output"
    max_frac, window, min_env_tokens, context_cut_frac = 0.8, 5, 256, 0.1
    keys = (mn.EPISODE_ENV_TOKEN_FRAC,)
    requires = ((mn.EPISODE_ENV_TOKEN_FRAC,),)

    def check(self, step: int, m: dict[str, Any]) -> tuple[bool, Alert | None]:
        frac, env = finite_at(m, mn.EPISODE_ENV_TOKEN_FRAC), finite_at(m, mn.EPISODE_ENV_TOKENS_MEAN)
        if not math.isfinite(frac) or (math.isfinite(env) and env < self.min_env_tokens):
            return self.active, None
        self.values.add(step, min(max(frac, 0.0), 1.0))
        if not self.full() or self.mean() <= self.max_frac:
            return False, None
        ctx_cut = finite_at(m, mn.EPISODE_CONTEXT_LIMIT_FRAC)
        crowded = math.isfinite(ctx_cut) and ctx_cut > self.context_cut_frac
        evidence: dict[str, Any] = {
            "env_token_frac": rounded(self.mean(), 3),
            "env_tokens_mean_now": rounded(env, 1),
            "policy_tokens_mean_now": rounded(finite_at(m, mn.EPISODE_POLICY_TOKENS_MEAN), 1),
            "context_limit_frac_now": rounded(ctx_cut, 3),
            "steps": len(self.vals()),
        }
        if samples := sample_episodes(self.context, "context_limit"):
            evidence["sample_episodes"] = samples
        return True, self.new_alert(
            step,
            "warning" if crowded else "info",
            f"{self.mean():.0%} of the tokens after the prompt are tool output (masked from the loss) over the last "
            f"{len(self.vals())} logged steps" + (": the context limit cuts episodes" if crowded else ""),
            evidence,
            f"cut tool results to what the model needs: agent.tool_result_max_chars"
            f"{_now(self.context, 'tool_result_max_chars')}, tools that return less; or fewer turns: lower "
            f"agent.max_turns{_now(self.context, 'max_turns')}" + unknown_config_note(self.context),
            onset=self.values.first_step(),
        )
