"""`grpokit eval` says what it is doing while it works (issue 39: it printed nothing until it ended).

One line on stderr when the model is ready, when sampling starts (prompts x samples, temperature, token limit),
every `every` seconds while a phase is still running (the held-out prompts are sampled in one batch, so elapsed
time is the progress there is to show), and when each phase ends. stdout keeps only the result, so `--json` stays
machine-readable."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TextIO

HEARTBEAT_S = 15.0


class EvalProgress:
    """Progress lines of one evaluation, each `eval: ...` on `out` (stderr by default)."""

    def __init__(self, out: TextIO | None = None, every: float = HEARTBEAT_S) -> None:
        self.out = out if out is not None else sys.stderr
        self.every = every
        self.t0 = time.perf_counter()

    def say(self, message: str) -> None:
        print(f"eval: {message}", file=self.out, flush=True)

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """`name`: one line at the start, `name: Ns so far` every `every` seconds while it runs, one at the end."""
        start = time.perf_counter()
        done = threading.Event()

        def beat() -> None:
            while not done.wait(self.every):
                self.say(f"{name}: {time.perf_counter() - start:.0f}s so far")

        self.say(f"{name} ...")
        ticker = threading.Thread(target=beat, name="eval-progress", daemon=True)
        ticker.start()
        try:
            yield
        finally:
            done.set()
            ticker.join()
        self.say(f"{name}: done in {time.perf_counter() - start:.1f}s")

    def wrap(self, fn: Callable[..., Any], name: Callable[..., str]) -> Callable[..., Any]:
        """`fn` run inside a phase whose name `name(*args)` gives from the call's arguments."""

        def phased(*args: Any, **kwargs: Any) -> Any:
            with self.phase(name(*args)):
                return fn(*args, **kwargs)

        return phased

    def watch(self, session: Any) -> None:
        """Announce the evaluation, then report the session's sampling and scoring as phases (the session's engine
        and rewards are wrapped in place; nothing else changes)."""
        prompts = len(session.data.held_out_tokens)
        params = session.sampling_params(n=1, temperature=session.cfg.rollout.eval_temperature)
        self.say(
            f"model ready in {time.perf_counter() - self.t0:.0f}s; {prompts} held-out prompts, temperature "
            f"{params.temperature}, at most {params.max_new_tokens} new tokens"
        )
        session.engine = _Phased(session.engine, "generate", self.wrap(session.engine.generate, _sampling))
        session.rewards = _Phased(session.rewards, "score", self.wrap(session.rewards.score, _scoring))


def _sampling(prompts: list[list[int]], params: Any, *_: Any) -> str:
    return f"sampling {len(prompts)} prompts x {params.n} sample{'s' if params.n != 1 else ''}"


def _scoring(texts: list[str], *_: Any) -> str:
    return f"scoring {len(texts)} completions"


class _Phased:
    """`target` with its method `method` replaced by `fn`; every other attribute is the target's."""

    def __init__(self, target: Any, method: str, fn: Callable[..., Any]) -> None:
        self._target, self._method, self._fn = target, method, fn

    def __getattr__(self, name: str) -> Any:
        return self._fn if name == self._method else getattr(self._target, name)
