"""`grpokit watch PATH`: follow a training log while it is written and raise grpokit's alerts as the rows arrive.

Any log `grpokit doctor` reads works, recognised by the doctor's readers: verl's console output or its JSONL file
logger, TRL's console output or its `trainer_state.json` as checkpoints rewrite it, TensorBoard event files, OpenRLHF
logs, grpokit run directories. A log written line by line (verl's and TRL's consoles, verl's JSONL, a grpokit run's
`metrics.jsonl`) is read from where the last poll stopped: only the appended bytes are read and parsed, and the
detectors keep their own bounded state, so a run of 10^6 logged steps is followed in the memory of a short one
(`follow.py`, `tail.py`); any other log is read again whole when it changes. Each poll feeds the rows of steps not
seen yet to the detectors (in training steps, with the run's configuration where the log carries it). The newest
row is held back while the file is still changing (a console line may be half written) and fed once a later step
appears or the file stops changing.

    grpokit watch run.jsonl --on-critical 'pkill -f verl.trainer.main_ppo' --notify https://hooks.slack.com/...

Exit status: 0 when no critical alert was seen, 1 when one was (as `grpokit doctor`), 2 for bad input; the watch
ends on Ctrl-C, or after `--idle-exit` seconds without a new row. Every line it prints passes through
`common.safe_text`: the log's metric and alert names and its path are text grpokit did not write.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, TextIO

from ..common.safe_text import safe_text
from .detectors import Alert, Monitor
from .doctor.knobs import equivalents
from .follow import Log, open_log
from .notify import Notifier, message_of

EXIT_OK, EXIT_CRITICAL, EXIT_BAD_INPUT = 0, 1, 2


class Watcher:
    """Feeds new rows of a growing log to a `Monitor`; reports alert events and runs `on_critical` once."""

    def __init__(
        self,
        path: Path,
        *,
        on_critical: str | None = None,
        notify: str | None = None,
        run: str | None = None,
        out: TextIO = sys.stdout,
    ) -> None:
        self.path, self.run, self.out = path, run, out
        self.on_critical = on_critical
        self.notifier = Notifier(notify, run=str(path)) if notify else None
        self.log: Log | None = None
        self.monitor: Monitor | None = None
        self.flavor: str | None = None
        self.context: dict[str, Any] = {}
        self.last_step = 0
        self.critical_seen = False
        self.command_ran = False
        self._state: dict[int, tuple[str, int | None]] = {}

    def poll(self, final: bool = False) -> int:
        """Read what the log gained; feed the rows of new steps (the newest too when `final` or the log stopped
        changing); returns how many rows were fed."""
        if not self.path.exists():
            return 0
        if self.log is None:
            self.log = open_log(self.path, self.run)
            self.flavor, self.context = self.log.flavor, dict(self.log.context)
            self.monitor = Monitor(self.context)
        assert self.monitor is not None
        fed = 0
        for r in self.log.rows(final):
            self.last_step = int(r["step"])
            self._report(self.monitor.observe(self.last_step, r))
            fed += 1
        return fed

    def _report(self, new: list[Alert]) -> None:
        """Print the alert events of the row just observed (`new`: the alerts it raised)."""
        assert self.monitor is not None
        # besides the new ones, only a detector's current alert can change (an episode that ended is never touched
        # again): a row costs the same however many alerts a long run has raised
        fresh = {id(a) for a in new}
        current = [d.alert for d in self.monitor.detectors if d.alert is not None and id(d.alert) not in fresh] + new
        for alert in current:
            state = (alert.severity, alert.cleared_at)
            before = self._state.get(id(alert))
            if before == state:
                continue
            self._state[id(alert)] = state
            event = "onset" if before is None else ("cleared" if alert.cleared_at is not None else "escalated")
            self._print(event, alert)
            if event != "cleared" and alert.severity == "critical":
                self._critical(alert)
        if self.notifier is not None:
            self.notifier.update(current)

    def _print(self, event: str, alert: Alert) -> None:
        a = alert.to_dict()
        text = message_of(event, a, "")
        eq = equivalents(a, self.flavor, self.context)
        if eq and event != "cleared":
            text += f"\nin {self.flavor}: " + "; ".join(f"{k} -> {v}" for k, v in eq.items())
        stamp = time.strftime("%H:%M:%S")
        text = safe_text(text, limit=None, multiline=True)
        print(f"[{stamp}] " + text.replace("\n", "\n    "), file=self.out, flush=True)

    def _critical(self, alert: Alert) -> None:
        self.critical_seen = True
        if self.on_critical and not self.command_ran:
            self.command_ran = True
            say = f"[grpokit] critical {alert.mode}: running --on-critical: {self.on_critical}"
            print(safe_text(say, limit=None), file=self.out, flush=True)
            subprocess.run(self.on_critical, shell=True, check=False)  # noqa: S602 (the user's own command)

    def close(self) -> None:
        if self.notifier is not None:
            self.notifier.close()


def watch(
    path: str | Path,
    *,
    interval: float = 2.0,
    idle_exit: float | None = None,
    on_critical: str | None = None,
    notify: str | None = None,
    run: str | None = None,
    out: TextIO = sys.stdout,
) -> int:
    """Follow `path` until Ctrl-C or `idle_exit` seconds without a new row; the exit status (module docstring)."""
    p = Path(path).expanduser()
    watcher = Watcher(p, on_critical=on_critical, notify=notify, run=run, out=out)
    print(
        f"grpokit watch: following {safe_text(p, limit=None)} (every {interval:g} s; Ctrl-C to stop)",
        file=out,
        flush=True,
    )
    caught_up = False
    last_new = started = time.monotonic()
    try:
        while True:
            if watcher.poll():
                last_new = time.monotonic()
            if watcher.log is not None and not caught_up:
                # the log as it was when the watch began has been read: what comes now is new
                caught_up = True
                print(
                    f"grpokit watch: read up to step {watcher.last_step} in {time.monotonic() - started:.1f} s; "
                    "following new rows",
                    file=out,
                    flush=True,
                )
            if idle_exit is not None and time.monotonic() - last_new > idle_exit:
                watcher.poll(final=True)  # the writer has gone quiet: the held-back row is complete
                break
            time.sleep(watcher.log.next_read(interval) if watcher.log is not None else interval)
    except KeyboardInterrupt:
        pass
    finally:
        watcher.close()
    seen = f"up to step {watcher.last_step}" if watcher.last_step else "no training step"
    print(f"grpokit watch: {seen}; {len(watcher.monitor.alerts) if watcher.monitor else 0} alert(s)", file=out)
    return EXIT_CRITICAL if watcher.critical_seen else EXIT_OK


def cmd_watch(args: argparse.Namespace) -> int:
    try:
        return watch(
            args.path,
            interval=args.interval,
            idle_exit=args.idle_exit,
            on_critical=args.on_critical,
            notify=args.notify,
            run=args.run,
        )
    except (ValueError, OSError) as e:
        print(safe_text(f"error: {e}"), file=sys.stderr)
        return EXIT_BAD_INPUT
