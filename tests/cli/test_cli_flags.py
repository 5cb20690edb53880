"""The command line's vocabulary: TRL's flag names on `grpokit train` / `preflight`, translated by meaning as a TRL
config file is; one name per concept across subcommands; help text on every option of every subcommand."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from grpokit.cli.main import build_parser, main
from grpokit.cli.trl_flags import apply_trl_flags
from grpokit.config import build_config

ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def grpokit(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "grpokit.cli", *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=ENV, cwd=cwd, timeout=600)


def parsed(*argv: str) -> argparse.Namespace:
    """The namespace `grpokit` runs a command with, TRL flags translated (what main() does before the command)."""
    args, extra = build_parser().parse_known_args(list(argv))
    apply_trl_flags(args, extra)
    return args


def config_of(args: argparse.Namespace):
    direct = {"model.name": args.model, "data.task": args.task, "train.output_dir": args.output_dir}
    return build_config(args.recipe, overrides=args.set, config_file=args.config, **direct)


# ------------------------------------------------------------------------------------------- help everywhere


def _subparsers(parser: argparse.ArgumentParser):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            yield from action.choices.items()


def test_every_option_of_every_subcommand_has_help() -> None:
    parser = build_parser()
    missing = [a.dest for a in parser._actions if not a.help and not isinstance(a, argparse._SubParsersAction)]
    commands = dict(_subparsers(parser))
    assert {"train", "preflight", "eval", "doctor", "report", "compare", "config", "audit-reward", "watch"} <= set(
        commands
    )
    for name, sub in commands.items():
        missing += [f"{name} {a.option_strings or a.dest}" for a in sub._actions if not (a.help or "").strip()]
    assert missing == []


# --------------------------------------------------------------------------------------- TRL flags, by meaning


def test_trl_flags_reach_the_runs_saved_config(tmp_path: Path) -> None:
    """The real CLI, a 0-step run on the tiny model: --learning_rate and --num_generations land where they mean,
    --output_dir (TRL's spelling) is the run directory, each flag says on one line what it became."""
    out = tmp_path / "run"
    proc = grpokit(
        "train", "--model", "tiny", "--set", "train.steps=0", "--set", "data.eval_size=2", "--output_dir", str(out),
        "--learning_rate", "3e-6", "--num_generations", "4", "--logging_steps", "5",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    saved = yaml.safe_load((out / "config.yaml").read_text())
    assert saved["train"]["lr"] == 3e-6 and saved["rollout"]["group_size"] == 4
    # TRL's num_generations divides per_device_train_batch_size's 8 completions (its default): 2 prompts x 4
    assert saved["rollout"]["prompts_per_step"] == 2
    assert "TRL flag --learning_rate 3e-06 -> train.lr=3.0e-06" in proc.stderr
    assert "TRL flag --num_generations 4 -> rollout.prompts_per_step=2, rollout.group_size=4" in proc.stderr
    assert "TRL flag --logging_steps 5 -> ignored" in proc.stderr


def test_flags_alone_keep_the_recipes_other_values() -> None:
    """A flag sets what it means; TRL's defaults for flags not given do not replace the recipe's values."""
    cfg = config_of(parsed("train", "--recipe", "dapo", "--beta", "0.01", "--epsilon_high", "0.3"))
    assert (cfg.algo.kl_coef, cfg.algo.eps_high) == (0.01, 0.3)
    assert cfg.algo.group_filter == "dynamic_sampling" and cfg.rollout.max_new_tokens != 512  # dapo's, not TRL's


def test_flags_and_a_trl_config_file_are_translated_together(tmp_path: Path) -> None:
    """`trl grpo --config F --num_generations 4`: the flag overrides the file, and batch sizes mean what they mean
    together (16 completions per device step / 4 generations = 4 prompts)."""
    path = tmp_path / "trl.yaml"
    path.write_text(yaml.safe_dump({"per_device_train_batch_size": 16, "num_generations": 8, "learning_rate": 1e-5}))
    args = parsed("train", "--config", str(path), "--num_generations", "4", "--set", "train.lr=2e-5", "--task", "add1")
    cfg = config_of(args)
    assert (cfg.rollout.prompts_per_step, cfg.rollout.group_size) == (4, 4)
    assert cfg.train.lr == 2e-5  # the user's own --set wins over every translated key


@pytest.mark.parametrize(
    ("flags", "needle"),
    [
        (["--lerning_rate", "1e-5"], "--lerning_rate is neither a grpokit option nor a TRL GRPOConfig field; "
         "did you mean --learning_rate (TRL)?"),
        (["--use_liger_kernel", "true"], "--use_liger_kernel True: no grpokit equivalent"),
        (["--reward_funcs", "accuracy", "format"], "reward_funcs ['accuracy', 'format'] resolve to no function"),
    ],
)  # fmt: skip
def test_a_trl_flag_without_grpokit_meaning_is_one_clear_error(flags: list[str], needle: str, tmp_path: Path) -> None:
    proc = grpokit("train", "--model", "tiny", "--out", str(tmp_path), *flags)
    assert proc.returncode == 2 and needle in proc.stderr and "Traceback" not in proc.stderr
    assert not any(tmp_path.iterdir())  # nothing started


def test_other_subcommands_still_refuse_unknown_flags(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as e:
        main(["doctor", "x", "--learning_rate", "1"])
    assert e.value.code == 2 and "unrecognized arguments: --learning_rate 1" in capsys.readouterr().err


def test_trl_reward_funcs_flag_resolves_trls_own_rewards() -> None:
    cfg = config_of(parsed("train", "--reward_funcs", "accuracy_reward", "think_format_reward"))
    assert cfg.reward.functions == ["trl.rewards:accuracy_reward", "trl.rewards:think_format_reward"]


# ----------------------------------------------------------------------------------- one name per concept


def test_preflight_takes_task_and_the_old_data_flag_is_refused(tmp_path: Path) -> None:
    small = ["--model", "tiny", "--prompts", "2", "--group-size", "2", "--max-new-tokens", "2", "--json"]
    new = grpokit("preflight", "--task", "add2", *small, "--out", str(tmp_path / "a"))
    assert new.returncode == 0, new.stderr[-2000:]
    assert json.loads(new.stdout)["config"]["data"] == "add2"
    old = grpokit("preflight", "--data", "add2", *small, "--out", str(tmp_path / "b"))
    assert old.returncode == 2 and "--data is neither a grpokit option" in old.stderr


def test_grpokits_own_options_win_over_a_files_value_and_trl_flags_apply_as_given(tmp_path: Path) -> None:
    path = tmp_path / "trl.yaml"
    path.write_text(yaml.safe_dump({"output_dir": "from-the-file", "model_name_or_path": "Qwen/Qwen2-7B", "seed": 3}))
    cfg = config_of(parsed("train", "--config", str(path), "--output-dir", str(tmp_path / "o"), "--model", "tiny",
                           "--learning_rate", "1e-5", "--task", "add1"))  # fmt: skip
    assert (cfg.train.output_dir, cfg.model.name, cfg.train.seed) == (str(tmp_path / "o"), "tiny", 3)
    # preflight's --model has a default: a TRL flag naming the model still applies
    assert "model.name=tiny" in parsed("preflight", "--model_name_or_path", "tiny").set
