"""Issue 39, the config-conversion and command-line part, each on a real artifact vendored byte for byte under
tests/fixtures/jobs39 (SOURCE.md): open-r1's recipes (`torch_dtype: bfloat16` + `bf16: true`, registry reward
names, a batch that divides on 7 processes), verl's `_generated_ppo_trainer.yaml` (an in-reward KL coefficient that
is off), and grpokit's own options against TRL flags in the same command."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from grpokit.cli.main import build_parser
from grpokit.cli.trl_flags import apply_trl_flags
from grpokit.config import Config, ConfigError, all_keys, build_config
from grpokit.config.compat import translate

FIXTURES = Path(__file__).parents[1] / "fixtures"
JOBS = FIXTURES / "jobs39"
CODE = JOBS / "open-r1" / "config_demo_code.yaml"
DEEPSEEK = JOBS / "open-r1" / "config_demo_deepseek.yaml"
OPEN_R1_SRC = FIXTURES / "field" / "open-r1"  # open-r1's rewards.py (tests/fixtures/field/open-r1/SOURCE.md)
VERL_YAML = FIXTURES / "field" / "verl" / "_generated_ppo_trainer.yaml"
KEYS = set(all_keys(Config()))
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
SHA256 = {
    CODE: "dcf30329610763e4bed3ad3c3687b06f86bfeae4ad890733df324453cadc79e6",
    DEEPSEEK: "b6a3a39004b25cd88ec7697c597c69df11c49684597313541aa5ee4d69a90fa5",
    JOBS / "verl" / "math_dataset.py": "5aed4c3126163723afe59e0bad225feb34978f33f7dd8f855fec228a859ee7c5",
    JOBS / "verl" / "run_qwen2-7b_math.sh": "69d18010e42b36cd055fcfc90f4811d1b517aa9f201930bce0ec7131343a23c6",
}


def load(path: Path) -> dict:
    return yaml.safe_load(path.read_text())


def parsed(*argv: str) -> argparse.Namespace:
    """The namespace `grpokit` runs a command with, TRL flags translated (what main() does before the command)."""
    args, extra = build_parser().parse_known_args(list(argv))
    apply_trl_flags(args, extra)
    return args


def config_of(args: argparse.Namespace) -> Config:
    direct = {"model.name": args.model, "data.task": args.task, "train.steps": args.steps}
    return build_config(args.recipe, overrides=args.set, config_file=args.config, **direct)


@pytest.fixture
def open_r1_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(OPEN_R1_SRC))


def test_the_vendored_artifacts_are_byte_for_byte() -> None:
    for path, digest in SHA256.items():
        assert hashlib.sha256(path.read_bytes()).hexdigest() == digest, f"{path} differs from its SOURCE"


# ---------------------------------------------------- item 3: torch_dtype bfloat16 + bf16 true, as TRL applies it


@pytest.mark.parametrize(
    ("dtype", "bf16", "want"),
    [("bfloat16", True, ("bfloat16", "bf16")), ("bfloat16", False, ("bfloat16", "bf16")),
     ("float32", True, ("auto", "bf16-autocast")), ("float32", False, ("float32", "fp32"))],
)  # fmt: skip
def test_torch_dtype_with_bf16_is_what_trl_does_with_the_two(dtype: str, bf16: bool, want: tuple) -> None:
    t = translate({**load(DEEPSEEK), "torch_dtype": dtype, "bf16": bf16}, "r.yaml", KEYS, strict=False)
    assert (t.keys["model.dtype"], t.keys["model.precision"]) == want


def test_open_r1_recipe_bf16_in_config_from_trl_and_train_config(open_r1_on_path: None, tmp_path: Path) -> None:
    """config_demo_deepseek.yaml as it is: pure bf16 weights (TRL loads bf16, its autocast then changes nothing),
    in `train --config` (its reward names replaced by --set) and in the `--reward-module open_r1.rewards` command."""
    t = translate({**load(DEEPSEEK), "reward_module": "open_r1.rewards"}, str(DEEPSEEK), KEYS)
    assert (t.keys["model.dtype"], t.keys["model.precision"]) == ("bfloat16", "bf16")
    assert t.mapped["torch_dtype"] == t.mapped["bf16"] == ["model.dtype", "model.precision"]
    assert any("TRL loads the weights in bf16 and its bf16 autocast then changes nothing" in n for n in t.notes)
    three = "reward.functions=[open_r1.rewards:accuracy_reward,open_r1.rewards:format_reward,format]"
    cfg = build_config("grpo", overrides=[three], config_file=str(DEEPSEEK))
    assert (cfg.model.dtype, cfg.model.precision) == ("bfloat16", "bf16")
    cfg = config_of(parsed("train", "--config", str(DEEPSEEK), "--reward-module", "open_r1.rewards", "--model", "tiny"))
    assert (cfg.model.dtype, cfg.model.precision, cfg.model.name) == ("bfloat16", "bf16", "tiny")
    assert cfg.reward.functions[0] == "open_r1.rewards:accuracy_reward"


def test_a_float32_flag_over_the_recipe_gives_fp32(open_r1_on_path: None) -> None:
    args = parsed("train", "--config", str(DEEPSEEK), "--reward-module", "open_r1.rewards", "--torch_dtype", "float32",
                  "--bf16", "false")  # fmt: skip
    cfg = config_of(args)
    assert (cfg.model.dtype, cfg.model.precision) == ("float32", "fp32")


# ------------------------------------------- item 4: --set reward.functions replaces a recipe's unresolved names


def test_set_reward_functions_applies_before_the_unresolved_names_check(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(ConfigError, match=r"reward_funcs \['accuracy', 'format', 'tag_count'\] resolve to no"):
        build_config("grpo", config_file=str(DEEPSEEK))
    cfg = build_config("grpo", overrides=["reward.functions=[gsm8k,format,format]"], config_file=str(DEEPSEEK))
    assert cfg.reward.functions == ["gsm8k", "format", "format"] and cfg.reward.weights == [1.0, 1.0, 1.0]
    assert "note: reward_funcs is replaced by the reward.functions given after the file" in capsys.readouterr().err
    args = parsed("train", "--config", str(DEEPSEEK), "--learning_rate", "1e-5", "--set",
                  "reward.functions=[gsm8k,format,format]")  # fmt: skip
    cfg = config_of(args)  # with TRL flags the file is translated in apply_trl_flags: the same rule there
    assert cfg.reward.functions == ["gsm8k", "format", "format"] and cfg.train.lr == 1e-5


def test_without_the_override_the_refusal_stands_on_the_command_line(tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as e:
        parsed("train", "--config", str(DEEPSEEK), "--learning_rate", "1e-5", "--set", "train.steps=2")
    assert e.value.code == 2


# --------------------------------------------- item 5: grpokit's own options beat TRL flags in the same command


def test_own_options_beat_trl_flags_in_the_same_command(capsys: pytest.CaptureFixture) -> None:
    args = parsed("train", "--model", "tiny", "--model_name_or_path", "Qwen/Qwen2-7B", "--steps", "5",
                  "--max_steps", "2", "--learning_rate", "3e-6")  # fmt: skip
    cfg = config_of(args)
    assert (cfg.model.name, cfg.train.steps, cfg.train.lr) == ("tiny", 5, 3e-6)
    err = capsys.readouterr().err
    assert "TRL flag --model_name_or_path Qwen/Qwen2-7B yields to --model tiny (grpokit's own options win)" in err
    assert "TRL flag --max_steps 2 yields to --steps 5" in err


def test_own_options_beat_a_trl_files_values_and_its_flags(open_r1_on_path: None) -> None:
    args = parsed("train", "--config", str(DEEPSEEK), "--reward-module", "open_r1.rewards", "--model", "tiny",
                  "--model_name_or_path", "other/model", "--max_steps", "9", "--steps", "2")  # fmt: skip
    cfg = config_of(args)
    assert (cfg.model.name, cfg.train.steps) == ("tiny", 2)
    alone = config_of(parsed("train", "--max_steps", "3", "--model_name_or_path", "tiny"))
    assert (alone.model.name, alone.train.steps) == ("tiny", 3)  # without an own option the TRL flag applies


# ---------------------------------------------------------------------------- item 6: messages that give the fix


def test_a_batch_that_divides_on_the_recipes_processes_says_which_and_the_one_process_value(
    open_r1_on_path: None,
) -> None:
    """config_demo_code.yaml: 16 x 4 = 64 completions, num_generations 14; open-r1 launches it on 7 processes."""
    with pytest.raises(ValueError) as e:
        translate({**load(CODE), "reward_module": "open_r1.rewards"}, str(CODE), KEYS)
    message = str(e.value)
    assert "is not a multiple of num_generations=14" in message and "\n" not in message
    assert "the recipe divides on 7 processes" in message and "16 x 7 x 4 = 448 = 32 prompts x 14" in message
    assert "set per_device_train_batch_size=112" in message
    fixed = translate({**load(CODE), "per_device_train_batch_size": 112, "reward_module": "open_r1.rewards"},
                      str(CODE), KEYS)  # fmt: skip
    assert (fixed.keys["rollout.prompts_per_step"], fixed.keys["rollout.group_size"]) == (32, 14)


def test_verls_in_reward_kl_coefficient_says_use_kl_in_reward_enables_it() -> None:
    data = load(VERL_YAML)  # use_kl_in_reward: false, kl_ctrl.kl_coef: 0.001
    t = translate(data, str(VERL_YAML), KEYS, strict=False)
    assert "algorithm.kl_ctrl.kl_coef" not in t.unsupported and t.ignored["algorithm.kl_ctrl.kl_coef"] == 0.001
    (note,) = [n for n in t.notes if "kl_ctrl.kl_coef" in n]
    assert "algorithm.use_kl_in_reward=True enables it" in note and "algo.kl_placement=reward" in note
    data["algorithm"]["use_kl_in_reward"] = True
    on = translate(data, str(VERL_YAML), KEYS, strict=False)
    assert (on.keys["algo.kl_placement"], on.keys["algo.kl_coef"], on.keys["algo.kl_estimator"]) == (
        "reward", 0.001, "kl",
    )  # fmt: skip


# --------------------------------- item 1: verl's GSM8K + MATH script, both files and each row's own scorer


def verl_home(tmp_path: Path, math_source: str = "DigitalLearningGmbH/MATH-lighteval") -> Path:
    """$HOME with data/{gsm8k,math}/{train,test}.parquet as verl's preprocessing writes them (own rows)."""
    datasets = pytest.importorskip("datasets")
    home = tmp_path / "home"
    layouts = {"gsm8k": FIXTURES / "field" / "data" / "gsm8k_train.jsonl", "math": JOBS / "math_train.jsonl"}
    for name, rows_file in layouts.items():
        rows = [json.loads(x) for x in rows_file.read_text().splitlines()]
        if name == "math":
            rows = [{**r, "data_source": math_source} for r in rows]
        (home / "data" / name).mkdir(parents=True)
        for split in ("train", "test"):
            datasets.Dataset.from_list(rows).to_parquet(str(home / "data" / name / f"{split}.parquet"))
    return home


SHRINK = [  # what a verl user appends to the script ($@) for a 2-step smoke run on the tiny model
    "actor_rollout_ref.model.path=tiny", "data.train_batch_size=2", "actor_rollout_ref.actor.ppo_mini_batch_size=2",
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8", "actor_rollout_ref.rollout.n=4",
    "data.max_response_length=8", "actor_rollout_ref.rollout.name=hf", "trainer.logger=[console]",
    "trainer.total_training_steps=2",
]  # fmt: skip


def run_verl_script(tmp_path: Path, home: Path, *extra: str) -> subprocess.CompletedProcess:
    """bash runs verl's script as it is; its `python3 -m verl.trainer.main_ppo ARGS $@` reaches `grpokit config
    from-verl ARGS` (a `python3` first on PATH), so the overrides are exactly what bash passes verl."""
    shim = tmp_path / "bin" / "python3"
    shim.parent.mkdir(exist_ok=True)
    shim.write_text(f'#!/bin/sh\nshift 2\nexec {sys.executable} -m grpokit.cli config from-verl "$@"\n')
    shim.chmod(0o755)
    env = {**ENV, "HOME": str(home), "PATH": f"{shim.parent}{os.pathsep}{os.environ['PATH']}"}
    script = JOBS / "verl" / "run_qwen2-7b_math.sh"
    return subprocess.run(["bash", str(script), *extra], capture_output=True, text=True, env=env, cwd=tmp_path)


def test_verl_math_script_carries_both_files_and_each_rows_scorer(tmp_path: Path) -> None:
    home = verl_home(tmp_path)
    out = tmp_path / "math.yaml"
    proc = run_verl_script(tmp_path, home, *SHRINK, "-o", str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    cfg = build_config("grpo", config_file=str(out), job=True)
    data = home / "data"
    assert (cfg.data.task, cfg.data.extra_files) == (
        str(data / "gsm8k/train.parquet"),
        [str(data / "math/train.parquet")],
    )
    assert (cfg.data.eval_data, cfg.data.extra_eval_files) == (
        str(data / "gsm8k/test.parquet"), [str(data / "math/test.parquet")],
    )  # fmt: skip
    assert cfg.reward.functions == ["verl_data_source"] and cfg.data.answer_key == "reward_model.ground_truth"
    assert (
        "mixes data sources verl scores differently (DigitalLearningGmbH/MATH-lighteval, openai/gsm8k)" in proc.stderr
    )
    assert "verl scores data_source 'openai/gsm8k' with gsm8k.compute_score" in proc.stderr


def test_the_two_files_load_as_one_dataset_scored_per_row_by_data_source(tmp_path: Path) -> None:
    from grpokit.config import DataConfig
    from grpokit.data.loaders import load_files
    from grpokit.rewards.verl_sources import by_data_source

    data = verl_home(tmp_path) / "data"
    keys = {"prompt_key": "prompt", "answer_key": "reward_model.ground_truth"}
    rows = load_files([str(data / "gsm8k/train.parquet"), str(data / "math/train.parquet")], "train", None, 0, **keys)
    assert len(rows) == 24 and len({r.id for r in rows}) == 24  # train/1 in both files: math/train/1 for the second
    assert {r.columns["data_source"] for r in rows} == {"openai/gsm8k", "DigitalLearningGmbH/MATH-lighteval"}
    gsm, math = rows[0], rows[12]
    right = [f"so #### {gsm.answer}", f"so \\boxed{{{math.answer}}}"]
    # gsm8k's check reads only '#### answer' (a boxed right answer is 0 there); a wrong boxed answer is 0 in MATH
    wrong = [f"\\boxed{{{gsm.answer}}}", "so \\boxed{999}"]
    assert list(by_data_source(right, [gsm, math])) == [1.0, 1.0]
    assert list(by_data_source(wrong, [gsm, math])) == [0.0, 0.0]
    assert DataConfig().extra_files == []


def test_a_verl_conversion_that_would_drop_the_reward_exits_non_zero(tmp_path: Path) -> None:
    home = verl_home(tmp_path, math_source="my/own_math")
    out = tmp_path / "math.yaml"
    proc = run_verl_script(tmp_path, home, *SHRINK, "-o", str(out))
    last = proc.stderr.strip().splitlines()[-1]
    assert proc.returncode == 2 and not out.exists()
    assert last.startswith("config error: config from-verl: the conversion would drop the reward (data_source ")
    assert "'my/own_math' has no verl default scorer" in last and "custom_reward_function.path" in last


def test_a_trl_conversion_that_would_drop_the_reward_exits_non_zero(tmp_path: Path) -> None:
    out = tmp_path / "r.yaml"
    proc = subprocess.run([sys.executable, "-m", "grpokit.cli", "config", "from-trl", str(DEEPSEEK), "-o", str(out)],
                          capture_output=True, text=True, env=ENV)  # fmt: skip
    last = proc.stderr.strip().splitlines()[-1]
    assert proc.returncode == 2 and not out.exists()
    assert "the conversion would drop the reward (reward_funcs ['accuracy', 'format', 'tag_count'] resolve" in last
    assert "--reward-module open_r1.rewards" in last


# ------------------------------------------------ item 2: no silent fallback to the built-in task or reward


def test_a_config_file_without_task_or_reward_is_an_error(tmp_path: Path) -> None:
    plain = tmp_path / "no_task.yaml"
    plain.write_text("train: {steps: 2}\n")
    with pytest.raises(ConfigError, match=r"no_task.yaml names no data \(data.task;.*or pass --task; the built-in"):
        build_config("grpo", config_file=str(plain), job=True)
    data = tmp_path / "d.jsonl"
    data.write_text('{"prompt": "1 + 1?", "answer": "2"}\n')
    no_reward = tmp_path / "no_reward.yaml"
    no_reward.write_text(f"data: {{task: {data}}}\n")
    with pytest.raises(ConfigError, match=r"names no reward .*the math_verify default applies only to a bare"):
        build_config("grpo", config_file=str(no_reward), job=True)
    assert build_config("grpo", config_file=str(no_reward), job=True, **{"reward.functions": ["format"]})
    assert build_config("grpo", config_file=str(plain), job=True, **{"data.task": "countdown"}).data.task == "countdown"
    assert build_config("grpo", config_file=str(plain)).data.task == "add1"  # a config layer, not a job: unchanged


def test_train_on_a_verl_config_without_data_is_refused_before_anything_runs(tmp_path: Path) -> None:
    verl_yaml = tmp_path / "v.yaml"  # verl overrides that name no data files
    verl_yaml.write_text("algorithm: {adv_estimator: grpo}\nactor_rollout_ref: {rollout: {n: 4}}\n")
    cmd = [sys.executable, "-m", "grpokit.cli", "train", "--config", str(verl_yaml), "--model", "tiny"]
    proc = subprocess.run([*cmd, "--out", str(tmp_path / "runs")], capture_output=True, text=True, env=ENV)
    assert proc.returncode == 2 and "v.yaml names no data (data.task" in proc.stderr.strip().splitlines()[-1]
    assert not (tmp_path / "runs").exists()


def test_a_trl_file_with_flags_but_no_dataset_is_refused(open_r1_on_path: None, tmp_path: Path) -> None:
    trl = tmp_path / "r.yaml"
    trl.write_text(yaml.safe_dump({k: v for k, v in load(DEEPSEEK).items() if k != "dataset_name"}))
    with pytest.raises(SystemExit) as e:
        parsed("train", "--config", str(trl), "--reward-module", "open_r1.rewards", "--learning_rate", "1e-5")
    assert e.value.code == 2


def test_a_bare_command_line_names_the_built_in_defaults_first(capsys: pytest.CaptureFixture) -> None:
    build_config("grpo", job=True, **{"model.name": "tiny"})
    assert capsys.readouterr().err.splitlines()[0] == (
        "grpokit: built-in defaults: task add1, reward exact_numeric (the task's own); choose with --task and "
        "--set reward.functions=[...] (or --config FILE)"
    )
    build_config("grpo", job=True, **{"data.task": "data.jsonl"})
    assert "built-in defaults: reward math_verify;" in capsys.readouterr().err
    build_config("grpo", ["reward.functions=[format]"], job=True, **{"data.task": "add2"})
    assert capsys.readouterr().err == ""


def test_the_converted_verl_math_job_trains_two_steps_on_both_sources(tmp_path: Path) -> None:
    """`grpokit train --config` on what the script converted to: 2 steps on the tiny model, every row scored (no
    failures: each row found its data_source's check), the run's config keeping both files and the reward."""
    home = verl_home(tmp_path)
    config = tmp_path / "math.yaml"
    assert run_verl_script(tmp_path, home, *SHRINK, "-o", str(config)).returncode == 0
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "grpokit.cli", "train", "--config", str(config), "--set", "data.eval_size=2"]
    proc = subprocess.run([*cmd, "--output-dir", str(out)], capture_output=True, text=True, env=ENV, timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines() if x.strip()]
    train = [r for r in rows if "reward/mean" in r]
    assert [r["step"] for r in train] == [1, 2]
    assert all(r["reward/fail_frac"] == 0.0 and "reward/verl_data_source_mean" in r for r in train)
    saved = yaml.safe_load((out / "config.yaml").read_text())
    assert saved["reward"]["functions"] == ["verl_data_source"]
    assert saved["data"]["extra_files"] == [str(home / "data" / "math" / "train.parquet")]


def test_open_r1_recipe_trains_in_bf16_with_the_reward_module_command(tmp_path: Path) -> None:
    """The documented `--reward-module open_r1.rewards` command on config_demo_deepseek.yaml as it is
    (`torch_dtype: bfloat16`, `bf16: true`), shrunk by TRL flags only: 2 steps on the tiny model in pure bf16."""
    out = tmp_path / "run"
    shrink = [  # the flags a TRL user adds after --config for a 2-step CPU smoke run; dtype and bf16 left as they are
        "--model_name_or_path", "tiny", "--dataset_name", str(FIXTURES / "field" / "data" / "openr1_math.jsonl"),
        "--num_generations", "4", "--per_device_train_batch_size", "8", "--gradient_accumulation_steps", "1",
        "--max_completion_length", "8", "--max_steps", "2", "--use_vllm", "false", "--attn_implementation", "sdpa",
        "--report_to", "none", "--output_dir", str(out),
    ]  # fmt: skip
    cmd = [
        sys.executable,
        "-m",
        "grpokit.cli",
        "train",
        "--config",
        str(DEEPSEEK),
        "--reward-module",
        "open_r1.rewards",
    ]
    env = {**ENV, "PYTHONPATH": str(OPEN_R1_SRC)}
    proc = subprocess.run([*cmd, *shrink, "--set", "data.eval_size=2"], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=900)  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    assert "TRL loads the weights in bf16 and its bf16 autocast then changes nothing" in proc.stderr
    saved = yaml.safe_load((out / "config.yaml").read_text())
    assert (saved["model"]["dtype"], saved["model"]["precision"]) == ("bfloat16", "bf16")
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines() if x.strip()]
    assert [r["step"] for r in rows if "reward/mean" in r] == [1, 2]


def test_config_from_trl_on_the_open_r1_recipe_with_its_reward_module(tmp_path: Path) -> None:
    out = tmp_path / "r.yaml"
    cmd = [
        sys.executable,
        "-m",
        "grpokit.cli",
        "config",
        "from-trl",
        str(DEEPSEEK),
        "--reward-module",
        "open_r1.rewards",
    ]
    env = {**ENV, "PYTHONPATH": str(OPEN_R1_SRC)}
    proc = subprocess.run([*cmd, "-o", str(out)], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    written = yaml.safe_load(out.read_text())
    assert (written["model"]["dtype"], written["model"]["precision"]) == ("bfloat16", "bf16")
    assert written["reward"]["functions"][2] == "open_r1.rewards:tag_count_reward"
    assert "# note: torch_dtype: bfloat16 with bf16: true: TRL loads the weights in bf16" in out.read_text()
