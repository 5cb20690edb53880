"""`RewardManager`: weighted sum of several rewards, with every reward call isolated.

Isolation: the built-ins that cannot hang (`exact_numeric`, `format`, `countdown`: regex and `ast`, bounded
cost) are called in-process; `math_verify` (sympy can hang), `code_exec` and every user reward
(`module:function` or a function) run in one long-lived, sandboxed worker process per manager (no network,
memory/CPU/process/open-file limits, writes only in a private directory: `sandbox.py`), a fresh interpreter
started with the manager, replaced when a call passes `timeout_s` or breaks a limit (`isolation.py`).
`isolation="process"` sends every reward function to the worker, `"inline"` none (no timeout then).
A reward model (a spec that is a local sequence-classification model directory, `reward_model.py`) is trusted
weights read with safetensors only and is always scored in this process, on `model_device`, in any isolation mode.
A spec that runs in the worker (`module:function`, `file.py:function`, `math_verify`, `code_exec`) is imported
and inspected there only, after the sandbox is in place: a reward module's top-level code never runs in the
trainer. Its errors (no such module or function, a signature that fits no convention, an import that raises)
still surface when the manager is built, reported by the worker. Only `isolation="inline"` imports it here.

Conventions: each function is called as its trainer calls it, by what it declares or `convention` names (the table
in `conventions.py`); `score(..., prompts=, completion_ids=, trainer_state=, prompt_texts=, episodes=)` passes
what they may ask for. None means "not
applicable": left out of the sample's weighted sum; a sample no reward applies to is no failure: it gets what
`not_applicable` says (0, as TRL does, or NaN; `applicability.py`), counted in `reward/na_frac` and warned about
once. A reward constant over a batch of different completions is warned about once and counted (`constant.py`).

Failures: a reward that raises, times out, or returns the wrong number of values for the batch is retried
sample by sample (each call again bounded by `timeout_s`) so the good samples still get scored; NaN/inf,
values beyond +-`max_abs_value` or non-numbers for single samples are failures of those samples. A failed
sample gets reward NaN (the advantage code leaves NaN rewards out), is reported in `RewardResult.failures`
and counted in the metrics. When more than `max_fail_frac` of the batch fails, `RewardFailureError` is
raised instead. Not thread-safe: call `score` from one thread.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .. import metric_names as mn
from ..data.example import Example
from .applicability import NotApplicableCount
from .callers import SOLUTION_STR
from .constant import ConstantCount, constant_value, prompt_hint
from .constant import metric as constant_metric
from .conventions import AUTO, check_convention
from .entry import CALL_FAILURES, RewardEntry, failure_kind, failure_reason
from .isolation import LOAD_TIMEOUT_S, InlineRunner, ProcessRunner, RewardCallError, SandboxBroken, SandboxRefusedError
from .registry import REWARDS, RewardFn, check_spec, is_isolated, load_reward
from .result import (
    COMPLETION_CHARS,
    RewardFailure,
    RewardResult,
    failure_error,
)
from .reward_model import CONVENTION as REWARD_MODEL
from .reward_model import RewardModel, check_model_device, is_reward_model_spec
from .sandbox import SandboxLimits
from .signature import CallContext, adapt
from .spec_names import display_name, spec_text
from .values import MAX_ABS_VALUE, batch_metrics, check_value, shape_message

log = logging.getLogger(__name__)
ISOLATION_MODES = ("auto", "process", "inline")


class RewardManager:
    """Scores completions with a weighted sum of rewards given as `[(spec, weight), ...]`.

    A spec is a built-in name, a `module:function` string, or a function (run in the worker, like user specs).

    `correctness` names the reward whose value is the accuracy (default: the first); names are the built-in
    name or, for `module:function`, the function name (the full spec when two would clash). `sandbox` sets the
    worker's limits (`SandboxLimits()`: no network, 4 GiB, `timeout_s` CPU seconds per call, writes only in a
    private directory; `None` runs the worker unconfined). A value beyond +-`max_abs_value` is a failure.
    `not_applicable` ("zero" or "exclude", `applicability.NOT_APPLICABLE`) is the reward of a sample every reward
    returned None for. A spec that is a local sequence-classification model directory is a reward model
    (`reward_model.py`), loaded in this process on `model_device`.
    """

    def __init__(
        self,
        specs: list[tuple[str | RewardFn, float]],
        timeout_s: float = 10.0,
        max_fail_frac: float = 0.5,
        correctness: str | None = None,
        *,
        isolation: str = "auto",
        sandbox: SandboxLimits | None = SandboxLimits(),  # noqa: B008 (frozen, immutable)
        max_abs_value: float = MAX_ABS_VALUE,
        not_applicable: str = "zero",
        model_device: str = "auto",
        verl_solution_str: str = "response",
        decode: Callable[[list[int]], str] | None = None,
        convention: str = "auto",
    ) -> None:
        if not specs:
            raise ValueError("RewardManager needs at least one (reward, weight) pair, e.g. [('exact_numeric', 1.0)]")
        if isolation not in ISOLATION_MODES:
            raise ValueError(f"isolation={isolation!r} is not one of {ISOLATION_MODES}")
        if not timeout_s > 0:
            raise ValueError(f"reward.timeout_s must be > 0, got {timeout_s}")
        if not 0.0 <= max_fail_frac <= 1.0:
            raise ValueError(f"reward.max_fail_frac must be in [0, 1], got {max_fail_frac}")
        if not max_abs_value > 0:
            raise ValueError(f"max_abs_value must be > 0, got {max_abs_value}")
        if verl_solution_str not in SOLUTION_STR:
            raise ValueError(f"reward.verl_solution_str={verl_solution_str!r} is invalid: use one of {SOLUTION_STR}")
        self.verl_solution_str, self.convention = verl_solution_str, check_convention(convention)  # reward.convention
        self.decode = decode  # prompt token ids -> the text the model saw, for rewards given the prompt (callers.py)
        self.constant = ConstantCount()  # rewards constant over a batch of different completions
        self._probed: set[str] = set()  # verl rewards already tried with the prompt + response
        self.timeout_s = float(timeout_s)
        self.max_fail_frac = float(max_fail_frac)
        self.max_abs_value = float(max_abs_value)
        self.not_applicable = NotApplicableCount(not_applicable)  # its policy, and the samples counted so far
        self.model_device = check_model_device(model_device)
        self.rewards: list[RewardEntry] = []
        for entry, weight in specs:
            self.rewards.append(self._reward(entry, weight, isolation))
        names = {r.name: r.name for r in self.rewards} | {r.spec: r.name for r in self.rewards}
        if correctness is not None and correctness not in names:
            raise ValueError(f"correctness={correctness!r} is not one of the rewards {sorted(names)}")
        self.correctness = names[correctness] if correctness is not None else self.rewards[0].name
        self._inline = InlineRunner()
        table = {r.name: r.in_worker or r.fn for r in self.rewards if r.isolated}
        load_timeout = max(LOAD_TIMEOUT_S, self.timeout_s)
        self._process = ProcessRunner(table, sandbox=sandbox, cpu_s=self.timeout_s, load_timeout_s=load_timeout)
        if any(r.isolated for r in self.rewards):
            self._process.start()  # started early: its interpreter boots while the trainer loads the rest
            self._check_sandbox(load_timeout)
        if any(r.in_worker for r in self.rewards):
            self._take_load_report(load_timeout)
        for r in self.rewards:
            log.info("reward %s", r.describe("sandboxed worker" if sandbox is not None else "worker"))

    def _reward(self, entry: str | RewardFn, weight: float, isolation: str) -> RewardEntry:
        """One (reward, weight) pair checked. A spec that runs in the worker is only checked by its text here:
        the worker imports it (`ProcessRunner`), so a reward module's code never runs in the trainer."""
        spec = spec_text(entry)
        if any(r.spec == spec for r in self.rewards):
            raise ValueError(f"reward {spec!r} is listed twice; give it once with the summed weight")
        if not math.isfinite(float(weight)):
            raise ValueError(f"reward {spec!r}: weight must be a finite number, got {weight!r}")
        taken = {r.name for r in self.rewards}
        if isinstance(entry, str) and entry not in REWARDS and is_reward_model_spec(spec):
            # trusted local weights, read with safetensors only: scored in this process (reward_model.py)
            model = RewardModel(spec, device=self.model_device)
            name = Path(spec).expanduser().resolve().name
            return RewardEntry(name if name not in taken else spec, spec, float(weight), model, False, REWARD_MODEL)
        isolated = isolation == "process" or (isolation == "auto" and (callable(entry) or is_isolated(spec)))
        name, declared = display_name(spec, taken), AUTO if spec in REWARDS else self.convention  # not the built-ins
        if callable(entry) or not isolated:  # a function given, or a spec run in-process (built-ins, "inline")
            fn = adapt(entry if callable(entry) else load_reward(spec), declared)
            return RewardEntry(name, spec, float(weight), fn, isolated, fn.convention, declared)
        check_spec(spec)
        return RewardEntry(name, spec, float(weight), None, isolated, declared=declared)

    def _check_sandbox(self, timeout: float) -> None:
        """ValueError (the worker's one line) where its sandbox refuses user code (`SandboxLimits.python_only`);
        a sandbox that cannot be set up fails each call instead, naming the reason."""
        try:
            self._process.enforced(timeout)
        except SandboxRefusedError as e:
            self.close()
            raise ValueError(str(e)) from None
        except RewardCallError:
            pass

    def _take_load_report(self, timeout: float) -> None:
        """Wait for the worker to import the specs it resolves; record their conventions, or close the worker and
        raise ValueError naming what failed. A sandbox that cannot be set up is left to fail each call instead."""
        specs = [r.spec for r in self.rewards if r.in_worker]
        try:
            report = self._process.loaded(timeout)
        except SandboxBroken:
            return
        except RewardCallError as e:
            self.close()
            raise ValueError(f"reward {', '.join(map(repr, specs))}: the reward worker failed to load it: {e}") from e
        for r in self.rewards:
            outcome = report.get(r.name, {}) if r.in_worker else {}
            if "error" in outcome:
                self.close()
                raise ValueError(outcome["error"])
            r.convention = outcome.get("convention", r.convention)

    @property
    def sandbox(self) -> dict[str, str]:
        """Which mechanism enforces each sandbox limit in the worker (empty without a sandbox or worker)."""
        if not any(r.isolated for r in self.rewards):
            return {}
        return self._process.enforced()

    @property
    def isolated(self) -> bool:
        """Whether any reward runs in the worker (user code, or a built-in that can hang)."""
        return any(r.isolated for r in self.rewards)

    @property
    def worker(self) -> ProcessRunner:
        """The worker process runner (for its `pid` and `started` count)."""
        return self._process

    @property
    def reward_models(self) -> list[str]:
        """The names of the rewards that are reward models (`reward_model.py`), in order."""
        return [r.name for r in self.rewards if isinstance(r.fn, RewardModel)]

    def close(self) -> None:
        """Stop the worker process and free the reward models; log how many samples no reward applied to, if any."""
        for r in self.rewards:
            if isinstance(r.fn, RewardModel):
                r.fn.close()
        self.not_applicable.close()
        self.constant.close()
        self._process.close()

    def __enter__(self) -> RewardManager:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, r: RewardEntry, completions: list[str], examples: list[Example], ctx: CallContext) -> Any:
        runner = self._process if r.isolated else self._inline
        return runner.call(r.name, r.fn, completions, examples, self.timeout_s, ctx)

    def _fail(self, r: RewardEntry, i: int, text: str, kind: str, message: str) -> RewardFailure:
        return RewardFailure(r.name, i, text[:COMPLETION_CHARS], kind, message)

    def _values(
        self, r: RewardEntry, out: list[Any], completions: list[str], offset: int = 0
    ) -> tuple[list[float], list[RewardFailure]]:
        """NaN-for-None float values and the failures of one call's (right-length) output."""
        values, failures = [], []
        for i, v in enumerate(out):
            f, kind, msg = check_value(v, self.max_abs_value)
            values.append(math.nan if f is None else f)
            if kind:
                failures.append(self._fail(r, offset + i, completions[i], kind, msg))
        return values, failures

    def _score_batch(
        self, r: RewardEntry, completions: list[str], examples: list[Example], ctx: CallContext
    ) -> tuple[list[float], list[RewardFailure], bool]:
        """Values (NaN where failed or not applicable), failures, and whether the batch was retried per sample."""
        n = len(completions)
        try:
            out = self._call(r, completions, examples, ctx)
            if isinstance(out, list) and len(out) == n:
                values, failures = self._values(r, out, completions)
                return values, failures, False
            kind, msg = "wrong_count", shape_message(out, n)
        except CALL_FAILURES as e:
            kind, msg = failure_kind(e), str(e)
        if n == 1:  # the batch is the sample: no need to call it again
            return [math.nan], [self._fail(r, 0, completions[0], kind, msg)], False
        reason = failure_reason(kind, msg)
        log.debug("reward %s failed on the whole batch (%s); retrying sample by sample", r.name, reason)
        values, failures = self._score_each(r, completions, examples, ctx)
        if not failures:
            log.warning("reward %s failed on the batch (%s) but on no single sample", r.name, reason)
        return values, failures, True

    def _score_each(
        self, r: RewardEntry, completions: list[str], examples: list[Example], ctx: CallContext
    ) -> tuple[list[float], list[RewardFailure]]:
        n = len(completions)
        values, failures = [math.nan] * n, []
        for i in range(n):
            kind, msg = None, ""
            try:
                out = self._call(r, [completions[i]], [examples[i]], ctx.slice(i))
                if isinstance(out, list) and len(out) == 1:
                    [values[i]], fails = self._values(r, out, [completions[i]], offset=i)
                    failures.extend(fails)
                else:
                    kind, msg = "wrong_count", shape_message(out, 1)
            except CALL_FAILURES as e:
                kind, msg = failure_kind(e), str(e)
            if kind:
                failures.append(self._fail(r, i, completions[i], kind, msg))
            if len(failures) > self.max_fail_frac * n:  # the batch is lost anyway: stop waiting on it
                raise failure_error([r.name], failures, n, self.max_fail_frac, complete=i == n - 1)
        return values, failures

    def _score_all(
        self, completions: list[str], examples: list[Example], ctx: CallContext
    ) -> tuple[dict[str, list[float]], list[RewardFailure], dict[str, float]]:
        """Each reward over the batch: its values, failures, seconds and batch retries. Raises as soon as one
        reward fails on more than `max_fail_frac` of the samples."""
        n = len(completions)
        per_reward: dict[str, list[float]] = {}
        failures: list[RewardFailure] = []
        metrics: dict[str, float] = {mn.REWARD_BATCH_RETRIES: 0.0}
        for r in self.rewards:
            t = time.perf_counter()
            values, fails, retried = self._score_batch(r, completions, examples, ctx) if n else ([], [], False)
            metrics[f"{mn.REWARD_PREFIX}{r.name}_seconds"] = time.perf_counter() - t
            metrics[mn.REWARD_BATCH_RETRIES] += retried
            per_reward[r.name] = values
            failures.extend(fails)
            if len({f.index for f in fails}) > self.max_fail_frac * n:
                raise failure_error([r.name], fails, n, self.max_fail_frac)
        return per_reward, failures, metrics

    def _combine(
        self, completions: list[str], per_reward: dict[str, list[float]], failures: list[RewardFailure]
    ) -> tuple[list[float], set[int], list[int]]:
        """The weighted sum of the applicable rewards per sample (NaN where one failed; the `not_applicable` policy's
        value where none applies), the failed samples and the not-applicable ones. Raises when more than
        `max_fail_frac` failed (not-applicable samples are not failures)."""
        n = len(completions)
        failed = {f.index for f in failures}
        rewards, na = [], []
        for i in range(n):
            applicable = [r for r in self.rewards if not math.isnan(per_reward[r.name][i])]
            if i in failed:
                rewards.append(math.nan)
            elif not applicable:
                na.append(i)
                rewards.append(self.not_applicable.policy.value)
            else:
                rewards.append(sum(r.weight * per_reward[r.name][i] for r in applicable))
        if len(failed) > self.max_fail_frac * n:
            names = list(dict.fromkeys(f.reward for f in failures))
            raise failure_error(names, failures, n, self.max_fail_frac)
        return rewards, failed, na

    def _constant(
        self, per_reward: dict[str, list[float]], completions: list[str], examples: list[Example], ctx: CallContext
    ) -> dict[str, float]:
        """Count (and warn once about) each reward constant over this batch's different completions; a verl reward
        given the response alone is then tried once with the prompt + response, and the warning says if it differs."""
        out, n = {}, len(completions)
        for r in self.rewards:
            value = constant_value(per_reward[r.name], completions)
            out[constant_metric(r.name)] = float(value is not None)
            self.constant.seen(r.name, per_reward[r.name])
            if value is None:
                continue
            hint = ""  # a verl scorer that finds the answer only after the prompt's "Assistant:" (TinyZero)
            if r.convention == "verl" and ctx.solution_str == "response" and r.name not in self._probed:
                self._probed.add(r.name)
                with_prompt = dataclasses.replace(ctx, solution_str="prompt+response")
                try:
                    got = self._call(r, completions, examples, with_prompt)
                    other = self._values(r, got, completions)[0] if isinstance(got, list) and len(got) == n else []
                except CALL_FAILURES:
                    other = []
                changed = sum(not (math.isnan(a) or a == value) for a in other)
                hint = prompt_hint(changed)
            self.constant.record(r.name, value, len(completions), hint)
        return out

    def score(
        self,
        completions: list[str],
        examples: list[Example],
        *,
        prompts: list[Any] | None = None,
        completion_ids: list[list[int]] | None = None,
        trainer_state: Any = None,
        prompt_texts: list[str] | None = None,
        episodes: list[dict[str, Any]] | None = None,
        prompt_ids: list[list[int]] | None = None,
    ) -> RewardResult:
        """Score a batch: `rewards[i]` is the weighted sum over the rewards that apply to sample i (not None),
        NaN where any reward failed on it or none applies.

        `prompts` (raw prompts, strings or message lists), `completion_ids` (token ids per completion),
        `trainer_state`, `prompt_texts` (each prompt decoded as the model saw it; else `prompt_ids` decoded with
        `decode`) and `episodes` (a multi-turn run's episode records) go to the rewards that read them (`callers.py`).
        """
        n = len(completions)
        given = {"examples": examples, "prompts": prompts, "completion_ids": completion_ids}
        for name, values in (given | {"prompt_texts": prompt_texts, "episodes": episodes}).items():
            if values is not None and len(values) != n:
                raise ValueError(f"{n} completions but {len(values)} {name}")
        t0 = time.perf_counter()
        if prompt_texts is None and prompt_ids is not None and self.decode is not None:
            prompt_texts = [self.decode(ids) for ids in prompt_ids]
        ctx = CallContext(prompts, completion_ids, trainer_state, prompt_texts, episodes, self.verl_solution_str)
        per_reward, failures, metrics = self._score_all(completions, examples, ctx)
        metrics |= self._constant(per_reward, completions, examples, ctx)
        rewards, failed, na = self._combine(completions, per_reward, failures)
        if na:
            self.not_applicable.record(na, n, completions)
        accuracy = per_reward[self.correctness]
        metrics |= batch_metrics(rewards, accuracy, per_reward, failures, len(failed), len(na))
        metrics[mn.REWARD_SECONDS] = time.perf_counter() - t0
        if failures:
            f = failures[0]
            log.warning(
                "%d reward failure(s) on %d of %d samples (excluded); first: %s on sample %d (%s)",
                *(len(failures), len(failed), n, f.reward, f.index, failure_reason(f.kind, f.message)),
            )
        return RewardResult(rewards, accuracy, per_reward, failures, metrics, na)
