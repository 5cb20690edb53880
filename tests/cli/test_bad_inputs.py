"""The bad-input matrix (issue 15): each hostile-but-realistic input gets its exact user-facing outcome.

Outcomes: one line naming the field / file / line and the fix with exit 2; a refusal of contradictory settings;
a counted, logged skip; or (runtime stops) one line with 130 / 143 / 1 — and nothing already written (metrics,
checkpoints) is lost or duplicated. Setup errors run the real `grpokit.cli.main.main` in this process (they stop
before a model loads); training, signals, resume and disk-full cases run the real command line in a subprocess
with the tiny model.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from grpokit.cli.main import main
from grpokit.config import build_config
from grpokit.monitor.detectors import Monitor
from grpokit.run.directory import claim_run_dir

TESTS = Path(__file__).parents[1]
SMALL = [
    "--model",
    "tiny",
    "--set",
    "model.precision=fp32",
    "--set",
    "rollout.prompts_per_step=2",
    "--set",
    "rollout.group_size=2",
    "--set",
    "rollout.max_new_tokens=4",
    "--set",
    "data.eval_size=2",
    "--set",
    "train.eval_every=0",
    "--set",  # optimizer state in a finished run's last checkpoint too: these runs are continued with --steps
    "train.save_only_model=false",
]
SLOW_REWARD = """
import time
def slow_vowels(completions, examples):
    time.sleep(0.3)
    return [sum(c in "aeiou" for c in t) / max(1, len(t)) for t in completions]
"""


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def one_error_line(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert "Traceback" not in err, err
    return lines[-1]


def grpokit(*args: str, cwd: Path | None = None, extra_path: Path | None = None, **kw: object) -> subprocess.Popen:
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(TESTS), str(extra_path or "")])),
    }
    return subprocess.Popen(
        [sys.executable, "-m", "grpokit.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=cwd,
        **kw,  # type: ignore[arg-type]
    )


def finish(p: subprocess.Popen, timeout: float = 300) -> tuple[int, str, str]:
    out, err = p.communicate(timeout=timeout)
    return p.returncode, out, err


def metric_steps(run: Path) -> list[int]:
    return [json.loads(x)["step"] for x in (run / "metrics.jsonl").read_text().splitlines() if "time/step" in x]


def checkpoints(run: Path) -> list[str]:
    root = run / "checkpoints"
    return sorted(p.name for p in root.iterdir() if p.name.startswith("step_")) if root.exists() else []


# ------------------------------------------------------------------------------------ config: refusals (exit 2)

CONFIG_CASES = [
    ("rollout.group_size=1", "rollout.group_size=1 with algo.advantage='grpo'", "use rollout.group_size>=2"),
    ("algo.eps_low=1.5", "algo.eps_low=1.5 is invalid", "use a value in [0, 1]"),
    ("algo.reference=none", "needs a reference policy but algo.reference=none", "set algo.reference=frozen"),
    ("data.eval_size=0", "data.eval_size=0 is invalid", "use 1 or more"),
    ("data.on_long_prompt=truncate", "data.on_long_prompt='truncate' is invalid", "use skip"),
    ("data.max_prompt_tokens=0", "data.max_prompt_tokens=0 is invalid", "or null for no cap"),
    ("train.on_divergence=ignore", "train.on_divergence='ignore' is invalid", "use stop"),
    ("train.save_every=-1", "train.save_every=-1 is invalid", "use 0 (off) or more"),
    ("reward.timeout_s=0", "reward.timeout_s=0.0 is invalid", "use > 0"),
    ("train.lr=abc", "train.lr='abc' must be a number", ""),
    ("train.stepz=3", "unknown config key 'train.stepz'", "Did you mean 'train.steps'"),
]


@pytest.mark.parametrize(("override", "needle", "fix"), CONFIG_CASES, ids=[c[0] for c in CONFIG_CASES])
def test_contradictory_or_invalid_setting_is_one_line_exit_2(
    override: str, needle: str, fix: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    extra = ["--set", "algo.kl_coef=0.5"] if override == "algo.reference=none" else []
    code, _, err = cli(capsys, "train", "--model", "tiny", "--out", str(tmp_path), "--set", override, *extra)
    assert code == 2
    line = one_error_line(err)
    assert needle in line and fix in line and len(err.strip().splitlines()) == 1
    assert not any(tmp_path.iterdir())  # nothing was started


def test_dapo_with_one_sample_per_prompt_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = cli(capsys, "train", "--recipe", "dapo", "--out", str(tmp_path), "--set", "rollout.group_size=1")
    assert code == 2 and "algo.group_filter=dynamic_sampling" in err and "every update would be skipped" in err


def test_gspo_with_dual_clip_is_refused_naming_the_component(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, _, err = cli(capsys, "train", "--recipe", "gspo", "--out", str(tmp_path), "--set", "algo.dual_clip_c=3")
    assert code == 2 and "algo.dual_clip_c=3.0 is not a parameter" in err and "policy_loss 'gspo'" in err


def test_ppo_with_one_sample_per_prompt_is_allowed() -> None:
    assert build_config("ppo", overrides=["rollout.group_size=1"]).rollout.group_size == 1  # a critic's baseline


def test_eval_with_negative_n_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:  # the flag's own range check, before any model is built
        cli(capsys, "eval", "--model", "tiny", "--n", "-5")
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "argument --n: -5 is out of range: use 1 or more" in err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("train:\n  steps: [1,\n", "line 3"),
        ("train: {steps: 1\n", "line 2"),
        ("- a\n- b\n", "expected config sections"),
    ],
)
def test_broken_config_file_names_the_file_and_line(
    text: str, needle: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = tmp_path / "my.yaml"
    f.write_text(text)
    code, _, err = cli(capsys, "train", "--model", "tiny", "--config", str(f), "--out", str(tmp_path / "runs"))
    assert code == 2 and str(f) in err and needle in err and "Traceback" not in err


def test_yaml_recipe_path_with_a_syntax_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "recipe.yaml"
    f.write_text("algo:\n  eps_high: [0.2\n")
    code, _, err = cli(capsys, "train", "--recipe", str(f), "--out", str(tmp_path))
    assert code == 2 and f"{f}, line 3" in err and "YAML syntax error" in err


# ----------------------------------------------------------------------------------- config: unused settings warned


@pytest.mark.parametrize(
    ("recipe", "override", "needle"),
    [
        ("grpo", "algo.ds_oversample=2", "algo.ds_oversample=2.0 has no effect: algo.group_filter is 'all'"),
        ("dapo", "algo.group_filter=all", "algo.ds_oversample=3.0 has no effect"),
        ("grpo", "critic.lr=0.1", "critic.lr=0.1 has no effect: recipe 'grpo' trains no critic"),
        ("grpo", "agent.max_turns=2", "agent.max_turns=2 has no effect: the run is single-turn"),
    ],
)
def test_settings_that_do_nothing_are_warned(recipe: str, override: str, needle: str) -> None:
    cfg = build_config(recipe, overrides=[override])
    assert len(cfg.warnings) == 1 and needle in cfg.warnings[0]
    assert build_config(recipe).warnings == []


# ---------------------------------------------------------------------------------------------------------- data


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def sums(n: int) -> list[dict]:
    return [{"prompt": f"What is {i} plus {i}?", "answer": str(2 * i)} for i in range(n)]


def test_null_answer_names_file_line_and_fix(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = write_jsonl(tmp_path / "d.jsonl", [*sums(3), {"prompt": "1+1?", "answer": None}])
    code, _, err = cli(capsys, "train", *SMALL, "--task", str(f), "--out", str(tmp_path / "runs"))
    line = one_error_line(err)
    assert code == 2 and f"{f}, line 4: field 'answer' is null" in line and "data.answer_key=null" in line


def test_non_utf8_data_names_file_and_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "latin1.jsonl"
    f.write_bytes(b'{"prompt": "1+1?", "answer": "2"}\n{"prompt": "caf\xe9?", "answer": "3"}\n')
    code, _, err = cli(capsys, "train", *SMALL, "--task", str(f), "--out", str(tmp_path / "runs"))
    line = one_error_line(err)
    assert code == 2 and f"{f}, line 2: not UTF-8 text (byte 0xe9 at column 16)" in line and "UTF-8" in line


def test_invalid_json_line_names_file_and_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "d.jsonl"
    f.write_text('{"prompt": "1+1?", "answer": "2"}\n{"prompt": "2+2?", "answer": \n')
    code, _, err = cli(capsys, "train", *SMALL, "--task", str(f), "--out", str(tmp_path / "runs"))
    assert code == 2 and f"{f}, line 2: invalid JSON" in one_error_line(err)


def test_one_example_file_trains_and_says_there_is_no_held_out_set(tmp_path: Path) -> None:
    f = write_jsonl(tmp_path / "one.jsonl", sums(1))
    code, out, err = finish(grpokit("train", *SMALL, "--task", str(f), "--steps", "1", "--out", str(tmp_path)))
    assert code == 0, err
    assert "held-out accuracy before training: not measured (no held-out prompts" in out and "nan" not in out


def test_long_prompts_are_skipped_counted_and_logged(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    long = {"prompt": "count: " + "one two three " * 100, "answer": "1"}
    f = write_jsonl(tmp_path / "d.jsonl", [*sums(12), long])
    from grpokit.training.session import open_session

    cfg = build_config("grpo", overrides=["model.name=tiny", f"data.task={f}", "data.max_prompt_tokens=100"])
    s = open_session(cfg)
    s.close()
    lim = s.data.limit
    assert lim is not None and lim.tokens == 100 and sum(len(v) for v in lim.skipped.values()) == 1
    assert "d/13" in lim.summary() and "data.max_prompt_tokens=100" in lim.summary()
    assert all(len(ids) <= 100 for ids in s.data.train_tokens + s.data.held_out_tokens)
    assert len(s.data.train) + len(s.data.held_out) == 12


def test_long_prompt_is_an_error_by_switch(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = write_jsonl(tmp_path / "d.jsonl", [{"prompt": "x " * 400, "answer": "1"}, *sums(12)])
    args = ["--set", "data.max_prompt_tokens=100", "--set", "data.on_long_prompt=error"]
    code, _, err = cli(capsys, "train", *SMALL, "--task", str(f), *args, "--out", str(tmp_path / "runs"))
    line = one_error_line(err)
    assert code == 2 and "example d/1: the prompt has" in line and "over the limit of 100" in line


def test_response_budget_beyond_the_model_context_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = cli(capsys, "train", *SMALL, "--set", "rollout.max_new_tokens=5000", "--out", str(tmp_path))
    assert code == 2 and "rollout.max_new_tokens=5000 leaves no room for a prompt" in one_error_line(err)


def test_a_10_mb_prompt_is_skipped_without_blowing_memory(tmp_path: Path) -> None:
    f = write_jsonl(tmp_path / "d.jsonl", [*sums(12), {"prompt": "x " * 5_000_000, "answer": "1"}])
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t0 = time.time()
    code, out, err = finish(grpokit("train", *SMALL, "--task", str(f), "--steps", "1", "--out", str(tmp_path)))
    peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    assert code == 0, err
    assert "skipped 1 training prompts over 4092 tokens" in err or "skipped 1 held-out prompts" in err
    assert peak_mb < 2000 or before / 1024 >= 2000, peak_mb  # unbounded, this run went past 10 GB
    assert time.time() - t0 < 120


# ------------------------------------------------------------------------------------------------ reward outputs


def test_reward_raising_keyboard_interrupt_is_a_counted_failure(tmp_path: Path) -> None:
    (tmp_path / "kbd_reward.py").write_text("def kbd(completions, examples):\n    raise KeyboardInterrupt\n")
    p = grpokit(
        "train", *SMALL, "--steps", "1", "--out", str(tmp_path), "--name", "r",
        "--set", "reward.functions=[kbd_reward:kbd]", "--set", "reward.max_fail_frac=1",
        extra_path=tmp_path,
    )  # fmt: skip
    code, _, err = finish(p)
    assert code == 0 and "Traceback" not in err
    lines = [ln for ln in err.splitlines() if "KeyboardInterrupt" in ln]
    # one warning line per scored batch, the step's and the held-out evaluation's; the evaluation after the step
    # logs the very same record as the one before it, which is counted, not printed again (common/safe_logging.py)
    assert len(lines) == 2 and len(set(lines)) == 2, lines
    assert all("reward failure(s)" in ln and "(at kbd_reward.py:2 in kbd)" in ln for ln in lines)
    assert "grpokit: 1 repeat(s) of 1 log record(s) already shown were not shown again" in err
    row = [json.loads(x) for x in (tmp_path / "r" / "metrics.jsonl").read_text().splitlines() if "time/step" in x][0]
    assert row["reward/fail_frac"] == 1.0


def test_reward_of_1e30_is_a_failure_not_a_display(tmp_path: Path) -> None:
    (tmp_path / "huge_reward.py").write_text("def huge(completions, examples):\n    return [1e30] * len(completions)\n")
    p = grpokit(
        "train", *SMALL, "--steps", "1", "--out", str(tmp_path), "--name", "r",
        "--set", "reward.functions=[huge_reward:huge]", "--set", "reward.max_fail_frac=1",
        extra_path=tmp_path,
    )  # fmt: skip
    code, out, err = finish(p)
    assert code == 0, err
    assert "1000000" not in out  # no "acc 100000001504746621987668885504000%"
    row = [json.loads(x) for x in (tmp_path / "r" / "metrics.jsonl").read_text().splitlines() if "time/step" in x][0]
    assert row["reward/fail_frac"] == 1.0


# ------------------------------------------------------------------------------------------- runtime interrupts


def descendants(pid: int) -> set[int]:
    """Every live process below `pid` (by parent links in /proc)."""
    parents: dict[int, int] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                parents[int(d.name)] = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    out, frontier = set(), {pid}
    while frontier:
        frontier = {c for c, p in parents.items() if p in frontier} - out
        out |= frontier
    return out


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def start_slow_run(tmp_path: Path, steps: int = 50) -> tuple[subprocess.Popen, Path]:
    (tmp_path / "slow_reward.py").write_text(SLOW_REWARD)
    run = tmp_path / "run"
    p = grpokit(
        "train", *SMALL, "--steps", str(steps), "--out", str(tmp_path), "--name", "run",
        "--set", "reward.functions=[slow_reward:slow_vowels]", "--set", "train.save_every=100",
        extra_path=tmp_path,
    )  # fmt: skip
    deadline = time.time() + 180
    while time.time() < deadline:
        m = run / "metrics.jsonl"
        if m.exists() and "time/step" in m.read_text():
            return p, run
        assert p.poll() is None, p.communicate()
        time.sleep(0.2)
    p.kill()
    raise AssertionError("the run did not reach its first step")


@pytest.mark.parametrize(("sig", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_signal_finishes_the_step_checkpoints_and_closes_the_reward_worker(
    sig: int, status: int, tmp_path: Path
) -> None:
    p, run = start_slow_run(tmp_path)
    workers = descendants(p.pid)
    assert workers  # the reward worker (and its sandbox) run below the trainer
    p.send_signal(sig)
    code, _, err = finish(p, 120)
    assert code == status, err
    last = one_error_line(err)
    name = signal.Signals(sig).name
    steps = metric_steps(run)
    assert last == (
        f"grpokit: stopped by {name} after step {steps[-1]}; checkpoint {run}/checkpoints/step_{steps[-1]}; "
        f"continue with: grpokit train --resume {run}"
    )
    assert checkpoints(run) == [f"step_{steps[-1]}"] and steps == list(range(1, steps[-1] + 1))
    time.sleep(0.5)
    assert not [w for w in workers if alive(w)]


def test_second_sigint_stops_at_once(tmp_path: Path) -> None:
    p, run = start_slow_run(tmp_path)
    p.send_signal(signal.SIGINT)
    time.sleep(0.05)
    p.send_signal(signal.SIGINT)
    t0 = time.time()
    code, _, err = finish(p, 60)
    assert code == 130 and time.time() - t0 < 20
    assert one_error_line(err) == "grpokit: interrupted; stopped at once without a checkpoint of the current step"


def test_divergence_stops_naming_the_learning_rate_without_a_dead_checkpoint(tmp_path: Path) -> None:
    args = ["--set", "reward.functions=[toy_rewards:vowel_frac]", "--set", "train.save_every=1"]
    code, _, err = finish(grpokit("train", *SMALL, *args, "--steps", "2", "--out", str(tmp_path), "--name", "run"))
    assert code == 0, err
    run = tmp_path / "run"
    p = grpokit(
        "train", "--resume", str(run), "--steps", "5", "--set", "train.lr=1000", "--set", "train.max_grad_norm=1e9"
    )
    code, out, err = finish(p)
    assert code == 1
    line = one_error_line(err)
    assert line.startswith("error: the run diverged at step 3: weights exploded")
    assert "train.lr=1000" in line and f"last healthy checkpoint {run}/checkpoints/step_2" in line
    assert "resume: override train.lr: 2e-05 -> 1000.0" in out
    assert checkpoints(run) == ["step_1", "step_2"]  # no checkpoint of the dead model
    alerts = [json.loads(x) for x in (run / "alerts.jsonl").read_text().splitlines()]
    div = [a for a in alerts if a["detector"] == "divergence"]
    assert len(div) == 1 and div[0]["severity"] == "critical" and "train.lr" in div[0]["fix"]


def test_divergence_switch_lets_a_user_continue(tmp_path: Path) -> None:
    args = ["--set", "train.lr=1000", "--set", "train.on_divergence=continue", "--set", "train.save_every=1"]
    args += ["--set", "reward.functions=[toy_rewards:vowel_frac]"]
    code, _, err = finish(grpokit("train", *SMALL, *args, "--steps", "2", "--out", str(tmp_path), "--name", "run"))
    assert code == 0, err
    assert checkpoints(tmp_path / "run") == ["step_1", "step_2"]


def test_entropy_pinned_at_its_maximum_with_zero_gradient_is_divergence() -> None:
    mon = Monitor({"max_entropy": 10.8027, "lr": 1000.0, "last_checkpoint": "runs/x/checkpoints/step_4"})
    rows = [{"entropy/token_mean": 2.0, "train/grad_norm": 1.0}] + [
        {"entropy/token_mean": 10.8026, "train/grad_norm": 0.0}
    ] * 2
    alerts = [a for i, r in enumerate(rows, 1) for a in mon.observe(i, r) if a.detector == "divergence"]
    assert len(alerts) == 1 and alerts[0].fired_at == 3 and "entropy pinned at its maximum" in alerts[0].message
    assert "train.lr=1000" in alerts[0].fix and "runs/x/checkpoints/step_4" in alerts[0].fix


def test_disk_full_is_one_line(tmp_path: Path) -> None:
    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writes past the limit fail with EFBIG instead of killing
        resource.setrlimit(resource.RLIMIT_FSIZE, (200_000, 200_000))

    args = ["--set", "train.save_every=1", "--steps", "2", "--out", str(tmp_path), "--name", "run"]
    code, _, err = finish(grpokit("train", *SMALL, *args, preexec_fn=limit))
    assert code == 1, err
    line = one_error_line(err)
    assert line.startswith("error: File too large") and "free disk space" in line and "checkpoint is intact" in line


# ---------------------------------------------------------------------------------------------------------- resume


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-step run with a checkpoint at each step (copied by each test that changes it)."""
    out = tmp_path_factory.mktemp("trained")
    args = ["--set", "train.save_every=1", "--steps", "2", "--out", str(out), "--name", "run"]
    code, _, err = finish(grpokit("train", *SMALL, *args))
    assert code == 0, err
    return out / "run"


def copy_run(src: Path, dst: Path) -> Path:
    import shutil

    shutil.copytree(src, dst)
    return dst


def test_resume_drops_a_torn_last_line_and_never_duplicates_rows(trained: Path, tmp_path: Path) -> None:
    run = copy_run(trained, tmp_path / "run")
    with (run / "metrics.jsonl").open("a") as f:
        f.write('{"step": 3, "reward/mean": 0.')  # killed mid-write
    code, out, err = finish(grpokit("train", "--resume", str(run), "--steps", "3"))
    assert code == 0, err
    assert "resume: metrics.jsonl: dropped 1 torn line(s) (its last line" in out
    assert "resume: override train.steps: 2 -> 3" in out and "resumed from step 2" in out
    assert metric_steps(run) == [1, 2, 3]


def test_resume_without_a_checkpoint_is_refused(
    trained: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text((trained / "config.yaml").read_text())
    rows = (trained / "metrics.jsonl").read_text()
    (run / "metrics.jsonl").write_text(rows)
    code, _, err = cli(capsys, "train", "--resume", str(run))
    assert code == 2 and "no checkpoint in" in one_error_line(err) and "start the run again" in err
    assert (run / "metrics.jsonl").read_text() == rows  # nothing written was touched


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--set", "algo.eps_high=0.3"], "--set algo.eps_high=0.3 cannot change a resumed run"),
        (["--set", "rollout.group_size=8"], "--set rollout.group_size=8 cannot change a resumed run"),
        (["--model", "smollm2-135m-instruct"], "--model smollm2-135m-instruct differs from the resumed run's model"),
        (["--recipe", "dapo"], "--recipe dapo differs from the resumed run's recipe 'grpo'"),
        (["--task", "mul1"], "--task mul1 differs"),
    ],
)
def test_resume_refuses_changes_to_model_data_or_algorithm(
    args: list[str], needle: str, trained: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = (trained / "metrics.jsonl").read_text()
    code, _, err = cli(capsys, "train", "--resume", str(trained), *args)
    assert code == 2 and needle in one_error_line(err)
    assert (trained / "metrics.jsonl").read_text() == before


def test_resume_of_a_folder_without_a_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = cli(capsys, "train", "--resume", str(tmp_path))
    assert code == 2 and "no config.yaml there" in one_error_line(err)


def test_resume_replays_alert_history_instead_of_raising_it_again(trained: Path, tmp_path: Path) -> None:
    import yaml

    from grpokit.config import config_from_dict
    from grpokit.training.resume import replay_monitor
    from grpokit.training.trainer import Trainer

    run = copy_run(trained, tmp_path / "run")
    cfg = config_from_dict(yaml.safe_load((run / "config.yaml").read_text()))
    t = Trainer(cfg, run)
    try:
        t.restore()
        assert replay_monitor(t) == 2
        # a fresh monitor would raise advantage collapse on a run whose groups are all zero-variance again
        fired = {a.detector for a in t.monitor.alerts}
        logged = (
            {json.loads(x)["detector"] for x in (run / "alerts.jsonl").read_text().splitlines()}
            if (run / "alerts.jsonl").exists()
            else set()
        )
        assert fired == logged
    finally:
        t.rewards.close()


# ----------------------------------------------------------------------------------------------- doctor / report


@pytest.mark.parametrize("command", ["doctor", "report"])
@pytest.mark.parametrize(
    "content", [b"hello world\nnot json\n", b"\x00\x01\xff garbage {{\n", b'{"a": 1}\n{"step": "x"}\n', b""]
)
def test_doctor_and_report_on_a_garbage_log(
    command: str, content: bytes, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "metrics.jsonl").write_bytes(content)
    code, out, err = cli(capsys, command, str(tmp_path))
    assert code == 2 and "No failure mode detected" not in out
    line = one_error_line(err)
    assert str(tmp_path) in line and ("not a supported training log" in line or "no training step in this log" in line)


def test_report_without_matplotlib_says_how_to_get_it(trained: Path, tmp_path: Path) -> None:
    code = "import sys; sys.modules['matplotlib'] = None; from grpokit.cli import main; sys.exit(main(sys.argv[1:]))"
    p = subprocess.run(
        [sys.executable, "-c", code, "report", str(trained), "--out", str(tmp_path / "rep")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 2
    assert (
        one_error_line(p.stderr).startswith("error: the report's charts need matplotlib") and "pip install" in p.stderr
    )


# ------------------------------------------------------------------------------------------------- run directories


def test_runs_started_at_once_never_share_a_directory(tmp_path: Path) -> None:
    got: list[Path] = []
    barrier = threading.Barrier(8)

    def start() -> None:
        barrier.wait()
        got.append(claim_run_dir(tmp_path / "grpo-add1-20260101-000000"))

    threads = [threading.Thread(target=start) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(got)) == 8 and all(p.is_dir() for p in got)
    assert claim_run_dir(tmp_path / "fresh") == tmp_path / "fresh"  # an unused name is taken as given


# ------------------------------------------------------------------------------ issue 29: data and work never lost


def write_charts_dir(path: Path) -> Path:
    """A folder of the user's own pictures (and a file named like one of grpokit's charts in a sub-folder)."""
    path.mkdir(parents=True)
    (path / "holiday.png").write_bytes(b"\x89PNG holiday")
    (path / "diagram.png").write_bytes(b"\x89PNG diagram")
    return path


@pytest.mark.slow
@pytest.mark.parametrize("command", ["report", "compare"])
def test_report_and_compare_never_delete_files_they_did_not_write(
    command: str, trained: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = write_charts_dir(tmp_path / "pictures")
    for _ in range(2):  # the second run replaces the charts of the first, and only them
        code, _, err = cli(capsys, command, str(trained), "--out", str(out))
        assert code == 0, err
        assert (out / "holiday.png").read_bytes() == b"\x89PNG holiday"
        assert (out / "diagram.png").read_bytes() == b"\x89PNG diagram"
    charts = sorted(p.name for p in out.glob("[0-9][0-9]_*.png"))
    assert charts and (out / f"{command}.html").is_file()
    stale = out / "99_an_older_chart.png"  # a chart an earlier version drew: listed as grpokit's, so removed
    stale.write_bytes(b"old")
    manifest = out / f".grpokit-{command}.json"
    manifest.write_text(json.dumps([*json.loads(manifest.read_text()), stale.name, "holiday.png", "../x.png"]))
    code, _, err = cli(capsys, command, str(trained), "--out", str(out))
    assert code == 0, err
    assert not stale.exists() and (out / "holiday.png").exists()  # a forged list reaches only grpokit's names


@pytest.mark.slow
def test_report_refuses_to_overwrite_a_file_it_did_not_write(
    trained: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = write_charts_dir(tmp_path / "pictures")
    (out / "report.html").write_text("my own page")
    code, _, err = cli(capsys, "report", str(trained), "--out", str(out))
    assert code == 2 and "report.html is already there and grpokit report did not write it" in one_error_line(err)
    assert (out / "report.html").read_text() == "my own page" and len(list(out.iterdir())) == 3


@pytest.mark.parametrize(
    ("flag", "needle"),
    [
        ("--output-dir", "--output-dir {value} differs from the resumed run"),
        ("--out", "--out {value} cannot be combined with --resume"),
        ("--name", "--name {value} cannot be combined with --resume"),
    ],
)
def test_resume_with_another_directory_is_refused(
    flag: str, needle: str, trained: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    value = str(tmp_path / "elsewhere") if flag != "--name" else "other"
    before = (trained / "metrics.jsonl").read_text()
    code, _, err = cli(capsys, "train", "--resume", str(trained), flag, value)
    assert code == 2 and needle.format(value=value) in one_error_line(err)
    assert (trained / "metrics.jsonl").read_text() == before and not (tmp_path / "elsewhere").exists()


def test_bare_resume_with_output_dir_is_that_run(trained: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = cli(capsys, "train", "--resume", "--output-dir", str(trained), "--set", "algo.eps_high=0.3")
    assert code == 2 and "cannot change a resumed run" in one_error_line(err)  # got past the location check


@pytest.mark.slow
def test_two_resumes_at_once_one_trains_the_other_is_refused(trained: Path, tmp_path: Path) -> None:
    run = copy_run(trained, tmp_path / "run")
    procs = [grpokit("train", "--resume", str(run), "--steps", "4") for _ in range(2)]
    results = sorted(finish(p) for p in procs)
    (ok, _, ok_err), (refused, _, err) = results
    assert ok == 0, ok_err
    assert refused == 2 and "the run is in use by grpokit process" in one_error_line(err)
    assert metric_steps(run) == [1, 2, 3, 4]  # not [1, 2, 4, 3, 4]


def test_a_resume_of_a_run_still_training_is_refused(
    trained: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from grpokit.run.directory import MARKER, process_start

    run = copy_run(trained, tmp_path / "run")
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        claim = {"pid": holder.pid, "start": process_start(holder.pid), "dir": str(run.resolve())}
        (run / MARKER).write_text(json.dumps(claim))
        before = (run / "metrics.jsonl").read_text()
        code, _, err = cli(capsys, "train", "--resume", str(run), "--steps", "3")
        assert code == 2 and f"in use by grpokit process {holder.pid}" in one_error_line(err)
        assert (run / "metrics.jsonl").read_text() == before
    finally:
        holder.kill()
        holder.wait()


def test_a_claim_left_by_a_dead_process_is_taken_over(tmp_path: Path) -> None:
    from grpokit.run.directory import (
        MARKER,
        RunInUseError,
        claim_existing_run,
        process_start,
        read_claim,
        release_claim,
    )

    run = tmp_path / "run"
    run.mkdir()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (run / MARKER).write_text(json.dumps({"pid": dead.pid, "start": "1", "dir": str(run.resolve())}))
    claim_existing_run(run)  # a crashed run can be resumed
    assert read_claim(run)["pid"] == os.getpid()
    release_claim(run)
    assert read_claim(run) is None
    (run / MARKER).write_text(f"{dead.pid}\n")  # a marker from before claims were records: a bare pid
    claim_existing_run(run)
    copy = tmp_path / "copy"  # a run directory copied while its run trains: the copy is not in use
    copy.mkdir()
    (copy / MARKER).write_text(json.dumps({"pid": os.getppid(), "start": process_start(os.getppid()), "dir": "/x"}))
    claim_existing_run(copy)
    live = {"pid": os.getppid(), "start": process_start(os.getppid()), "dir": str(copy.resolve())}
    (copy / MARKER).write_text(json.dumps(live))
    with pytest.raises(RunInUseError, match=f"in use by grpokit process {os.getppid()}"):
        claim_existing_run(copy)


def test_output_dir_left_claimed_by_a_dead_process_is_taken_over(tmp_path: Path) -> None:
    from grpokit.run.directory import MARKER, process_start, read_claim
    from grpokit.run.output_dir import OutputDirError, claim_output_dir

    run = tmp_path / "run"
    run.mkdir()
    (run / MARKER).write_text(json.dumps({"pid": 2**22 + 1, "start": "1", "dir": str(run.resolve())}))
    assert claim_output_dir(run) == run and read_claim(run)["pid"] == os.getpid()
    (run / MARKER).write_text(json.dumps({"pid": os.getppid(), "start": process_start(os.getppid())}))
    with pytest.raises(OutputDirError, match="claimed by another grpokit run that is still running"):
        claim_output_dir(run)


def test_resume_never_writes_through_a_symlinked_log(
    trained: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = copy_run(trained, tmp_path / "run")
    outside = tmp_path / "outside.jsonl"
    outside.write_text((run / "metrics.jsonl").read_text() + '{"step": 9, "not": "yours"}\n')
    before = outside.read_text()
    (run / "metrics.jsonl").unlink()
    (run / "metrics.jsonl").symlink_to(outside)
    code, _, err = cli(capsys, "train", "--resume", str(run), "--steps", "3")
    line = one_error_line(err)
    assert code == 2 and "metrics.jsonl is a symbolic link" in line and str(outside) in line
    assert outside.read_text() == before


# --------------------------------------------------------------- issue 29: crashes and hangs where a line was due


def deep_yaml(levels: int = 5000) -> str:
    return "train:\n  steps: " + "[" * levels + "]" * levels + "\n"


def alias_bomb() -> str:
    """`train.steps` as nine nested lists of ten aliases: 10^9 values once expanded."""
    levels = ["&a0 [" + ", ".join(["1"] * 10) + "]"]
    levels += [f"&a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 9)]
    return "train:\n  steps: [" + ", ".join(levels) + "]\n"


def test_deeply_nested_yaml_config_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "deep.yaml"
    f.write_text(deep_yaml())
    code, _, err = cli(capsys, "train", "--model", "tiny", "--config", str(f), "--out", str(tmp_path / "runs"))
    line = one_error_line(err)
    assert code == 2 and f"{f}, line 2" in line and "nested deeper than 64 levels" in line
    code, _, err = cli(capsys, "train", "--model", "tiny", "--set", "train.steps=" + "[" * 5000, "--out", str(tmp_path))
    assert code == 2 and "nested deeper than 64 levels" in one_error_line(err)


@pytest.mark.slow
def test_yaml_alias_bomb_is_refused_in_bounded_time_and_memory(tmp_path: Path) -> None:
    f = tmp_path / "bomb.yaml"
    f.write_text(alias_bomb())
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t0 = time.time()
    code, _, err = finish(grpokit("train", "--model", "tiny", "--config", str(f), "--out", str(tmp_path)), 120)
    peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    assert code == 2 and "aliases expand it past 100000 values" in one_error_line(err)
    assert time.time() - t0 < 60 and (peak_mb < 2000 or before / 1024 >= 2000), peak_mb  # was: 120 s, 5.6 GiB


def break_state(run: Path, step: int, key: str) -> None:
    path = run / "checkpoints" / f"step_{step}" / "trainer_state" / "state.json"
    state = json.loads(path.read_text())
    del state[key]
    path.write_text(json.dumps(state))


def test_checkpoint_state_missing_a_key_is_named_not_a_key_error(
    trained: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = copy_run(trained, tmp_path / "run")
    for step in (1, 2):
        break_state(run, step, "data_position")
    code, _, err = cli(capsys, "train", "--resume", str(run), "--steps", "3")
    line = one_error_line(err)
    assert code == 1 and "no readable checkpoint" in line and "'data_position' is missing" in line


@pytest.mark.slow
def test_log_lines_that_are_json_but_not_rows_are_dropped_on_resume(trained: Path, tmp_path: Path) -> None:
    run = copy_run(trained, tmp_path / "run")
    rows = (run / "metrics.jsonl").read_text().splitlines()
    (run / "metrics.jsonl").write_text("\n".join([rows[0], "[1, 2]", '"text"', '{"step": "x"}', *rows[1:]]) + "\n")
    code, out, err = finish(grpokit("train", "--resume", str(run), "--steps", "3"))
    assert code == 0, err
    assert "resume: metrics.jsonl: dropped 3 line(s) that are not log rows (lines [2, 3, 4])" in out
    assert metric_steps(run) == [1, 2, 3]


def test_report_skips_completion_rows_without_a_step_and_says_so(
    trained: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = copy_run(trained, tmp_path / "run")
    with (run / "completions.jsonl").open("a") as f:
        f.write(json.dumps({"text": "no step", "reward": "high"}) + "\n")
        f.write(json.dumps({"step": "two", "text": "a step that is not a number"}) + "\n")
    code, out, err = cli(capsys, "report", str(run))
    assert code == 0, err
    page = (run / "report" / "report.html").read_text()
    assert "2 logged completion row(s) without a text or a step were left out" in page


@pytest.mark.slow
def test_doctor_reads_a_log_full_of_braces_in_linear_time(tmp_path: Path) -> None:
    log = tmp_path / "console.log"
    braces = "{'loss': 0.5, 'reward': 0.1, 'note': " + "}" * 200_000  # each '}' was one more parse of the prefix
    lines = [braces, "{'loss': 0.5, 'reward': 0.2, 'step': 1}", "1" * 200_000 + "/3 [", "x" * 200_000]
    log.write_text("\n".join(lines) + "\n")
    t0 = time.time()
    code, out, err = finish(grpokit("doctor", str(log)), 120)
    assert code in (0, 1) and "Traceback" not in err, err
    assert time.time() - t0 < 60  # was: past 120 s


@pytest.mark.slow
def test_sigterm_while_the_model_loads_is_one_line_and_leaves_no_run_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # grpokit.common.faults: SIGTERM before the model loads
    monkeypatch.setenv("GRPOKIT_TEST_KILL_AT", "setup:1:SIGTERM")
    p = grpokit("train", *SMALL, "--steps", "1", "--out", str(tmp_path / "runs"), "--name", "r")
    code, _, err = finish(p, 120)
    assert code == 143, err
    assert one_error_line(err).startswith("grpokit: stopped by SIGTERM while setting up")
    assert not (tmp_path / "runs" / "r").exists()


def test_output_dir_under_a_file_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "afile").write_text("x")
    code, _, err = cli(capsys, "train", *SMALL, "--output-dir", str(tmp_path / "afile" / "run"))
    line = one_error_line(err)
    assert code == 2 and f"--output-dir {tmp_path}/afile/run: is under {tmp_path}/afile, a file" in line


@pytest.mark.slow
def test_out_under_a_file_is_one_line_not_a_hang(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("x")
    code, _, err = finish(grpokit("train", *SMALL, "--out", str(tmp_path / "afile" / "runs")), 120)
    line = one_error_line(err)
    assert code == 2 and f"--out {tmp_path}/afile/runs: {tmp_path}/afile is a file, not a directory" in line


@pytest.mark.parametrize("content", ["", "   ", None])
def test_empty_chat_message_is_refused_as_an_empty_prompt_is(
    content: str | None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = {"prompt": [{"role": "system", "content": "be brief"}, {"role": "user", "content": content}], "answer": "2"}
    f = write_jsonl(tmp_path / "d.jsonl", [*sums(3), bad])
    code, _, err = cli(capsys, "train", *SMALL, "--task", str(f), "--out", str(tmp_path / "runs"))
    line = one_error_line(err)
    assert code == 2 and f"{f}, line 4: field 'prompt' message 1 has" in line
    assert ("an empty user 'content'" if content is not None else "no text 'content'") in line
