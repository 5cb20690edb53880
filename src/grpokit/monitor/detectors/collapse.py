"""Collapse of the learning signal: zero-variance groups (advantage collapse, §17.1) and token entropy (§17.2,
§17.7)."""

from __future__ import annotations

import math
import statistics
from typing import Any

from ... import metric_names as mn
from .base import Alert, Windowed, register
from .bursts import Bursts
from .context import unknown_config_note
from .groups import RANGE_SIGNAL, GroupSplit, range_signal
from .progress import Progress
from .rows import RewardRange, accuracy_now, task_learned

NEARLY_ALL = 0.95  # a zero-variance share at which a group filter has (almost) nothing left to keep


@register
class AdvantageCollapse(Windowed):
    """Zero-variance groups (§17.1): mean over `window` steps >= `threshold` (critical at `critical`).
    Uses the accuracy-based fraction when logged (what dynamic sampling filters), else the reward-based one, else the
    range signal (`groups.range_signal`: every advantage 0, reward min = max, or a reward std of 0, TRL's `reward_std`).
    Two logged rows in a row at `critical` or above alert at once (a collapse onset is named on its second row, not
    after the window fills), except as the task learned, which needs the window.
    The mean is over the last `window` steps and at least the last `min_rows` (2) logged rows: a log written every
    `window` steps or less often fills the window with one row, and one row is a moment, not a sustained state
    (TRL/Unsloth's Chaos-Economy run, two generations per prompt, logged every 5 steps: 0.6 at step 175 between
    0.0 and 0.2).

    What the run logs beside the fraction is weighed (`GroupSplit`, `Progress`):
    - when at least `learned` of the zero-variance groups are all-correct (the split logged as zv/all_correct and
      zv/all_wrong; else a step whose rewards all sit at the top of the run's rewards; else the bound an accuracy
      gives), the zero variance is the task learned: mode "convergence", severity info, advice to stop;
    - while the run still improves (reward rising over `trend_window` steps, or held-out accuracy above its level at
      the onset) and some groups still vary (fraction under `NEARLY_ALL`), it is at most a warning that says so;
    - rows in a row are consecutive at the log's own interval (`Bursts`), and after a burst of at most 2 high rows
      that cleared within `burst_memory` steps, a critical level needs `holds` (3) high rows in a row: isolated pairs
      of all-zero rows among healthy ones (an unseen verl run: steps 423, 425, 429, 430) are a warning; in a run
      without such bursts a collapse is critical on its second row."""

    name, mode = "advantage_collapse", "advantage collapse"
    threshold, critical, window, learned, min_rows = 0.5, 0.8, 5, 0.8, 2
    trend_window, min_gain, burst_memory, holds = 20, 0.01, 100, 3
    keys = (mn.ZV_ACC_FRAC, mn.ZV_FRAC, mn.ZV_SAMPLE_FRAC)
    requires = ((*keys, mn.ADV_MAX, mn.REWARD_MAX, mn.REWARD_STD),)

    def __init__(self, context: dict[str, Any] | None = None, **params: Any) -> None:
        super().__init__(context, **params)
        self.split = GroupSplit(self.window)
        self.range = RewardRange()
        self.progress = Progress(self.trend_window, self.min_gain)
        self.bursts = Bursts(self.critical, self.threshold, self.burst_memory)
        self.recent_rows: list[tuple[int, float]] = []  # the last `min_rows` logged (step, fraction)

    def mean(self) -> float:
        """The zero-variance fraction over the window, or over the last `min_rows` logged rows when the window
        holds fewer."""
        if len(self.values) >= self.min_rows:
            return super().mean()
        if len(self.recent_rows) < self.min_rows:
            return math.nan
        return statistics.fmean(v for _, v in self.recent_rows[-int(self.min_rows) :])

    def _remember(self, key: str, m: dict[str, Any]) -> None:
        step, v = self.values.items[-1]
        if self.recent_rows and self.recent_rows[-1][0] >= step:
            if self.recent_rows[-1][0] > step:  # a restart: the rows before it are another run's
                self.recent_rows.clear()
            else:
                self.recent_rows.pop()
        self.recent_rows.append((step, v))
        del self.recent_rows[: -int(self.min_rows)]
        self.bursts.add(step, v)
        _, acc = accuracy_now(m, self.range.zero_one)
        self.split.add(step, m, v, key == RANGE_SIGNAL and v == 1.0, acc)

    def check(self, step: int, m: dict[str, Any]) -> tuple[bool, Alert | None]:
        self.range.update(m)
        self.progress.add(step, m)
        key = self.push(step, m)
        if key is None:
            v = range_signal(m)
            if math.isfinite(v):
                self.values.add(step, v)
                key = RANGE_SIGNAL
        if key is None:
            return self.active, None
        self._remember(key, m)
        windowed = self.full() and self.mean() >= self.threshold
        severe = self.bursts.in_a_row() >= self.min_rows  # two rows in a row, each >= `critical`
        if not (windowed or severe):
            return False, None
        recent = [v for _, v in self.recent_rows]
        # the window's mean, unless rows in a row at the critical level say more (healthy rows still in the window)
        rows_ev: dict[str, Any] = {}
        self.split.evidence(rows_ev, int(self.min_rows))  # rows in a row of all-correct groups: read by the window
        by_window = windowed and (self.mean() >= self.critical or not severe or task_learned(rows_ev, self.learned))
        zv = self.mean() if by_window else statistics.fmean(recent)
        span = f"the last {self.window} steps" if by_window else f"the last {len(recent)} logged rows"
        ev: dict[str, Any] = {"zero_variance_frac": round(zv, 3), "signal": key, "window_steps": self.window}
        self.split.evidence(ev)
        ev["wasted_compute"] = f"~{zv:.0%} of sampled groups give no gradient"
        fix, actions = self._fix(ev)
        if task_learned(ev, self.learned) and not self._cold():  # cold: all-correct may be one answer repeated
            if not windowed:
                return False, None  # a task is learned over a full window, not two rows
            return True, self.new_alert(
                step,
                "info",
                f"{zv:.0%} of groups have zero variance over {span} and "
                f"{ev['learned_share']:.0%} of those are all-correct: the model solves these prompts (the task is "
                "learned), not a collapse",
                ev,
                "the task is learned for this model: stop here (monitor.stop_when_learned=true stops a run by "
                "itself), or train on harder prompts (grpokit preflight filters always-solved ones)",
                onset=self.values.first_step(),
                mode="convergence",
            )
        sev, why = self._severity(step, zv, ev)
        if key == RANGE_SIGNAL:
            what = f"every advantage was exactly 0 (min = max = 0) at {zv:.0%} of {span}"
            if mn.ADV_MAX not in m and mn.REWARD_MAX not in m:
                what = f"every group's rewards were equal (reward std 0) at {zv:.0%} of {span}"
        else:
            kind = "accuracy" if key == mn.ZV_ACC_FRAC else "reward"
            what = f"{zv:.0%} of groups have zero {kind} variance over {span}"
        return True, self.new_alert(step, sev, what + why, ev, fix, actions, onset=self.values.first_step())

    def _severity(self, step: int, zv: float, ev: dict[str, Any]) -> tuple[str, str]:
        """Critical at `critical`, unless the run still improves while some groups vary, or the high rows are a
        short burst in a run whose earlier bursts cleared; then a warning, and why (appended to the message)."""
        if zv < self.critical:
            return "warning", ""
        onset = self.values.first_step()
        improving, pev, because = self.progress.improving(onset)
        if improving and zv < NEARLY_ALL:
            ev.update(pev)
            return "warning", f", but {because}: the groups that vary still teach; watch"
        bursts = self.bursts.recent(step)
        if bursts and self.bursts.in_a_row() < self.holds:
            ev["earlier_bursts"] = bursts[-5:]
            at = ", ".join(str(s) for s in bursts[-3:])
            return "warning", (
                f", in a run whose all-zero rows came and went in short bursts (from steps {at}): critical if it "
                f"holds for {self.holds} rows in a row"
            )
        return "critical", ""

    def _cold(self) -> bool:
        """The run samples colder than 1: all-correct groups there may be one answer repeated, not the task learned
        (so they are not read as convergence), and sampling at 1 is the first fix."""
        temp = self.context.get("temperature")
        return isinstance(temp, (int, float)) and temp < 1.0

    def _fix(self, ev: dict[str, Any]) -> tuple[str, list[str]]:
        """What to change, for the data the zero-variance groups point to, and the autopilot's actions."""
        if "all_wrong_frac" not in ev:
            data = (
                "prompts the model solves sometimes (this log does not say whether groups are all-right or all-wrong)"
            )
        elif ev["all_wrong_frac"] >= ev["all_correct_frac"]:
            data = "easier prompts (the model fails every sample)"
        else:
            data = "harder prompts (the model always succeeds)"
        # a sampler colder than 1 gives a group the same answer: sampling at 1 is the fix that acts first
        temp = self.context.get("temperature")
        first = f"sample at temperature 1 (rollout.temperature is {temp}: a cold sampler repeats one answer); "
        first, warm = (first, ["rollout.temperature=1.0"]) if self._cold() else ("", [])
        if self.context.get("dynamic_sampling") or self.context.get("group_filter") == "gpg":
            # GPG's filter resamples degenerate groups too: switching it for DAPO's would change the algorithm
            name = "dynamic sampling" if self.context.get("dynamic_sampling") else "GPG's group filter"
            fix = (
                f"{first}{name} is on and pays for this with extra generation rounds: a data mix with "
                f"{data} (grpokit preflight filters them), or a larger group size G"
            )
            return fix, warm
        # a filter keeps the groups with signal; with (almost) none it draws algo.max_gen_rounds and stops the run
        # (every dapo recipe on a model that fails every sample), so the data comes first there
        ds, mix = "DAPO dynamic sampling (algo.group_filter=dynamic_sampling)", f"a data mix with {data}"
        fix = first + (
            f"{mix} (grpokit preflight filters them), or a larger group size G: nearly every group has no signal, so "
            f"{ds} alone would find almost none to keep; with the data fixed it drops the rest"
            if ev["zero_variance_frac"] >= NEARLY_ALL
            else f"{ds} to drop degenerate groups; {mix} (grpokit preflight filters them); a larger group size G"
        )
        fix += unknown_config_note(self.context)
        # switched on mid-run, a filter that may not fill a batch must not end the run: short batches train instead
        partial = ["algo.ds_shortfall=partial"] if self.context.get("ds_shortfall") == "error" else []
        return fix, [*warm, *partial, "algo.group_filter=dynamic_sampling"]


# registered after AdvantageCollapse, in the order the detectors have always run and reported in
from .entropy import EntropyCollapse as EntropyCollapse  # noqa: E402
