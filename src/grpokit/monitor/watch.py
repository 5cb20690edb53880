"""`grpokit watch PATH`: follow a training log while it is written and raise grpokit's alerts as the rows arrive.

Any log `grpokit doctor` reads works, because a poll re-reads it with the doctor's readers: verl's console output
or its JSONL file logger, TRL's `trainer_state.json` as checkpoints rewrite it, TensorBoard event files, OpenRLHF
logs, grpokit run directories. Each poll feeds the rows of steps not seen yet to the detectors (in training steps,
with the run's configuration where the log carries it). The newest row is held back while the file is still
changing (a console line may be half written) and fed once a later step appears or the file stops changing.

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
from .notify import Notifier, message_of
from .readers import read_run

EXIT_OK, EXIT_CRITICAL, EXIT_BAD_INPUT = 0, 1, 2


def _signature(path: Path) -> tuple[int, float]:
    """(total size, newest mtime) of a file, or of every file under a directory: changes when the log grows."""
    files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
    stats = [p.stat() for p in files]
    return sum(s.st_size for s in stats), max((s.st_mtime for s in stats), default=0.0)


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
        self.monitor: Monitor | None = None
        self.flavor: str | None = None
        self.context: dict[str, Any] = {}
        self.last_step = 0
        self.critical_seen = False
        self.command_ran = False
        self._state: dict[int, tuple[str, int | None]] = {}
        self._signature: tuple[int, float] | None = None
        self._held = False  # the newest row was held back at the last read

    def poll(self, final: bool = False) -> int:
        """Read the log once; feed the rows not seen yet (the newest too when `final` or the log stopped changing);
        returns how many rows were fed."""
        if not self.path.exists():
            return 0
        sig = _signature(self.path)
        settled = final or sig == self._signature
        self._signature = sig
        if settled and not self._held and not final:
            return 0  # nothing new since the last read: a large log is not re-read every poll
        log = read_run(self.path, self.run)
        if self.monitor is None:
            self.flavor, self.context = log.flavor, dict(log.context)
            self.monitor = Monitor(self.context)
        rows = [r for r in log.rows if int(r["step"]) > self.last_step]
        self._held = bool(rows) and not settled
        if self._held:
            rows = rows[:-1]  # the newest row may still be being written: wait for a later step or quiet
        for r in rows:
            self.last_step = int(r["step"])
            self.monitor.observe(self.last_step, r)
            self._report(self.last_step)
        return len(rows)

    def _report(self, step: int) -> None:
        assert self.monitor is not None
        for alert in self.monitor.alerts:
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
            self.notifier.update(self.monitor.alerts)

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
    last_new = time.monotonic()
    try:
        while True:
            if watcher.poll():
                last_new = time.monotonic()
            if idle_exit is not None and time.monotonic() - last_new > idle_exit:
                watcher.poll(final=True)  # the writer has gone quiet: the held-back row is complete
                break
            time.sleep(interval)
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


def register_cli(sub: Any) -> None:
    w = sub.add_parser(
        "watch",
        help="follow a training log while it is written (verl, TRL, TensorBoard, OpenRLHF, grpokit) and raise alerts",
    )
    w.add_argument("path", help="the log file or run directory being written (it may not exist yet)")
    w.add_argument("--interval", type=float, default=2.0, help="seconds between reads (default 2)")
    w.add_argument("--idle-exit", type=float, default=None, metavar="S", help="stop after S seconds with no new row")
    w.add_argument("--on-critical", default=None, metavar="CMD", help="shell command run once on the first critical")
    w.add_argument("--notify", default=None, metavar="URL", help="Slack/Discord incoming webhook for each alert event")
    w.add_argument("--run", default=None, metavar="NAME", help="the run to follow when PATH holds several")
    w.set_defaults(fn=cmd_watch)
