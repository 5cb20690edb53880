"""The `--on-critical` command of `grpokit watch`: run once, never blocking the watch, with a bound.

The command starts in its own session (its own process group) and the watch goes on reading rows while it runs.
Each poll looks at it: when it ends, one line gives its exit status and time; past `timeout_s` (`HOOK_TIMEOUT_S`,
120 s) its whole group gets SIGTERM, then SIGKILL 5 s later, and one line says so. When the watch ends it waits for
a running command for what is left of its bound, then stops it the same way: no process is left behind. `outcome`
records how it went ("not run", "running", "exit 0", "exit 3", "stopped after 120 s").
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from typing import TextIO

from ..common.safe_text import safe_text

HOOK_TIMEOUT_S = 120.0
_GRACE_S = 5.0


class Hook:
    def __init__(self, command: str, out: TextIO, timeout_s: float = HOOK_TIMEOUT_S) -> None:
        self.command, self.out, self.timeout_s = command, out, timeout_s
        self.proc: subprocess.Popen | None = None
        self.started = 0.0
        self.outcome = "not run"

    def run(self, why: str) -> None:
        """Start the command (once: later calls do nothing)."""
        if self.proc is not None:
            return
        self._say(f"[grpokit] {why}: running --on-critical: {self.command}")
        self.started = time.monotonic()
        self.proc = subprocess.Popen(  # noqa: S602 (the user's own command)
            self.command, shell=True, stdin=subprocess.DEVNULL, start_new_session=True
        )
        self.outcome = "running"

    def check(self) -> None:
        """Say once that the command ended, or stop it past its bound."""
        if self.proc is None or self.outcome != "running":
            return
        rc = self.proc.poll()
        took = time.monotonic() - self.started
        if rc is not None:
            self.outcome = f"exit {rc}"
            self._say(f"[grpokit] --on-critical ended with status {rc} after {took:.1f} s")
        elif took > self.timeout_s:
            self._stop(took)

    def close(self) -> None:
        """At the watch's end: wait what is left of the bound, then stop the command."""
        while self.outcome == "running" and self.proc is not None and self.proc.poll() is None:
            if time.monotonic() - self.started > self.timeout_s:
                break
            time.sleep(0.05)
        self.check()
        if self.outcome == "running":
            self._stop(time.monotonic() - self.started)

    def _stop(self, took: float) -> None:
        assert self.proc is not None
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                self.proc.wait(_GRACE_S)
                break
            except subprocess.TimeoutExpired:
                continue
        self.outcome = f"stopped after {took:.0f} s"
        self._say(
            f"[grpokit] --on-critical did not end within {self.timeout_s:g} s: stopped it (SIGTERM, then SIGKILL)"
        )

    def _say(self, text: str) -> None:
        print(safe_text(text, limit=None), file=self.out, flush=True)
