"""Readers: every supported log format read from real files into canonical per-step rows (no mocks)."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

from grpokit.monitor.readers import CANONICAL, READERS, TRL_NAMES, VERL_NAMES, RunLog, detect, read_run

LOGS = Path(__file__).parent / "fixtures" / "logs"
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
    assert list(READERS) == ["grpokit", "trl", "verl", "wandb", "console", "tensorboard"]


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
