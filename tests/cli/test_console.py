"""The live display of `grpokit train` (grpokit.cli.console), driven as the training loop drives it: real metric
rows (names from grpokit.metric_names), the real detectors' alerts, a real Display writing to a stream."""

from __future__ import annotations

import io
import os
import re
from pathlib import Path

from rich.cells import cell_len
from rich.console import Console
from rich.progress import Task

from grpokit import metric_names as mn
from grpokit.cli.console import Display
from grpokit.cli.health_line import WIDTH, health_line
from grpokit.cli.phase_progress import PhaseTracker
from grpokit.monitor.detectors.runner import Monitor

# the widest values each field takes in a real run: a 4-digit step count, a negative 2-decimal reward, 100%
# accuracy, 3-digit shares, a 4-digit mean length, a KL of 4 decimals, both clip fractions, 2-digit rounds, a step
# of minutes, an ETA of hours and several active alerts
BASE = {
    mn.REWARD_MEAN: -0.583,
    mn.REWARD_ACCURACY: 1.0,
    mn.ENTROPY_TOKEN_MEAN: 2.345,
    mn.ZV_FRAC: 0.95,
    mn.ZV_ALL_CORRECT: 0.5,
    mn.ZV_ALL_WRONG: 0.45,
    mn.ZV_ACC_FRAC: 0.95,
    mn.LENGTH_MEAN: 4095.6,
    mn.TIME_STEP: 754.2,
    mn.ACTOR_CLIPFRAC_LOW: 0.031,
    mn.ACTOR_CLIPFRAC_HIGH: 0.125,
}
RECIPES = {
    "dapo": {**BASE, mn.SAMPLING_ROUNDS: 16.0, mn.kept(mn.REWARD_ACCURACY): 0.5, mn.SAMPLING_GENERATED_GROUPS: 64.0},
    "ppo": {
        **BASE,
        mn.KL_REF_K3: 0.1234,
        mn.KL_COEF: 0.05,
        mn.CRITIC_VALUE_LOSS: 12.5,
        mn.CRITIC_EXPLAINED_VARIANCE: -0.42,
        mn.CRITIC_GRAD_NORM: 123.4,
    },
    "grpo": {**BASE, mn.KL_REF_K3: 0.0012, mn.ACTOR_CLIPFRAC_LOW: 0.0, mn.ACTOR_CLIPFRAC_HIGH: 0.0},
}


def test_health_line_fits_100_columns_for_every_recipe_at_its_widest() -> None:
    for recipe, m in RECIPES.items():
        line = health_line(9999, 10000, m, eta=3 * 86400 + 7200, alerts=3)
        assert cell_len(line) <= WIDTH == 100 and len(line) <= 100, (recipe, len(line), line)
        assert line.startswith("step 9999/10000  reward -0.58  acc 100%  "), line
        assert "  zv 95% all✓50% all✗45%  " in line and line.endswith(" eta 3d02h  ⚠3"), line
        if recipe == "dapo":
            assert "  rounds 16  " in line
        else:
            assert "  kl 0.1234  " in line if recipe == "ppo" else "  kl 0.0012  " in line


def test_health_line_of_a_realistic_step_keeps_every_field() -> None:
    """The demo's dapo (on-policy: no clipping) and an off-policy run with a reference, as a terminal shows them
    (the ETA is in the progress bar) and as plain output does (the ETA takes the step's seconds' place)."""
    m = {
        **RECIPES["dapo"],
        **{mn.REWARD_MEAN: 0.84, mn.REWARD_ACCURACY: 0.91, mn.ENTROPY_TOKEN_MEAN: 0.213, mn.LENGTH_MEAN: 7.31},
        **{mn.ZV_ACC_FRAC: 0.5, mn.ZV_ALL_CORRECT: 0.44, mn.ZV_ALL_WRONG: 0.06, mn.ZV_FRAC: 0.3},
        **{mn.TIME_STEP: 4.07, mn.SAMPLING_ROUNDS: 3},
    }
    dapo = {**m, mn.ACTOR_CLIPFRAC_LOW: 0.0, mn.ACTOR_CLIPFRAC_HIGH: 0.0}
    head = "step 12/36  reward 0.84  acc 91%  H 0.21  zv 50% all✓44% all✗6%  "
    assert health_line(12, 36, dapo, alerts=1) == head + "len 7  rounds 3  4.1s  ⚠1"
    assert health_line(12, 36, dapo, eta=147.0, alerts=1) == head + "len 7  rounds 3  4.1s eta 2m27s  ⚠1"
    off_policy = {**m, mn.SAMPLING_ROUNDS: 1.0, mn.KL_REF_K3: 0.0123, mn.ACTOR_CLIPFRAC_LOW: 0.003}
    off_policy[mn.ACTOR_CLIPFRAC_HIGH] = 0.13
    # 105 columns in all: the step's seconds, the least important field, are left out
    assert health_line(12, 36, off_policy, alerts=2) == head + "kl 0.0123  clip 0.3/13%  len 7  ⚠2"
    # 112 with the ETA: the seconds and the clip fractions are left out (the length, less important, fits back)
    assert health_line(12, 36, off_policy, eta=147.0, alerts=2) == head + "kl 0.0123  len 7  eta 2m27s  ⚠2"
    missing = {mn.REWARD_MEAN: float("nan"), mn.KL_REF_K3: float("inf")}
    assert health_line(1, 2, missing) == "step 1/2  reward –  acc –  H –  zv – all✓– all✗–  len –  –"


def test_zv_is_on_accuracy_and_all_correct_all_wrong_are_its_parts() -> None:
    """The real run's step 2 (dapo, add1): the overlong punishment gave every all-wrong group reward variance, so
    zv/frac was 0 while 67% of the groups had no correctness signal; the line shows the 67% the collapse detector
    and DAPO's filter count, of which all✗ is the whole."""
    real = {mn.ZV_FRAC: 0.0, mn.ZV_ACC_FRAC: 2 / 3, mn.ZV_ALL_CORRECT: 0.0, mn.ZV_ALL_WRONG: 2 / 3, mn.ZV_GROUPS: 6.0}
    assert "  zv 67% all✓0% all✗67%  " in health_line(2, 3, real)
    foreign = {mn.ZV_FRAC: 0.25}  # a log without accuracy-based groups: zv on rewards
    assert "  zv 25% all✓– all✗–  " in health_line(2, 3, foreign)


def row(step: int, zv: float = 0.0, all_wrong: float = 0.0, seconds: float = 10.0) -> dict[str, float]:
    """A metric row as `Trainer.train_step` returns it (the fields the display and the detectors read)."""
    return {
        mn.REWARD_MEAN: 0.4,
        mn.REWARD_ACCURACY: 0.4,
        mn.ENTROPY_TOKEN_MEAN: 0.9,
        mn.ZV_FRAC: zv,
        mn.ZV_ACC_FRAC: zv,
        mn.ZV_ALL_CORRECT: zv - all_wrong,
        mn.ZV_ALL_WRONG: all_wrong,
        mn.ZV_GROUPS: 4.0,
        mn.LENGTH_MEAN: 12.0,
        mn.TIME_STEP: seconds,
        mn.TRAIN_BATCH_SIZE: 32.0,
    }


def plain_display(total: int) -> tuple[Display, io.StringIO]:
    out = io.StringIO()
    display = Display(total, console=Console(file=out))
    assert not display.live and display.progress is None  # a stream that is not a terminal: plain lines
    return display, out


def test_eta_after_two_steps_is_steps_left_times_the_mean_step() -> None:
    display, out = plain_display(10)
    display.step_done(1, row(1, seconds=10.0), [])
    display.step_done(2, row(2, seconds=20.0), [])
    lines = out.getvalue().splitlines()
    assert lines[0].endswith("  10s eta 90s")  # 9 steps left x 10 s
    assert lines[1].endswith("  20s eta 2m00s")  # 8 steps left x 15 s
    assert display.eta(2) == 120.0


def test_eval_lines_before_during_and_after_training() -> None:
    display, out = plain_display(36)
    display.evaluated(0, {mn.EVAL_ACCURACY: 0.3, mn.EVAL_N: 100.0, mn.TIME_EVAL: 2.0}, before=True)
    display.step_done(12, {**row(12), mn.EVAL_ACCURACY: 0.99, mn.EVAL_N: 100.0, mn.TIME_EVAL: 2.0}, [])
    display.evaluated(36, {mn.EVAL_ACCURACY: 1.0, mn.EVAL_N: 100.0})
    display.evaluated(36, {})
    lines = out.getvalue().splitlines()
    assert lines[0] == "eval before training: held-out accuracy 30.0% (n=100)"
    assert lines[1].startswith("step 12/36  reward 0.40  acc 40%")
    assert lines[2] == "eval step 12: held-out accuracy 99.0% (n=100)"
    assert lines[3] == "eval after step 36: held-out accuracy 100.0% (n=100, 30.0% before training)"
    assert lines[4].startswith("held-out accuracy after step 36: not measured (no held-out prompts")
    assert display.eta(12) == 24 * 12.0  # the step's evaluation counts in the mean step time


def test_a_repeated_alert_is_printed_when_it_starts_and_when_it_clears() -> None:
    """The real detectors on an advantage collapse of all-wrong groups for 12 steps, then healthy groups."""
    display, out = plain_display(30)
    monitor = Monitor()
    collapsed = [row(s, zv=0.75, all_wrong=0.75) for s in range(1, 13)]
    healthy = [row(s) for s in range(13, 31)]
    for step, m in enumerate(collapsed + healthy, start=1):  # the loop's order: observe, health line, new alerts
        new = monitor.observe(step, m)
        display.step_done(step, m, monitor.active())
        for alert in [*new, *[a for a in monitor.escalated if a not in new]]:
            display.alert(alert)
    text = out.getvalue()
    health = [line for line in text.splitlines() if line.startswith("step ")]
    assert len(health) == 30
    starts = [line for line in text.splitlines() if line.startswith("⚠ ")]
    assert starts and starts[0].startswith("⚠ WARNING advantage collapse (since step ")
    assert text.count("fix: ") == len(starts) <= 2  # once when it starts (and once if its severity changes)
    active_lines = [line for line in health if line.endswith("⚠1")]
    assert len(active_lines) >= 5 and not any("collapse" in line for line in health)  # a count, not the alert
    cleared = [line for line in text.splitlines() if line.startswith("✓ cleared")]
    assert len(cleared) == 1 and cleared[0].endswith("advantage collapse (active since step 1)")


def test_checkpoint_lines_name_the_path_its_size_and_time(tmp_path: Path) -> None:
    ckpt = tmp_path / "checkpoints" / "step_12"
    ckpt.mkdir(parents=True)
    (ckpt / "model.safetensors").write_bytes(b"\0" * 1_600_000)
    (ckpt / "state.json").write_bytes(b"{}")
    display, out = plain_display(36)
    display.checkpoint(12, ckpt, 3.14)
    display.checkpoint(36, tmp_path / "final", 1.0, final=True)
    lines = out.getvalue().splitlines()
    assert lines == [
        f"saved checkpoint step 12 -> {ckpt} (1.6 MB, 3.1s)",
        f"saved final model -> {tmp_path / 'final'} (0 B, 1.0s)",
    ]
    assert display.seconds == 3.14  # a checkpoint's time counts in the ETA, the final model's does not


def test_plain_output_has_no_control_characters(tmp_path: Path) -> None:
    display, out = plain_display(3)
    display.message("grpokit: recipe dapo, task add1 [bold]not markup[/bold]")
    for name, done, total in [
        ("generate", 0, 1),
        ("score", 0, 1),
        ("logprobs", 0, 1),
        ("update", 1, 1),
        ("eval", 0, 1),
    ]:
        display.phase(name, done, total)  # phases draw nothing in plain output
    display.step_done(1, {**row(1, zv=0.75, all_wrong=0.75), mn.EVAL_ACCURACY: 0.5, mn.EVAL_N: 8.0}, ["x"])
    monitor = Monitor()
    for s in range(1, 8):
        for alert in monitor.observe(s, row(s, zv=0.75, all_wrong=0.75)):
            display.alert(alert)
    display.checkpoint(1, tmp_path, 0.5)
    display.close()
    text = out.getvalue()
    assert "[bold]not markup[/bold]" in text and "⚠ WARNING advantage collapse" in text
    assert not re.search(r"[\x00-\x09\x0b-\x1f\x7f]", text), repr(text)  # no escape codes, no \r: only newlines
    assert len(text.splitlines()) == 6


def test_phase_bar_moves_through_a_step_and_its_clock_restarts() -> None:
    """On a terminal: the phase bar counts the step's six phases and the update's optimizer steps; a finished
    update does not freeze the bar's clock for the rest of the run (rich keeps a finished task's time)."""
    out = io.StringIO()
    display = Display(5, console=Console(file=out, force_terminal=True, width=120))
    assert display.live and display.progress is not None
    progress = display.progress

    def phase_bar() -> Task:
        return next(t for t in progress.tasks if t.id == display.phase_task)

    seen = []
    for name, done, total in [("generate", 0, 1), ("score", 0, 1), ("generate", 0, 1), ("score", 0, 1)]:
        display.phase(name, done, total)
        seen.append((phase_bar().description, phase_bar().completed, phase_bar().total))
    for done in range(5):
        display.phase("update", done, 4) if done < 4 else display.phase("update", 4, 4)
        seen.append((phase_bar().description, phase_bar().completed, phase_bar().total))
    assert seen[:4] == [
        ("step: rollout", 0, 6),
        ("step: score", 1, 6),
        ("step: rollout (round 2)", 0, 6),
        ("step: score", 1, 6),
    ]
    assert seen[4:] == [(f"step: update {d}/4", 4, 6) for d in range(4)] + [("step: signals", 5, 6)]
    display.step_done(1, row(1), [])
    display.phase("generate", 0, 1)
    display.phase("checkpoint", 0, 1)
    bar = phase_bar()
    assert bar.description == "checkpoint" and bar.total is None and bar.finished_time is None
    steps = progress.tasks[display.steps_task]
    assert steps.completed == 1 and steps.fields["eta"] == 40.0
    display.close()
    assert re.search(r"eta \d+s", out.getvalue())  # the ETA column, counting down from 40 s since the step


def test_the_tracker_counts_rounds_per_step() -> None:
    t = PhaseTracker()
    assert t.enter("generate").label == "step: rollout"
    assert t.enter("generate").label == "step: rollout (round 2)"
    t.step_done()
    assert t.enter("generate").label == "step: rollout"
    shown = t.enter("critic pretraining")
    assert shown.label == "critic pretraining" and shown.total is None and shown.restart


def test_a_final_model_hard_linked_to_the_last_checkpoint_says_it_takes_no_new_disk(tmp_path: Path) -> None:
    checkpoint, final = tmp_path / "checkpoints" / "step_3", tmp_path / "final"
    checkpoint.mkdir(parents=True)
    final.mkdir()
    (checkpoint / "model.safetensors").write_bytes(b"\0" * 4096)
    os.link(checkpoint / "model.safetensors", final / "model.safetensors")
    out = io.StringIO()
    display = Display(3, console=Console(file=out))
    display.checkpoint(3, checkpoint, 1.0)
    display.checkpoint(3, final, 0.0, final=True)
    display.close()
    lines = out.getvalue().splitlines()
    assert lines[-2].startswith(f"saved checkpoint step 3 -> {checkpoint} (4.1 kB")
    assert lines[-1].startswith(f"saved final model -> {final} (hard links to the last checkpoint's files: no new disk")


def test_multi_turn_health_line_shows_turns_calls_and_failed_calls() -> None:
    from grpokit.cli.health_line import health_line

    m = {
        mn.REWARD_MEAN: 0.8,
        mn.REWARD_ACCURACY: 0.8,
        mn.ENTROPY_TOKEN_MEAN: 0.4,
        mn.LENGTH_MEAN: 39.0,
        mn.TIME_STEP: 86.0,
        mn.EPISODE_TURNS_MEAN: 1.84,
        mn.EPISODE_TOOL_CALLS_MEAN: 0.81,
        mn.EPISODE_CALL_ATTEMPTS: 27.0,  # 1 malformed, 26 run of which 1 raised: 2 of 27 failed
        mn.EPISODE_PARSE_FAIL_RATE: 1 / 27,
        mn.EPISODE_TOOL_CALLS: 26.0,
        mn.EPISODE_TOOL_ERROR_RATE: 1 / 26,
        mn.EPISODE_TOOL_TIMEOUT_RATE: 0.0,
    }
    line = health_line(2, 16, m, eta=1389.0, alerts=1)
    assert "turns 1.8 calls 0.81 ✗7%" in line and cell_len(line) <= 100, line
    single = health_line(2, 16, {k: v for k, v in m.items() if not k.startswith("episode/")})
    assert "turns" not in single
