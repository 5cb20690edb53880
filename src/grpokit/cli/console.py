"""The live display of `grpokit train`: progress of the steps (with an ETA) and of the phase running now, one
health line per step, held-out evaluations, checkpoints, and alerts when they start, change and clear.

On a terminal it draws rich progress bars above which every line is printed; anywhere else (a file, a pipe, CI)
it writes the same lines as plain text, without control characters, one line per event and no progress bars.
Every line passes through `common.safe_text` on its way out: an alert message, a reward's error or a path can
carry text grpokit did not write, and no terminal sequence in it (OSC 52, a screen clear) reaches the terminal.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, Task, TextColumn, TimeElapsedColumn
from rich.text import Text

from .. import metric_names as mn
from ..common.safe_text import safe_text
from .health_line import duration, health_line
from .phase_progress import PhaseTracker

__all__ = ["Display", "health_line"]

NO_HELD_OUT = "no held-out prompts; give data.eval_data=FILE or more distinct prompts"
LINE_CHARS = 10_000  # a printed line past this keeps its head and tail
STYLES = {"critical": "bold red", "warning": "yellow", "info": "cyan", "cleared": "green"}


class EtaColumn(ProgressColumn):
    """The task's `eta` field, seconds left from the mean step time so far as the display computed it at the
    last step (`eta_at`, monotonic seconds), counted down since."""

    def render(self, task: Task) -> Text:
        eta = task.fields.get("eta")
        if eta is None:
            return Text("")
        left = max(eta - (time.monotonic() - task.fields.get("eta_at", time.monotonic())), 0.0)
        return Text(f"eta {duration(left)}", style="progress.remaining")


class CountColumn(MofNCompleteColumn):
    """`done/total`, blank for work without a count (an evaluation, a checkpoint)."""

    def render(self, task: Task) -> Text:
        return Text("") if task.total is None else super().render(task)


def disk_size(path: Path) -> int:
    """Bytes of the files under `path` (a file's own size when it is a file; 0 when it is gone)."""
    p = Path(path)
    if p.is_file():
        return p.stat().st_size
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file()) if p.is_dir() else 0


def size_text(n: int) -> str:
    """Bytes as 512 B, 3.4 MB, 1.6 GB (decimal units, as `du --si`)."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def eval_line(label: str, ev: dict[str, Any], before: float | None = None) -> str:
    """`eval step 12: held-out accuracy 99.0% (n=100)`; with `before`, the accuracy before training too."""
    if mn.EVAL_ACCURACY not in ev:
        return f"held-out accuracy {label.removeprefix('eval ')}: not measured ({NO_HELD_OUT})"
    n = ev.get(mn.EVAL_N)
    detail = [f"n={int(n)}"] if n is not None else []
    if before is not None:
        detail.append(f"{before:.1%} before training")
    return f"{label}: held-out accuracy {ev[mn.EVAL_ACCURACY]:.1%}" + (f" ({', '.join(detail)})" if detail else "")


class Display:
    """Rich progress on a terminal; plain lines otherwise (CI, logs, a `console` writing to a file).

    `console`: where to write (default: standard output); its `is_terminal` decides between the two modes.
    """

    def __init__(self, total_steps: int, enabled: bool = True, console: Console | None = None) -> None:
        self.console = console or Console()
        self.total = total_steps
        self.live = enabled and self.console.is_terminal
        self.progress: Progress | None = None
        self.phases = PhaseTracker()
        self.seconds = 0.0  # step, evaluation and checkpoint seconds of the steps done in this session
        self.steps_done = 0
        self.accuracy_before: float | None = None
        self.alerts: dict[str, Any] = {}  # detector -> its alert, while active
        if self.live:
            self.progress = Progress(
                TextColumn("[bold]{task.description:<24}"),
                BarColumn(),
                CountColumn(),
                TimeElapsedColumn(),
                EtaColumn(),
                console=self.console,
                transient=False,
            )
            self.steps_task = self.progress.add_task("train", total=total_steps, eta=None)
            self.phase_task = self.progress.add_task("starting", total=None)
            self.progress.start()

    # ---------------------------------------------------------------------------------------------- output

    def _print(self, text: str, style: str | None = None) -> None:
        text = safe_text(text, limit=LINE_CHARS, multiline=True)
        if self.progress is not None:
            self.progress.console.print(Text(text, style=style or ""), highlight=False, soft_wrap=True)
        else:
            self.console.file.write(text + "\n")
            self.console.file.flush()

    def message(self, text: str) -> None:
        """One line of text, printed as is (control characters escaped)."""
        self._print(text)

    # ---------------------------------------------------------------------------------------------- phases

    def phase(self, name: str, completed: int = 0, total: int = 1) -> None:
        """The phase running now (`generate`, `score`, `logprobs`, `update` with its optimizer steps, `eval`,
        `checkpoint`, ...): on a terminal the phase bar shows it and its own clock; plain output prints nothing."""
        shown = self.phases.enter(name, completed, total)
        if self.progress is None:
            return
        if shown.restart:  # a new task: the phase's clock starts at 0 (a finished task's clock stops for good)
            self.progress.remove_task(self.phase_task)
            self.phase_task = self.progress.add_task(shown.label, total=shown.total, completed=shown.completed)
        else:
            self.progress.update(self.phase_task, description=shown.label, completed=shown.completed)

    # ----------------------------------------------------------------------------------------------- steps

    def eta(self, step: int) -> float | None:
        """Seconds left: steps left x the mean seconds of a step so far (its evaluation and checkpoint included)."""
        if self.steps_done == 0 or step >= self.total:
            return None
        return max(self.total - step, 0) * self.seconds / self.steps_done

    def step_done(self, step: int, metrics: dict[str, Any], active: list[str] | None = None) -> None:
        """The step's health line; its held-out evaluation when it had one; alerts that cleared."""
        self.steps_done += 1
        self.seconds += sum(float(metrics.get(k) or 0.0) for k in (mn.TIME_STEP, mn.TIME_EVAL))
        self.phases.step_done()
        eta = self.eta(step)
        if self.progress is not None:
            self.progress.update(self.steps_task, completed=step, eta=eta, eta_at=time.monotonic())
        self._print(health_line(step, self.total, metrics, eta=None if self.live else eta, alerts=len(active or [])))
        if mn.EVAL_ACCURACY in metrics:
            self._print(eval_line(f"eval step {step}", metrics))
        self._cleared(step, active or [])

    def evaluated(self, step: int, ev: dict[str, Any], *, before: bool = False) -> None:
        """The held-out evaluation before training (`before`) or at the end of the run."""
        if before:
            self.accuracy_before = ev.get(mn.EVAL_ACCURACY)
            self._print(eval_line("eval before training", ev))
        else:
            self._print(eval_line(f"eval after step {step}", ev, self.accuracy_before))

    def checkpoint(self, step: int, path: Path, seconds: float | None = None, *, final: bool = False) -> None:
        """One line per save: `saved checkpoint step 12 -> runs/x/checkpoints/step_12 (1.6 GB, 3.1s)`."""
        if seconds is not None and not final:
            self.seconds += seconds
        what = "final model" if final else f"checkpoint step {step}"
        took = f", {duration(seconds)}" if seconds is not None else ""
        files = [f for f in Path(path).rglob("*") if f.is_file()] if final and Path(path).is_dir() else []
        if files and all(f.stat().st_nlink > 1 for f in files):  # run/model_dir.py: linked to the last checkpoint
            self._print(f"saved {what} -> {path} (hard links to the last checkpoint's files: no new disk{took})")
            return
        self._print(f"saved {what} -> {path} ({size_text(disk_size(path))}{took})")

    # ---------------------------------------------------------------------------------------------- alerts

    def alert(self, alert: Any) -> None:
        """An alert when its mode starts (with its evidence and fix) or when its severity or reading changes."""
        known = self.alerts.get(alert.detector)
        self.alerts[alert.detector] = alert
        again = " now" if known is alert or (known is not None and known.step == alert.step) else ""
        self._print(
            f"⚠ {alert.severity.upper()}{again} {alert.mode} (since step {alert.step}): {alert.message}",
            STYLES.get(alert.severity),
        )
        self._print(f"    fix: {alert.fix}")

    def _cleared(self, step: int, active: list[str]) -> None:
        """One line for each alert no longer active."""
        for detector, a in list(self.alerts.items()):
            if a.mode not in active or getattr(a, "cleared_at", None) is not None:
                del self.alerts[detector]
                self._print(f"✓ cleared at step {step}: {a.mode} (active since step {a.step})", STYLES["cleared"])

    def close(self) -> None:
        """Stop the progress bars (the lines printed stay)."""
        if self.progress is not None:
            self.progress.stop()
