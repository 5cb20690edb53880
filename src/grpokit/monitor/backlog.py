"""The rows a log already holds when `grpokit watch` starts on it, read without delaying the first alert.

A watch started on a long log (10^6 rows) must alert on a row appended now within seconds, and still give the
detectors' verdicts on the rows written before. Running every detector on every old row first took 161 s on a 10^6-row
verl JSONL log (about 140 us a row), so a log written line by line is split at the byte offset `end` where the watch
began (the last line end):

- **live**: the watch's own `Monitor` is seeded with at most `HEAD_ROWS` rows from the log's start (the baselines a
  detector takes from a run's beginning) and `TAIL_ROWS` rows just before `end` (its recent windows), then follows
  the rows appended past `end`. Reading the seed is bounded in rows and bytes (`tail.tail_text`, `tail.head_text`),
  whatever the log's length. The seed's alerts are not printed: the old verdicts come from the backlog pass.
- **backlog**: a child process (`python -m grpokit.monitor.backlog`, so it holds no lock of the watch and takes no
  time of its loop) runs every detector on every row in `[0, end)`, as `grpokit doctor` would, and writes the
  alerts it raised as JSON. The watch prints them when they come ("before the watch began: ...") and counts their
  criticals in its exit status and `--on-critical`.

A log short enough that the seed is all of it (at most `TAIL_ROWS` lines) is fed whole to the live monitor, as before.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import weakref
from pathlib import Path
from typing import Any

from .detectors import Monitor
from .follow import open_log

HEAD_ROWS = 200  # rows from the log's start the live detectors see (their baselines)
TAIL_ROWS = 2000  # lines before the watch's start the live detectors see (their windows are at most 50 rows)


class Backlog:
    """The detectors' verdicts on the first `end` bytes of the log at `shown`, worked out in a child process.

    `result()` is None while it runs, then the alerts (dicts, as `Alert.to_dict`) or raises ValueError with the
    child's one-line reason. `stop()` ends the child (the watch was interrupted)."""

    def __init__(self, shown: Path, end: int) -> None:
        self.end = end
        self._dir = tempfile.TemporaryDirectory(prefix="grpokit_watch_")
        self.out = Path(self._dir.name) / "alerts.json"
        self.started = time.monotonic()
        cmd = [sys.executable, "-m", "grpokit.monitor.backlog", str(shown), str(end), str(self.out)]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        with (Path(self._dir.name) / "stderr").open("wb") as err:  # the child's own, never the user's terminal
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err, env=env)
        weakref.finalize(self, _end, self.proc)  # a watcher dropped without `close()` leaves no child behind

    def result(self, wait: bool = False) -> list[dict[str, Any]] | None:
        rc = self.proc.wait() if wait else self.proc.poll()
        if rc is None:
            return None
        err = Path(self._dir.name) / "stderr"
        try:
            got = json.loads(self.out.read_text(encoding="utf-8")) if self.out.is_file() else None
            last = (err.read_text(errors="replace").strip().splitlines() or [""])[-1][-300:]
        finally:
            self._dir.cleanup()
        if not isinstance(got, dict) or rc != 0:
            raise ValueError(f"the read of the rows before the watch began ended with status {rc}: {last}")
        if "error" in got:
            raise ValueError(str(got["error"]))
        return list(got["alerts"])

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._dir.cleanup()


def _end(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def verdicts(shown: Path, end: int) -> list[dict[str, Any]]:
    """Every detector on the rows in the first `end` bytes of the log at `shown`: the alerts they raised."""
    log = open_log(shown)
    tail = getattr(log, "tail", None)
    if tail is None:
        raise ValueError(f"{shown}: not a log written line by line")
    tail.limit = end
    monitor = Monitor(log.context)
    for r in log.rows(final=True):
        monitor.observe(int(r["step"]), r)
    return [a.to_dict() for a in monitor.alerts]


def main(argv: list[str]) -> int:
    shown, end, out = Path(argv[0]), int(argv[1]), Path(argv[2])
    try:
        got: dict[str, Any] = {"alerts": verdicts(shown, end)}
    except (ValueError, OSError) as e:
        got = {"error": str(e).splitlines()[0] if str(e) else type(e).__name__}
    tmp = out.with_suffix(".tmp")
    try:
        tmp.write_text(json.dumps(got, default=str), encoding="utf-8")
        tmp.replace(out)
    except OSError:  # the watch has ended and removed its folder: nobody waits for these verdicts
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
