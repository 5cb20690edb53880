"""Terminal display: progress bars per phase (generate, score, update, eval) and a compact health line."""

from __future__ import annotations

import math
import sys
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from .. import metric_names as mn


def _f(x: Any, fmt: str = ".2f") -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "–"
    return format(x, fmt)


def health_line(step: int, total: int, m: dict[str, Any]) -> str:
    """One compact line of the §17 signals that matter most."""
    parts = [
        f"step {step}/{total}",
        f"reward {_f(m.get(mn.REWARD_MEAN))}",
        f"acc {_f(m.get(mn.REWARD_ACCURACY), '.0%')}",
        f"H {_f(m.get(mn.ENTROPY_TOKEN_MEAN))}",
        f"zv {_f(m.get(mn.ZV_FRAC))} (acc ✓{_f(m.get(mn.ZV_ALL_CORRECT))} ✗{_f(m.get(mn.ZV_ALL_WRONG))})",
    ]
    if mn.KL_REF_K3 in m:
        parts.append(f"kl {_f(m.get(mn.KL_REF_K3), '.4f')}")
    parts.append(f"clip lo/hi {_f(m.get(mn.ACTOR_CLIPFRAC_LOW))}/{_f(m.get(mn.ACTOR_CLIPFRAC_HIGH))}")
    parts.append(f"len {_f(m.get(mn.LENGTH_MEAN), '.1f')}")
    if m.get(mn.SAMPLING_ROUNDS, 1) > 1:
        parts.append(f"rounds {int(m[mn.SAMPLING_ROUNDS])}")
    parts.append(f"{_f(m.get(mn.TIME_STEP), '.1f')}s")
    return " | ".join(parts)


class Display:
    """Rich progress on a terminal; plain lines otherwise (CI, logs)."""

    def __init__(self, total_steps: int, enabled: bool = True, console: Console | None = None) -> None:
        self.console = console or Console(stderr=False)
        self.total = total_steps
        self.live = enabled and sys.stdout.isatty()
        self.progress: Progress | None = None
        if self.live:
            self.progress = Progress(
                TextColumn("[bold]{task.description:<10}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=self.console,
                transient=False,
            )
            self.steps_task = self.progress.add_task("train", total=total_steps)
            self.phase_task = self.progress.add_task("generate", total=1)
            self.progress.start()

    def phase(self, name: str, completed: int = 0, total: int = 1) -> None:
        if self.progress is not None:
            self.progress.update(self.phase_task, description=name, completed=completed, total=total)

    def step_done(self, step: int, metrics: dict[str, Any], active: list[str] | None = None) -> None:
        line = health_line(step, self.total, metrics)
        if active:
            line += " | ⚠ " + ", ".join(active)
        if self.progress is not None:
            self.progress.update(self.steps_task, completed=step)
            self.progress.console.print(line, highlight=False)
        else:
            print(line, flush=True)

    def alert(self, alert: Any) -> None:
        """Print a detector's alert as it fires."""
        colour = {"critical": "bold red", "warning": "yellow"}.get(alert.severity, "cyan")
        text = (
            f"[{colour}]⚠ {alert.severity.upper()} {alert.mode}[/] (since step {alert.step}): {alert.message}"
            f"\n    fix: {alert.fix}"
        )
        if self.progress is not None:
            self.progress.console.print(text, highlight=False)
        else:
            self.console.print(text, highlight=False, soft_wrap=True)

    def message(self, text: str) -> None:
        if self.progress is not None:
            self.progress.console.print(text, highlight=False)
        else:
            print(text, flush=True)

    def close(self) -> None:
        if self.progress is not None:
            self.progress.stop()
