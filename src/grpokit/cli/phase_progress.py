"""Where a training step is now, for the display's phase bar: the six phases of a step in order (rollout, score,
filter, advantages, update, signals; docs/layout.md), the optimizer steps of the update, the generation rounds of
dynamic sampling; and the phases outside a step (eval, checkpoint, critic pretraining) as phases of their own."""

from __future__ import annotations

from dataclasses import dataclass

STEP_PHASES = ("rollout", "score", "filter", "advantages", "update", "signals")
ALIASES = {"generate": "rollout", "logprobs": "advantages"}  # the names the trainer reports -> the step's phases


@dataclass(frozen=True)
class Shown:
    """What the phase bar shows: its label, progress (`total` None: no count, the bar pulses), and whether the
    phase is a new one (its clock restarts)."""

    label: str
    completed: int
    total: int | None
    restart: bool


class PhaseTracker:
    """Turns the trainer's phase reports (`name, done, total`) into what the phase bar shows."""

    def __init__(self) -> None:
        self.current = ""
        self.rounds = 0  # generation rounds of the step so far

    def step_done(self) -> None:
        """A step ended: the next rollout is its first round."""
        self.rounds = 0
        self.current = ""

    def enter(self, name: str, done: int = 0, total: int = 1) -> Shown:
        """The phase `name` reports `done` of `total` units of work."""
        phase = ALIASES.get(name, name)
        if phase not in STEP_PHASES:  # eval, checkpoint, critic pretraining, ...
            restart = phase != self.current
            self.current = phase
            counted = total > 1
            return Shown(phase, done if counted else 0, total if counted else None, restart)
        if phase == "rollout":
            self.rounds += 1
        if phase == "update" and total > 0 and done >= total:  # the last optimizer step: the signals come next
            phase = "signals"
        label = f"step: {phase}"
        if phase == "rollout" and self.rounds > 1:
            label += f" (round {self.rounds})"
        if phase == "update" and total > 1:
            label += f" {done}/{total}"
        restart = phase != self.current or (phase == "rollout" and self.rounds > 1)
        self.current = phase
        return Shown(label, STEP_PHASES.index(phase), len(STEP_PHASES), restart)
