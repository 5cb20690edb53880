"""Readers: every supported log format read from real files into canonical per-step rows (no mocks)."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

from grpokit.monitor.readers import CANONICAL, READERS, TRL_NAMES, VERL_NAMES, RunLog, detect, read_run, read_runs
from grpokit.monitor.readers.discovery import discover

LOGS = Path(__file__).parents[1] / "fixtures" / "logs"
TRL_HEALTHY = LOGS / "trl_healthy"
TRL_CONSTANT = LOGS / "trl_constant_reward"
VERL_CONSOLE = LOGS / "verl_console.log"

TRL_STEPS = 6  # max_steps of scripts/make_trl_fixture.py


def _values(log: RunLog, name: str) -> list[float]:
    return [r[name] for r in log.rows]


def _log_history(run_dir: Path) -> list[dict]:
    return json.loads((run_dir / "trainer_state.json").read_text())["log_history"]


# ----------------------------------------------------------------------------------------------------- detection


@pytest.mark.parametrize(
    "path, source",
    [
        (TRL_HEALTHY, "trl"),
        (TRL_HEALTHY / "trainer_state.json", "trl"),
        (TRL_CONSTANT, "trl"),
        (TRL_HEALTHY / "tensorboard", "tensorboard"),
        (VERL_CONSOLE, "verl"),
    ],
)
def test_fixtures_are_detected_as_their_source(path, source):
    assert detect(path)[0] == source
    log = read_run(path)
    assert log.source == source and log.path == path and log.rows


def test_registry_lists_every_source():
    assert list(READERS) == [
        "grpokit",
        "trl",
        "verl",
        "wandb",
        "wandb-run",
        "mlflow",
        "trackio",
        "skyrl",
        "nemo-rl",
        "prime-rl",
        "slime",
        "roll",
        "areal",
        "console",
        "tensorboard",
    ]


def test_mapping_tables_only_target_canonical_names():
    for table in (TRL_NAMES, VERL_NAMES):
        for targets in table.values():
            assert set(targets) <= CANONICAL


# ----------------------------------------------------------------------------------------------------------- TRL


def test_trl_healthy_rows():
    log = read_run(TRL_HEALTHY)
    assert log.steps == list(range(1, TRL_STEPS + 1))
    for name in ("reward/mean", "reward/std", "entropy/token_mean", "kl_ref/k3", "zv/sample_frac", "length/mean"):
        assert name in log.available, name
        assert all(math.isfinite(v) for v in _values(log, name)), name
    # the values are TRL's own, step by step
    train = [e for e in _log_history(TRL_HEALTHY) if "reward" in e]
    assert _values(log, "reward/mean") == pytest.approx([e["reward"] for e in train])
    assert _values(log, "kl_ref/k3") == pytest.approx([e["kl"] for e in train])
    assert _values(log, "length/truncation_rate") == pytest.approx([e["completions/clipped_ratio"] for e in train])
    # a varying reward: groups have reward variance, so nothing collapsed
    assert all(v < 1 for v in _values(log, "zv/sample_frac"))
    assert {"reward", "frac_reward_zero_std", "train_runtime"} <= log.raw_names


def test_trl_constant_reward_is_advantage_collapse():
    log = read_run(TRL_CONSTANT)
    assert log.steps == list(range(1, TRL_STEPS + 1))
    assert _values(log, "zv/sample_frac") == [1.0] * TRL_STEPS
    assert _values(log, "zv/frac") == [1.0] * TRL_STEPS
    assert _values(log, "reward/std") == [0.0] * TRL_STEPS


def test_trl_lacks_what_it_does_not_log():
    log = read_run(TRL_HEALTHY)
    for name in ("zv/all_correct", "zv/all_wrong", "kl_ref/k1", "length/correct_mean", "mismatch/rho_max"):
        assert name not in log.available
        assert name not in log.rows[0]


def test_trl_tensorboard_matches_trainer_state():
    tb = read_run(TRL_HEALTHY / "tensorboard")
    st = read_run(TRL_HEALTHY)
    assert tb.source == "tensorboard" and tb.flavor == "trl"
    assert tb.steps == st.steps
    assert "train/reward" in tb.raw_names
    for name in ("reward/mean", "entropy/token_mean", "kl_ref/k3", "zv/sample_frac", "length/mean"):
        assert _values(tb, name) == pytest.approx(_values(st, name), rel=1e-6), name


def test_trl_checkpoint_trainer_state(tmp_path):
    for n in (2, 6):
        (tmp_path / f"checkpoint-{n}").mkdir()
    state = json.loads((TRL_CONSTANT / "trainer_state.json").read_text())
    early = {**state, "log_history": state["log_history"][:2]}
    (tmp_path / "checkpoint-2" / "trainer_state.json").write_text(json.dumps(early))
    shutil.copy(TRL_CONSTANT / "trainer_state.json", tmp_path / "checkpoint-6" / "trainer_state.json")
    log = read_run(tmp_path)
    assert log.source == "trl"
    assert log.steps == list(range(1, TRL_STEPS + 1))  # the newest checkpoint, not checkpoint-2


# ---------------------------------------------------------------------------------------------------------- verl


def test_verl_console_rows():
    log = read_run(VERL_CONSOLE)
    assert log.source == "verl"
    assert log.steps == list(range(0, 13))  # step 0 is the validation before training
    by_step = {int(r["step"]): r for r in log.rows}
    assert by_step[1]["entropy/token_mean"] == pytest.approx(1.12)
    assert by_step[1]["reward/mean"] == pytest.approx(0.21)
    assert by_step[1]["length/truncation_rate"] == pytest.approx(0.062)
    assert by_step[12]["length/mean"] == pytest.approx(272.3)
    # np.float64(...) / np.int64(...) values (steps 3 and 4) parse like plain ones
    assert by_step[3]["entropy/token_mean"] == pytest.approx(0.97)
    assert by_step[3]["actor/clipfrac"] == pytest.approx(0.0027)
    assert by_step[4]["reward/mean"] == pytest.approx(0.34)
    # union clip fraction and dual-clip fraction keep verl's meaning
    assert "actor/clipfrac" in log.available and "actor/clipfrac_dual" in log.available
    assert "actor/clipfrac_high" not in log.available
    # held-out accuracy at step 0 and step 10 only
    assert by_step[0]["eval/accuracy"] == pytest.approx(0.212)
    assert by_step[10]["eval/accuracy"] == pytest.approx(0.463)
    assert math.isnan(by_step[5]["eval/accuracy"])
    assert math.isnan(by_step[0]["entropy/token_mean"])
    # the entropy collapse stretch is there
    assert [s for s, r in by_step.items() if r["entropy/token_mean"] < 0.5] == [8, 9, 10, 11, 12]


def test_verl_lacks_what_it_does_not_log():
    log = read_run(VERL_CONSOLE)
    for name in ("zv/frac", "zv/sample_frac", "reward/std", "reward/accuracy", "kl_ref/k3", "mismatch/rho_max"):
        assert name not in log.available, name
    assert "critic/score/mean" in log.raw_names and "rollout_corr/rollout_is_mean" in log.raw_names


def test_verl_console_line_prefixes_and_noise(tmp_path):
    f = tmp_path / "train.log"
    f.write_text(
        "2025-11-02 10:00:01 INFO starting\n"
        "\x1b[36m(TaskRunner pid=7)\x1b[0m step:3 - actor/entropy:np.float64(0.25) - critic/score/mean:0.5"
        " - timing_s/step:41.2 - perf/time_per_step:41.2\n"
        "global_step:99 - actor/entropy:9.0\n"
        "step:4 - actor/entropy:nan - response_length/mean:np.float32(100.5) - note:abc\n"
    )
    log = read_run(tmp_path)  # a directory holding verl console logs
    assert log.source == "verl"
    assert log.steps == [3, 4]
    assert log.rows[0]["entropy/token_mean"] == 0.25 and log.rows[0]["time/step"] == 41.2
    assert math.isnan(log.rows[1]["entropy/token_mean"])
    assert log.rows[1]["length/mean"] == 100.5
    assert "note" not in log.raw_names


def test_verl_jsonl_file_logger(tmp_path):
    f = tmp_path / "verl_metrics.jsonl"
    lines = [
        {"step": 1, "data": {"actor/entropy": 0.9, "critic/score/mean": 0.1, "response_length/clip_ratio": 0.2}},
        {"step": 2, "data": {"actor/entropy": 0.8, "critic/score/mean": 0.2, "response_length/clip_ratio": 0.1}},
    ]
    f.write_text("".join(json.dumps(x) + "\n" for x in lines))
    log = read_run(f)
    assert log.source == "verl"
    assert _values(log, "entropy/token_mean") == [0.9, 0.8]
    assert _values(log, "length/truncation_rate") == [0.2, 0.1]
    assert log.available == {"entropy/token_mean", "reward/mean", "length/truncation_rate"}


def test_verl_flat_jsonl(tmp_path):
    f = tmp_path / "metrics.jsonl"
    f.write_text(json.dumps({"step": 5, "actor/entropy": 0.4, "actor/pg_clipfrac": 0.01, "timing_s/gen": 3.0}) + "\n")
    log = read_run(f)
    assert log.source == "verl"
    assert log.rows == [{"step": 5, "entropy/token_mean": 0.4, "actor/clipfrac": 0.01, "time/generate": 3.0}]


def test_verl_eval_accuracy_ambiguous_with_several_data_sources(tmp_path):
    f = tmp_path / "run.log"
    f.write_text("step:0 - val-core/gsm8k/acc/mean@1:0.3 - val-core/math/acc/mean@1:0.1\n")
    log = read_run(f)
    assert "eval/accuracy" not in log.available  # not averaged across data sources


# ------------------------------------------------------------------------------------------------------- grpokit


def test_grpokit_eval_rows_merge_into_their_step(tmp_path):
    rows = [
        {"step": 0, "eval/accuracy": 0.25, "eval/n": 100.0},
        {"step": 1, "reward/mean": 0.1, "zv/frac": 0.5, "entropy/token_mean": 2.3, "adv/mean": None},
        {"step": 2, "reward/mean": 0.2, "zv/frac": 0.25, "entropy/token_mean": 2.2},
        {"step": 2, "eval/accuracy": 0.5, "eval/n": 100.0},  # final eval, logged at the last train step
    ]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    log = read_run(tmp_path)
    assert log.source == "grpokit"
    assert log.steps == [0, 1, 2]
    last = log.rows[-1]
    assert last["reward/mean"] == 0.2 and last["eval/accuracy"] == 0.5 and last["zv/frac"] == 0.25
    assert math.isnan(log.rows[1]["eval/accuracy"]) and math.isnan(log.rows[0]["reward/mean"])
    assert math.isnan(log.rows[1]["adv/mean"])  # NaN is written as null
    assert {"reward/mean", "eval/accuracy", "zv/frac", "adv/mean"} <= log.available
    assert "kl_ref/k3" not in log.available


def test_grpokit_run_with_tensorboard_reads_metrics_jsonl(tmp_path):
    (tmp_path / "metrics.jsonl").write_text(json.dumps({"step": 1, "reward/mean": 0.5}) + "\n")
    shutil.copytree(TRL_HEALTHY / "tensorboard", tmp_path / "tb")
    assert read_run(tmp_path).source == "grpokit"


# -------------------------------------------------------------------------------------------------------- errors


def test_unsupported_path_gives_clear_error(tmp_path):
    (tmp_path / "notes.txt").write_text("nothing to see here\n")
    with pytest.raises(ValueError) as e:
        read_run(tmp_path)
    msg = str(e.value)
    assert str(tmp_path) in msg
    for fmt in ("grpokit", "TRL", "verl", "TensorBoard"):
        assert fmt in msg
    with pytest.raises(ValueError, match="no such file"):
        read_run(tmp_path / "missing")
    with pytest.raises(ValueError, match="not a supported training log"):
        read_run(tmp_path / "notes.txt")


# -------------------------------------------------------------------------- issue 13: the logs people have

REAL = LOGS / "real"


def test_trl_console_log_steps_come_from_progress_bars() -> None:
    """A real Unsloth/TRL GRPO console log (logging every 5 steps, dicts among debug output and tqdm bars)."""
    path = REAL / "trl_unsloth_tsc_grpo_first_50_steps" / "docker_run.log"
    log = read_run(path)
    assert log.source == "trl-console" and log.flavor == "trl"
    assert log.steps == list(range(5, 55, 5))
    text = path.read_text(encoding="utf-8")
    rewards = [float(x) for x in __import__("re").findall(r"'reward': ([0-9.]+)", text)]
    assert _values(log, "reward/mean") == pytest.approx(rewards)
    assert {"zv/frac", "kl_ref/k3", "reward/std", "length/mean", "length/truncation_rate"} <= log.available


def test_console_log_holding_sft_then_grpo_is_two_runs() -> None:
    logs = read_runs(REAL / "trl_unsloth_tsc_grpo_collapse")
    assert [lg.name for lg in logs] == ["docker_run.log#1", "docker_run.log#2"]
    sft, grpo = logs
    assert "reward/mean" not in sft.available and sft.available == {"actor/loss", "train/grad_norm", "train/lr"}
    assert grpo.steps[:3] == [5, 10, 15] and len(grpo.steps) == 69
    assert read_run(REAL / "trl_unsloth_tsc_grpo_collapse", run="docker_run.log#2").steps == grpo.steps
    with pytest.raises(ValueError, match="holds 2 runs"):
        read_run(REAL / "trl_unsloth_tsc_grpo_collapse")


def test_trl_console_old_names_eval_rows_and_no_progress_bars(tmp_path) -> None:
    """TRL 0.14-style names (`completion_length`, `rewards/accuracy_reward`), `logging_steps=10`, an eval dict at
    the same step, and ms-swift's JSON dict with `global_step/max_steps`."""
    bar = "{n}/40 [00:10<00:30,  1.00s/it]"
    lines = []
    for n in (10, 20, 30):
        lines.append(f" 25%|##5       | {bar.format(n=n)}")
        lines.append(
            f"{{'loss': 0.0, 'grad_norm': 0.5, 'learning_rate': 1e-06, 'completion_length': {100 + n}.0, "
            f"'rewards/accuracy_reward': 0.{n // 10}, 'reward': 0.{n // 10}, 'reward_std': 0.3, 'kl': 0.001, "
            f"'epoch': 0.1}}"
        )
    lines.append("{'eval_loss': 0.1, 'eval_rewards/accuracy_reward': 0.55, 'epoch': 0.1}")
    lines.append("{'train_runtime': 100.0, 'train_samples_per_second': 1.0, 'train_loss': 0.0, 'epoch': 0.2}")
    f = tmp_path / "train.txt"
    f.write_text("\n".join(lines) + "\n")
    log = read_run(f)
    assert log.source == "trl-console" and log.steps == [10, 20, 30]
    assert _values(log, "length/mean") == [110.0, 120.0, 130.0]
    assert _values(log, "reward/accuracy") == [0.1, 0.2, 0.3]
    assert log.rows[-1]["eval/accuracy"] == 0.55  # the eval dict joins the step it was printed at
    swift = tmp_path / "swift.log"
    swift.write_text(
        '{"loss": 1e-08, "grad_norm": 0.03, "reward": 0.65, "reward_std": 0.13, "frac_reward_zero_std": 0.625, '
        '"kl": 0.0, "global_step/max_steps": "2/4389", "percentage": "0.05%"}\n'
        '{"loss": 4e-08, "grad_norm": 0.03, "reward": 0.78, "reward_std": 0.03, "frac_reward_zero_std": 0.875, '
        '"kl": 4.3e-05, "global_step/max_steps": "3/4389", "percentage": "0.07%"}\n'
    )
    log = read_run(swift)
    assert log.steps == [2, 3] and _values(log, "zv/frac") == [0.625, 0.875]


def test_console_without_step_numbers_numbers_rows_and_says_so(tmp_path) -> None:
    f = tmp_path / "out.log"
    f.write_text("".join(f"{{'loss': 0.1, 'reward': 0.{i}, 'kl': 0.01, 'epoch': 0.{i}}}\n" for i in range(1, 4)))
    log = read_run(f)
    assert log.steps == [1, 2, 3] and "no step numbers" in log.notes[0]
    # the short-lived names of TRL PR #3188 (before the `completions/` prefix)
    g = tmp_path / "pr3188.log"
    g.write_text("{'loss': 0.0, 'reward': 0.5, 'mean_completion_length': 80.0, 'max_completion_length': 128.0}\n")
    assert read_run(g).rows[0]["length/mean"] == 80.0 and read_run(g).rows[0]["length/max"] == 128.0


def test_verl_old_names_and_score_range() -> None:
    """verl <= 0.3 (a real PPO log): entropy as `actor/entropy_loss`; score min/max tell a 0/1 verifier."""
    log = read_run(REAL / "verl_ppo_gsm8k_converged")
    assert log.source == "verl" and log.steps[0] == 101 and len(log.steps) == 335
    assert "actor/entropy_loss" in log.raw_names and "actor/entropy" not in log.raw_names
    assert log.rows[0]["entropy/token_mean"] == pytest.approx(0.035)
    assert log.rows[0]["reward/min"] == 0.0 and log.rows[0]["reward/max"] == 1.0
    assert log.context["epochs"] == 1 and log.context["mini_batches"] == 4  # from the config verl printed
    assert log.context["eps_high"] == 0.2 and log.context["recipe"] == "gae"


def test_verl_console_with_sft_then_rl_lines_is_two_runs() -> None:
    logs = read_runs(REAL / "verl_grpo_char_count_1_step")
    assert [lg.name for lg in logs] == ["README.md#1", "README.md#2"]
    assert "train/loss" in logs[0].raw_names and logs[0].available == set()
    assert logs[1].steps == [0, 1] and logs[1].rows[1]["entropy/token_mean"] == pytest.approx(0.0977, abs=1e-4)


def test_verl_log_that_crashed_before_step_one() -> None:
    log = read_run(REAL / "verl_ppo_maze_crash_before_step1")
    assert log.source == "verl" and log.rows == []
    assert any("NotImplementedError" in n for n in log.notes)
    # a handled, logged traceback is not a crash
    assert not any("error" in n for n in read_run(REAL / "verl_grpo_gui_cursor_10_steps").notes)


def test_wandb_ui_csv_with_two_runs_and_api_json(tmp_path) -> None:
    f = tmp_path / "wandb_export.csv"
    f.write_text(
        '"Step","run-a - train/reward","run-a - train/reward__MIN","run-a - train/reward__MAX",'
        '"run-b - train/reward","run-b - train/kl"\n'
        '"10","0.1","0.0","0.2","0.5","0.01"\n"20","0.2","0.1","0.3","","0.02"\n'
    )
    logs = read_runs(f)
    assert [lg.name for lg in logs] == ["run-a", "run-b"] and {lg.source for lg in logs} == {"wandb"}
    a, b = logs
    assert a.steps == [10, 20] and _values(a, "reward/mean") == [0.1, 0.2]
    assert b.steps == [10, 20] and math.isnan(b.rows[1]["reward/mean"]) and _values(b, "kl_ref/k3") == [0.01, 0.02]
    j = tmp_path / "history.json"
    j.write_text(
        json.dumps(
            [
                {"_step": 0, "_runtime": 5.0, "train/global_step": 10, "train/reward": 0.3, "train/entropy": 1.2},
                {"_step": 1, "_runtime": 9.0, "train/global_step": 20, "train/reward": 0.4, "train/entropy": 1.1},
            ]
        )
    )
    log = read_run(j)
    assert log.source == "wandb" and log.steps == [10, 20] and _values(log, "entropy/token_mean") == [1.2, 1.1]
    jl = tmp_path / "history.jsonl"
    jl.write_text(
        "".join(json.dumps({"_step": i, "actor/entropy": 0.5 + i, "critic/score/mean": 0.1}) + "\n" for i in range(3))
    )
    log = read_run(jl)
    assert log.source == "wandb" and log.flavor == "verl" and _values(log, "entropy/token_mean") == [0.5, 1.5, 2.5]


def test_folder_of_runs_is_read_run_by_run(tmp_path) -> None:
    """Two TensorBoard runs and a console log under one folder: three runs, never merged (issue 13)."""
    shutil.copytree(TRL_HEALTHY / "tensorboard", tmp_path / "exp" / "healthy")
    shutil.copytree(TRL_CONSTANT / "tensorboard", tmp_path / "exp" / "constant")
    shutil.copy(REAL / "trl_unsloth_tsc_grpo_two_rows" / "docker_run.log", tmp_path / "exp" / "console.log")
    logs = read_runs(tmp_path)
    assert [lg.name for lg in logs] == ["exp/console.log", "exp/constant", "exp/healthy"]
    by = {lg.name: lg for lg in logs}
    assert _values(by["exp/constant"], "zv/frac") == [1.0] * TRL_STEPS
    assert all(v < 1 for v in _values(by["exp/healthy"], "zv/sample_frac"))
    assert [lg.name for lg in read_runs(tmp_path, run="healthy")] == ["exp/healthy"]
    with pytest.raises(ValueError, match="no run named 'nope'"):
        read_runs(tmp_path, run="nope")


def test_grpokit_config_travels_with_the_tensorboard_events(tmp_path) -> None:
    """A bare `tb/` folder of a grpokit run knows the run's config (issue 13: doctor on `tb/` recommended dynamic
    sampling to a run that had it on)."""
    from grpokit.config import build_config
    from grpokit.run.writer import RunWriter as Writer

    w = Writer(tmp_path / "run")
    w.write_config(build_config("dapo").to_dict())
    w.log(1, {"reward/mean": 0.5, "zv/frac": 0.9})
    w.close()
    alone = tmp_path / "tb_only"
    shutil.copytree(tmp_path / "run" / "tb", alone)
    log = read_run(alone)
    assert log.source == "tensorboard" and log.flavor == "grpokit"
    assert log.context["dynamic_sampling"] is True and log.context["eps_high"] == 0.28
    assert log.config["recipe"] == "dapo"
    assert len(list(alone.glob("events.out.tfevents.*"))) == 1 and not [p for p in alone.iterdir() if p.is_dir()]


def test_a_run_opening_with_value_pretraining_rows_is_read_as_grpokit(tmp_path) -> None:
    """vapo logs 50 value-pretraining rows at step 0 before its first step; the first 50 lines then hold only
    `critic_pretrain/*` names, and the run was read from its `tb/` events instead (`grpokit compare` named it
    "tb"). A directory `grpokit train` claimed (its marker file) is a grpokit run whatever its first lines hold."""
    from grpokit.config import build_config
    from grpokit.run.directory import claim_run_dir
    from grpokit.run.writer import RunWriter as Writer

    run = claim_run_dir(tmp_path / "vapo_run")
    w = Writer(run)
    w.write_config(build_config("vapo").to_dict())
    for i in range(50):
        w.log(0, {"critic_pretrain/step": float(i + 1), "critic_pretrain/explained_variance": 0.01 * i})
    for step in (1, 2):
        w.log(step, {"reward/mean": 0.5, "zv/frac": 0.25, "critic/explained_variance": 0.1})
    w.close()
    assert (run / "tb").is_dir()
    [(name, source, files)] = discover(tmp_path)
    assert (name, source, files) == ("vapo_run", "grpokit", [run / "metrics.jsonl"])
    log = read_run(run)
    assert log.source == "grpokit" and log.config["recipe"] == "vapo"
    assert _values(log, "reward/mean")[1:] == [0.5, 0.5]  # after the step-0 row of the pretraining


def test_openrlhf_tensorboard_tags(tmp_path) -> None:
    """OpenRLHF's TensorboardLogger writes `train/<metric>` per global step (names from its source, commit 3c3be62);
    the corpus's OpenRLHF logs are consoles, so the events are written here with its tag names."""
    from torch.utils.tensorboard import SummaryWriter

    w = SummaryWriter(str(tmp_path / "openrlhf_run"))
    for step in (1, 2, 3):
        for tag, v in {
            "train/policy_loss": -0.01 * step,
            "train/reward": 0.2 * step,
            "train/return": 0.2 * step,
            "train/response_length": 300.0 + step,
            "train/total_length": 500.0,
            "train/kl": 0.001 * step,
            "train/ppo_clip_ratio": 0.02,
            "train/ppo_kl": 0.0001,
            "train/actor_lr": 1e-6,
            "train/actor_grad_norm": 0.5,
            "train/response_clip_ratio": 0.1,
            "train/entropy_loss": 1.5 - 0.1 * step,
        }.items():
            w.add_scalar(tag, v, step)
    w.close()
    log = read_run(tmp_path)
    assert log.source == "tensorboard" and log.flavor == "openrlhf" and log.steps == [1, 2, 3]
    assert _values(log, "reward/mean") == pytest.approx([0.2, 0.4, 0.6])
    assert _values(log, "kl_ref/k1") == pytest.approx([0.001, 0.002, 0.003])
    assert _values(log, "entropy/token_mean") == pytest.approx([1.4, 1.3, 1.2])
    assert {"actor/clipfrac", "length/truncation_rate", "train/grad_norm", "actor/pg_loss"} <= log.available
    assert "kl_ref/k3" not in log.available  # not TRL's `train/kl` (k3)


def test_openrlhf_tables_only_target_canonical_names() -> None:
    from grpokit.monitor.readers import OPENRLHF_NAMES

    for targets in OPENRLHF_NAMES.values():
        assert set(targets) <= CANONICAL


# ------------------------------------------------------------------------------------------- OpenRLHF console


def test_openrlhf_console_status_lines_of_a_real_run() -> None:
    """`✨ Global step N: {...}` lines (OpenRLHF since April 2025) among Ray and vLLM output: the step is N and every
    status name OpenRLHF shares with TensorBoard maps as it does there."""
    log = read_run(REAL / "openrlhf_grpo_gptoss_truncated_last_steps")
    assert log.source == "openrlhf-console" and log.flavor == "openrlhf" and log.steps == [84, 85]
    assert _values(log, "reward/mean") == pytest.approx([0.5703125, 0.45703125])
    assert _values(log, "length/truncation_rate") == pytest.approx([0.88671875, 0.90625])
    assert _values(log, "length/mean") == pytest.approx([7641.890625, 7718.1484375])
    assert _values(log, "actor/clipfrac") == pytest.approx([0.06995614752941037, 0.04411795508349314])
    assert _values(log, "actor/ppo_kl") == pytest.approx([0.10706792049018077, 0.02901056964765303])
    assert _values(log, "actor/pg_loss") == pytest.approx([0.19975168246310204, 0.07258933619596064])
    assert _values(log, "kl_ref/k1") == [0.0, 0.0]
    assert _values(log, "train/lr") == pytest.approx([1e-5, 1e-5])
    # OpenRLHF's mean within-group reward std is not grpokit's batch reward std; entropy was not computed
    assert "group_reward_std" in log.raw_names and "reward/std" not in log.available
    assert "entropy/token_mean" not in log.available and log.notes == []
    other = read_run(REAL / "openrlhf_grpo_gptoss_last_step_lr0")  # another run of the same fork, its last step
    assert other.steps == [47] and _values(other, "train/lr") == [0.0]
    assert _values(other, "length/truncation_rate") == pytest.approx([0.0390625])


def test_openrlhf_console_that_crashed_inside_its_first_update() -> None:
    """Only the actor's `Train epoch` bar (short names, one postfix per micro-batch) and a crash at micro-batch 8
    of 16: no step completed, and the notes say how far it got and why it stopped."""
    log = read_run(REAL / "openrlhf_grpo_tdc_nan_in_step1")
    assert log.source == "openrlhf-console" and log.rows == []
    assert any("stopped at micro-batch 8 of 16 (epoch 1)" in n for n in log.notes)
    # the worker's own error, not the Ray wrapper around it
    assert any("error: ValueError: Non-finite actor_loss detected. step=8" in n for n in log.notes)


OPENRLHF_2024 = """Namespace(pretrain='Qwen/Qwen2.5-0.5B', max_epochs=1, rollout_batch_size=8, n_samples_per_prompt=4, \
train_batch_size=16, eps_clip=0.2, advantage_estimator='group_norm', entropy_loss_coef=None)
(ActorModelRayActor pid=11) Episode [1/2]:   0%|          | 0/3 [00:00<?, ?it/s]
(ActorModelRayActor pid=11) Train epoch [1/1]:   0%|          | 0/2 [00:00<?, ?it/s]
(ActorModelRayActor pid=11) Train epoch [1/1]:  50%|#####     | 1/2 [00:01<00:01, 1.0s/it, pg=0.1, rm=0.5, ret=0.4, \
glen=100, tlen=150, kl=0.001, act_lr=1e-06]
(CriticModelRayActor pid=12) Train epoch [1/1]:  50%|#####     | 1/2 [00:01<00:01, 1.0s/it, cri=0.3, vals=0.2, \
cri_lr=9e-06]
(ActorModelRayActor pid=11) Train epoch [1/1]: 100%|##########| 2/2 [00:02<00:00, 1.0s/it, pg=0.3, rm=0.7, ret=0.6, \
glen=120, tlen=170, kl=0.003, act_lr=1e-06]
(ActorModelRayActor pid=11) Episode [1/2]:  33%|###3      | 1/3 [00:05<00:10, 5.0s/it, policy_loss=0.2, kl=0.002, \
reward=0.6, return=0.5, response_length=110, total_length=160, actor_lr=1e-06, critic_loss=0.3]
(ActorModelRayActor pid=11) Episode [1/2]:  67%|######6   | 2/3 [00:10<00:05, 5.0s/it, policy_loss=0.2, kl=0.002, \
reward=0.6, return=0.5, response_length=110, total_length=160, actor_lr=1e-06, critic_loss=0.3]
(ActorModelRayActor pid=11) Episode [1/2]:  67%|######6   | 2/3 [00:11<00:05, 5.0s/it, policy_loss=-0.1, kl=0.004, \
reward=0.8, return=0.7, response_length=90, total_length=140, actor_lr=1e-06, critic_loss=0.2]
(ActorModelRayActor pid=11) Episode [1/2]: 100%|##########| 3/3 [00:15<00:00, 5.0s/it, policy_loss=-0.1, kl=0.004, \
reward=0.8, return=0.7, response_length=90, total_length=140, actor_lr=1e-06, critic_loss=0.2]
"""


def test_openrlhf_console_episode_bar_status_numbered_by_update(tmp_path) -> None:
    """2023 to early 2025: the Episode bar's postfix is the full status of the last PPO update and stays on the bar
    until the next one, so each distinct postfix is one step; the arguments OpenRLHF prints give the context."""
    f = tmp_path / "train_ppo_ray.log"
    f.write_text(OPENRLHF_2024)
    log = read_run(f)
    assert log.source == "openrlhf-console" and log.steps == [1, 2]
    assert _values(log, "reward/mean") == pytest.approx([0.6, 0.8])
    assert _values(log, "kl_ref/k1") == pytest.approx([0.002, 0.004])
    assert _values(log, "critic/value_loss") == pytest.approx([0.3, 0.2])
    assert any("numbered in order from the Episode bar" in n for n in log.notes)
    assert log.context == {
        "trainer": "openrlhf",
        "epochs": 1,
        "mini_batches": 2,
        "eps_low": 0.2,
        "eps_high": 0.2,
        "recipe": "group_norm",
    }


def test_openrlhf_console_train_epoch_bars_alone(tmp_path) -> None:
    """A log with only the `Train epoch` bars (short names `pg=, rm=, glen=`): a completed pass is a step whose
    values are the means over its micro-batches; the critic's bar is not the actor's."""
    text = "\n".join(line for line in OPENRLHF_2024.splitlines() if "Episode" not in line)
    f = tmp_path / "stderr.log"
    f.write_text(text + "\n" + text.split("\n", 2)[2])  # the bars of a second update
    log = read_run(f)
    assert log.source == "openrlhf-console" and log.steps == [1, 2]
    assert _values(log, "reward/mean") == pytest.approx([0.6, 0.6])
    assert _values(log, "actor/pg_loss") == pytest.approx([0.2, 0.2])
    assert _values(log, "length/mean") == pytest.approx([110.0, 110.0])
    assert "critic/value_loss" not in log.available
    assert any("mean of the micro-batch values" in n for n in log.notes)


def test_verl_in_reward_kl_is_the_kl_to_the_reference() -> None:
    """verl >= 0.3 with use_kl_in_reward logs the in-reward KL as `actor/reward_kl_penalty` (k1 with the default
    algorithm.kl_penalty), its coefficient as `actor/reward_kl_penalty_coeff` (not a KL: unmapped)."""
    log = read_run(REAL / "verl_grpo_retool_opd_qwen1p5b_10_steps")
    assert log.rows[1]["step"] == 1 and log.rows[1]["kl_ref/k1"] == pytest.approx(0.3142735958099365)
    assert "actor/reward_kl_penalty_coeff" in log.raw_names and "kl_ref/k1" in log.available
