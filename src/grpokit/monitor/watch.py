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

Started on a long log, the watch alerts on an appended row within seconds: a log written line by line is followed
from its end, its live detectors seeded with a bounded head and tail of the rows already there, and their verdicts
on every old row come from a background pass (`backlog.py`), printed "before the watch began: ..." when ready. A
path that is not a training log yet (an empty file, a console with only the trainer's start-up lines) is waited
for, said once. A log rotated, truncated or replaced (by another file or a symlink) is read again from its start,
and a deleted one waited for, each said in one line, as `tail -F` follows a name; a path that is or becomes a FIFO
or a device is one line and exit 2. The `--on-critical` command runs without blocking the watch, bounded
(`hook.py`). No new row for k times the run's median row interval is a stall alert (`stall.py`).

Exit status: 0 when no critical alert was seen, 1 when one was (as `grpokit doctor`), 2 for bad input; the watch
ends on Ctrl-C, or after `--idle-exit` seconds without a new row. Every line it prints passes through
`common.safe_text`: the log's metric and alert names and its path are text grpokit did not write.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any, TextIO

from ..common.safe_text import safe_text
from .backlog import HEAD_ROWS, TAIL_ROWS, Backlog
from .detectors import Alert, Monitor
from .doctor.knobs import equivalents
from .follow import LineLog, Log, open_log
from .hook import HOOK_TIMEOUT_S, Hook
from .notify import Notifier, message_of
from .stall import WATCH_RULES
from .tail import NotALogFile

EXIT_OK, EXIT_CRITICAL, EXIT_BAD_INPUT = 0, 1, 2


class Watcher:
    """Feeds new rows of a growing log to a `Monitor`; reports alert events and runs `on_critical` once.

    `seed`: (head rows, tail rows) of a long line-by-line log the live detectors see at the start (`backlog.py`);
    `rules`: thresholds of the `WATCH_RULES` by name (`{"stall": {"k": 5}}`); `hook_timeout_s`: the bound of the
    `--on-critical` command."""

    def __init__(
        self,
        path: Path,
        *,
        on_critical: str | None = None,
        notify: str | None = None,
        run: str | None = None,
        out: TextIO = sys.stdout,
        seed: tuple[int, int] = (HEAD_ROWS, TAIL_ROWS),
        rules: dict[str, dict[str, Any]] | None = None,
        hook_timeout_s: float = HOOK_TIMEOUT_S,
    ) -> None:
        self.path, self.run, self.out, self.seed = path, run, out, seed
        self.hook = Hook(on_critical, out, hook_timeout_s) if on_critical else None
        self.notifier = Notifier(notify, run=str(path)) if notify else None
        self.rules = [cls(**(rules or {}).get(name, {})) for name, cls in WATCH_RULES.items()]
        self.log: Log | None = None
        self.monitor: Monitor | None = None
        self.flavor: str | None = None
        self.context: dict[str, Any] = {}
        self.last_step = 0
        self.fed = 0  # rows fed to the detectors (the seed's too)
        self.critical_seen = False
        self.not_yet: str | None = None  # why the path is not a training log yet (waited for)
        self.backlog: Backlog | None = None
        self.seeded = 0  # rows of the log as it was that the live detectors saw, when a backlog has the rest
        self.old_alerts: list[dict[str, Any]] = []  # the backlog's verdicts on the rows before the watch began
        self.rule_alerts: list[Alert] = []
        self._quiet = 0  # alerts the seed raised (not printed: the backlog reports them)
        self._state: dict[int, tuple[str, int | None]] = {}
        self._restarts, self._missing = 0, False

    @property
    def command_ran(self) -> bool:
        return self.hook is not None and self.hook.proc is not None

    def poll(self, final: bool = False) -> int:
        """Read what the log gained; feed the rows of new steps (the newest too when `final` or the log stopped
        changing); check the stall rule, the hook and the backlog; returns how many rows were fed."""
        before, step, started = self.fed, self.last_step, self.log is None
        if self.log is None and not self._start():
            return 0
        assert self.log is not None
        self._feed(list(self.log.rows(final)), arrived=not started)  # the first read's rows are the log as it was
        self._file_events(step)
        self._tick()
        return self.fed - before

    def _start(self) -> bool:
        """Open the log once it is one; False (said once) while it is not there or not a training log yet."""
        if not os.path.lexists(self.path):
            return False
        try:
            self.log = open_log(self.path, self.run)
        except FileNotFoundError:  # a dangling link, or gone since
            return False
        except NotALogFile:
            raise
        except ValueError as e:
            if "--run" in str(e):  # several runs: waiting cannot help
                raise
            if self.not_yet is None:
                why = str(e).split(". ")[0]
                self._say(f"grpokit watch: waiting for training metrics in {why} yet")
            self.not_yet = str(e)
            return False
        self.flavor, self.context = self.log.flavor, dict(self.log.context)
        self.monitor = Monitor(self.context)
        if isinstance(self.log, LineLog) and self.log.seekable:
            self._seed(self.log)
        return True

    def _seed(self, log: LineLog) -> None:
        rows, end = log.seed(*self.seed)
        if end is None:  # the seed is the whole log: fed as any rows are
            self._feed(rows, arrived=False)
            return
        self._feed(rows, arrived=False, quiet=True)
        assert self.monitor is not None
        self.seeded, self._quiet = len(rows), len(self.monitor.alerts)
        self.backlog = Backlog(self.path, end)
        self._say(
            f"grpokit watch: following from the log's end (step {self.last_step}); the live detectors saw "
            f"{len(rows)} of its rows, every detector reads the {end / 1e6:.0f} MB before in the background"
        )

    def _feed(self, rows: list[dict[str, float]], *, arrived: bool, quiet: bool = False) -> None:
        assert self.monitor is not None
        self.fed += len(rows)
        for r in rows:
            self.last_step = int(r["step"])
            self._report(self.monitor.observe(self.last_step, r), quiet)
        if rows:
            at = time.monotonic()
            if not arrived:  # the rows as the log held them: written at its last change
                try:
                    at -= max(0.0, time.time() - os.stat(self.path).st_mtime)
                except OSError:
                    pass
            last = getattr(self.log, "last_values", None) or rows[-1]
            for rule in self.rules:
                rule.seen([(int(r["step"]), r) for r in rows], at, arrived=arrived, last=last)

    def _report(self, new: list[Alert], quiet: bool = False) -> None:
        """Print the alert events of the row just observed (`new`: the alerts it raised); `quiet` records them
        only (rows the backlog reports on)."""
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
            if not quiet:
                self._event(
                    "onset" if before is None else ("cleared" if alert.cleared_at is not None else "escalated"), alert
                )
        if self.notifier is not None and not quiet:
            self.notifier.update(current)

    def _event(self, event: str, alert: Alert) -> None:
        self._print(event, alert.to_dict())
        if event != "cleared" and alert.severity == "critical":
            self._critical(alert.mode)

    def _tick(self) -> None:
        """What changes with time, not rows: the stall rule, the hook, the backlog."""
        now = time.monotonic()
        for rule in self.rules:
            got = rule.check(now)
            if got is not None:
                event, alert = got
                if event == "onset":
                    self.rule_alerts.append(alert)
                self._event(event, alert)
                if self.notifier is not None:
                    self.notifier.update([alert])
        if self.hook is not None:
            self.hook.check()
        if self.backlog is not None:
            self._backlog_done(wait=False)

    def _backlog_done(self, wait: bool) -> None:
        """Print the backlog's verdicts once they are in (`wait`: wait for them)."""
        assert self.backlog is not None
        try:
            got = self.backlog.result(wait=wait)
        except ValueError as e:
            self.backlog = None
            self._say(f"grpokit watch: no verdicts on the rows before the watch began: {e}")
            return
        if got is None:
            return
        took, self.backlog = time.monotonic() - self.backlog.started, None
        self.old_alerts = got
        self._say(
            f"grpokit watch: every detector read the rows before the watch began ({took:.0f} s): {len(got)} alert(s)"
        )
        for a in got:
            cleared = f" (cleared at step {a['cleared_at']})" if a.get("cleared_at") is not None else ""
            self._print("onset", a, prefix="before the watch began: ", suffix=cleared)
            if a.get("severity") == "critical":
                self._critical(str(a.get("mode")))
        if self.notifier is not None:
            self.notifier.update(got)

    def _file_events(self, step: int) -> None:
        """One line when the followed file was deleted, or truncated or replaced (then read from its start; `step`:
        the newest step fed before)."""
        tail = getattr(self.log, "tail", None)
        missing = tail.missing if tail is not None else not self.path.exists()
        if missing and not self._missing:
            self._say(f"grpokit watch: {self.path} is gone (deleted or moved away); waiting for a file of that name")
        self._missing = missing
        if tail is not None and tail.restarts != self._restarts:
            self._restarts = tail.restarts
            self._say(
                f"grpokit watch: {self.path} was truncated or replaced (rotated, rewritten, or a link put in its "
                f"place); reading the new file from its start (steps up to {step} are not fed again)"
            )

    def _print(self, event: str, a: dict[str, Any], prefix: str = "", suffix: str = "") -> None:
        text = prefix + message_of(event, a, "")
        if suffix:
            text = text.replace("\n", suffix + "\n", 1) if "\n" in text else text + suffix
        eq = equivalents(a, self.flavor, self.context)
        if eq and event != "cleared":
            text += f"\nin {self.flavor}: " + "; ".join(f"{k} -> {v}" for k, v in eq.items())
        stamp = time.strftime("%H:%M:%S")
        text = safe_text(text, limit=None, multiline=True)
        print(f"[{stamp}] " + text.replace("\n", "\n    "), file=self.out, flush=True)

    def _critical(self, mode: str) -> None:
        self.critical_seen = True
        if self.hook is not None:
            self.hook.run(f"critical {mode}")

    def _say(self, text: str) -> None:
        print(safe_text(text, limit=None), file=self.out, flush=True)

    def alert_count(self) -> int:
        live = len(self.monitor.alerts) - self._quiet if self.monitor else 0
        return live + len(self.old_alerts) + len(self.rule_alerts)

    def close(self, interrupted: bool = False) -> None:
        """End the watch: the backlog's verdicts waited for (or stopped when interrupted), the hook bounded, the
        notifications flushed."""
        if self.backlog is not None:
            if interrupted:
                self.backlog.stop()
                self.backlog = None
                self._say("grpokit watch: interrupted before every detector read the rows before the watch began")
            else:
                self._say("grpokit watch: waiting for the verdicts on the rows before the watch began")
                self._backlog_done(wait=True)
        if self.hook is not None:
            self.hook.close()
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
    **options: Any,
) -> int:
    """Follow `path` until Ctrl-C or `idle_exit` seconds without a new row; the exit status (module docstring).
    `options` go to `Watcher` (`seed`, `rules`, `hook_timeout_s`)."""
    p = Path(path).expanduser()
    watcher = Watcher(p, on_critical=on_critical, notify=notify, run=run, out=out, **options)
    print(
        f"grpokit watch: following {safe_text(p, limit=None)} (every {interval:g} s; Ctrl-C to stop)",
        file=out,
        flush=True,
    )
    caught_up, interrupted = False, True  # until the loop ends as it should: an error stops the backlog too
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
                if watcher.log is not None:
                    watcher.poll(final=True)  # the writer has gone quiet: the held-back row is complete
                interrupted = False
                break
            time.sleep(watcher.log.next_read(interval) if watcher.log is not None else interval)
    except KeyboardInterrupt:
        pass
    finally:
        watcher.close(interrupted)
    if watcher.log is None and watcher.not_yet is not None:
        waited = f"{time.monotonic() - started:.1f}" if idle_exit is None else f"{idle_exit:g}"
        print(safe_text(f"error: still no training metrics after {waited} s: {watcher.not_yet}"), file=sys.stderr)
        return EXIT_BAD_INPUT
    seen = f"up to step {watcher.last_step}" if watcher.last_step else "no training step"
    print(f"grpokit watch: {seen}; {watcher.alert_count()} alert(s)", file=out)
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
