"""Other trainers' config files recognised by their trainer (issue 48 item 2): EasyR1, SkyRL, NeMo-RL, prime-rl
(TOML), axolotl, ms-swift and OpenRLHF, each a real file vendored byte for byte in tests/fixtures/jobs48/ (SOURCE.md
there). Scripts run unchanged under bash, their launcher (`uv`, `swift`, `ray`) a shim pointing at grpokit."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from grpokit.config import build_config

JOBS = Path(__file__).parents[1] / "fixtures" / "jobs48"
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(Path(__file__).parents[2] / "src")}
SHA256 = {
    "axolotl/r1_acecode.yaml": "43c824e43b80687097db6412e8dcce3787e0c03104fde9e5888f60c8d222db01",
    "easyr1/config.yaml": "d24d344cc62c25af7e424fcc6431b4dcc353f50f07030a5a23f8045b9265ee19",
    "ms-swift/gspo.sh": "bac4cd43e5e59a32111db3bc5569a9180ac5805fde94f34b053e447942d91d6f",
    "nemo-rl/grpo_math_1B.yaml": "b87a086c283385bd2f7e7a0b3bf11ce5cb4cb5cb774863b8d5112745e42b0523",
    "openrlhf/train_reinforce_baseline_hybrid_engine.sh": (
        "31d9db85db8fd7f995344bfec73284a2f93fe8e47e41b5021e905e0d5361b8fe"
    ),
    "prime-rl/rl.toml": "59c5b3bf211c8dbc98ba769efc628325e4494a3b216f53d14b1885c3d6d6ebd2",
    "skyrl/run_gsm8k.sh": "8ba9e17791f4ec7b987eafa6840f9a9978e922fd5c4dc001f2b6da1059c183de",
}


def grpokit_config(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "grpokit.cli", "config", *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=ENV, cwd=cwd)


def run_script(tmp_path: Path, script: str, launcher: str, action: str) -> subprocess.CompletedProcess:
    """bash runs the trainer's script as it is; its launcher (`uv run ... -m MODULE`, `swift rlhf`, `ray job submit
    -- python3 -m MODULE`) is a shim on PATH that hands the trainer's own arguments to `grpokit config ACTION`."""
    shim = tmp_path / "bin" / launcher
    shim.parent.mkdir(exist_ok=True)
    skip = "shift" if launcher == "swift" else 'while [ "$1" != "-m" ]; do shift; done; shift 2'
    shim.write_text(f'#!/bin/sh\n{skip}\nexec {sys.executable} -m grpokit.cli config {action} "$@"\n')
    shim.chmod(0o755)
    env = {**ENV, "HOME": str(tmp_path / "home"), "PATH": f"{shim.parent}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run(["bash", str(JOBS / script)], capture_output=True, text=True, env=env, cwd=tmp_path)


def errors(proc: subprocess.CompletedProcess) -> list[str]:
    return [line for line in proc.stderr.splitlines() if line.startswith("config error")]


def test_the_vendored_files_are_the_projects_own() -> None:
    for name, digest in SHA256.items():
        assert hashlib.sha256((JOBS / name).read_bytes()).hexdigest() == digest, f"{name} differs from its SOURCE"


def test_easyr1_is_not_read_as_verl_and_keeps_its_group_size(tmp_path: Path) -> None:
    src = str(JOBS / "easyr1" / "config.yaml")
    wrong = grpokit_config("from-verl", src)
    assert wrong.returncode == 2
    assert errors(wrong) == [f"config error: {src} is an EasyR1 config, not a verl one: grpokit config from-easyr1 "
                             "(or grpokit config from, which recognises it)"]  # fmt: skip
    out = tmp_path / "easyr1.yaml"
    proc = grpokit_config("from", src, "-o", str(out))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "is an EasyR1 file" in proc.stderr or "is a EasyR1 file" in proc.stderr
    cfg = build_config("grpo", config_file=str(out), job=True)
    assert (cfg.rollout.group_size, cfg.rollout.prompts_per_step, cfg.train.mini_batches) == (5, 512, 4)
    assert (cfg.algo.eps_low, cfg.algo.eps_high, cfg.algo.dual_clip_c) == (0.2, 0.3, 3.0)  # EasyR1's defaults
    assert (cfg.algo.kl_coef, cfg.algo.kl_estimator, cfg.algo.kl_placement) == (0.01, "low_var_kl", "loss")
    assert (cfg.data.task, cfg.data.split, cfg.data.prompt_key) == ("hiyouga/math12k", "train", "problem")
    assert cfg.reward.functions == ["./examples/reward_function/math.py:compute_score"]
    assert (cfg.rollout.max_new_tokens, cfg.train.lr) == (2048, 1e-6)


def test_skyrl_script_is_not_read_as_verl_and_carries_group_data_and_env_reward(tmp_path: Path) -> None:
    proc = run_script(tmp_path, "skyrl/run_gsm8k.sh", "uv", "from-verl")
    assert proc.returncode == 2 and "is a SkyRL config, not a verl one: grpokit config from-skyrl" in proc.stderr
    out = tmp_path / "skyrl.yaml"
    (tmp_path / "bin" / "uv").unlink()
    proc = run_script(tmp_path, "skyrl/run_gsm8k.sh", "uv", f"from-skyrl -o {out}")
    assert proc.returncode == 0, proc.stderr[-2000:]
    cfg = build_config("grpo", config_file=str(out), job=True)
    home = tmp_path / "home" / "data" / "gsm8k"
    assert (cfg.rollout.group_size, cfg.rollout.prompts_per_step, cfg.train.mini_batches) == (5, 1024, 4)
    assert (cfg.data.task, cfg.data.eval_data) == (str(home / "train.parquet"), str(home / "validation.parquet"))
    assert cfg.reward.functions == ["gsm8k"] and cfg.data.answer_key == "reward_spec.ground_truth"
    assert (cfg.algo.kl_coef, cfg.algo.kl_estimator, cfg.rollout.max_new_tokens) == (0.001, "k3", 1024)


def test_nemo_rl_is_recognised_and_its_registered_dataset_refused_by_name(tmp_path: Path) -> None:
    src = str(JOBS / "nemo-rl" / "grpo_math_1B.yaml")
    out = tmp_path / "nemo.yaml"
    proc = grpokit_config("from", src, "-o", str(out))
    assert proc.returncode == 2 and not out.exists()
    (line,) = errors(proc)
    assert (
        "config from-nemo-rl: the conversion would drop the data (data.train.dataset_name='OpenMathInstruct-2'" in line
    )
    # train --config reads it as NeMo-RL (was: "unknown key grpo.num_prompts_per_step"); the data given after it
    cfg = build_config("grpo", overrides=["data.task=gsm8k"], config_file=src, job=True)
    assert (cfg.rollout.group_size, cfg.rollout.prompts_per_step, cfg.train.mini_batches) == (16, 32, 1)
    assert (cfg.algo.kl_coef, cfg.algo.kl_estimator, cfg.reward.functions) == (0.01, "k3", ["math_verify"])
    assert (cfg.train.lr, cfg.model.name, cfg.rollout.max_new_tokens) == (5e-6, "Qwen/Qwen2.5-1.5B", 512)


def test_prime_rl_toml_is_read_as_toml_and_its_taskset_named(tmp_path: Path) -> None:
    src = str(JOBS / "prime-rl" / "rl.toml")
    proc = grpokit_config("from", src)
    assert proc.returncode == 2 and proc.stdout == ""
    assert "verifiers taskset + harness" in proc.stderr
    assert "config from-prime-rl: the conversion would drop the environment (its data and reward)" in errors(proc)[0]
    cfg = build_config("grpo", overrides=["data.task=add1"], config_file=src, job=True)  # not "a YAML syntax error"
    assert (cfg.rollout.group_size, cfg.rollout.prompts_per_step, cfg.rollout.max_new_tokens) == (16, 8, 128)
    assert (cfg.train.steps, cfg.train.lr) == (20, 3e-6)


def test_axolotl_trl_block_is_carried_and_its_rewards_resolved(tmp_path: Path) -> None:
    src = str(JOBS / "axolotl" / "r1_acecode.yaml")
    wrong = grpokit_config("from-trl", src)
    assert wrong.returncode == 2 and "is an axolotl config, not a TRL GRPOConfig one" in wrong.stderr
    missing = grpokit_config("from-axolotl", src, cwd=tmp_path)
    assert missing.returncode == 2 and "grpo_code.code_execution_reward_func" in errors(missing)[0]
    pkg = tmp_path / "grpo_code"  # the user's reward package, beside the config as axolotl imports it
    pkg.mkdir()
    names = ("soft_format_reward_func", "code_execution_reward_func", "answer_execution_reward_func")
    (pkg / "__init__.py").write_text("".join(f"def {n}(completions, **kw):\n    return [0.0] * len(completions)\n"
                                             for n in names))  # fmt: skip
    out = tmp_path / "axolotl.yaml"
    proc = grpokit_config("from-axolotl", src, "-o", str(out), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    cfg = build_config("grpo", config_file=str(out), job=True)
    assert (cfg.rollout.group_size, cfg.rollout.max_new_tokens, cfg.algo.kl_coef) == (16, 512, 0.001)
    assert (cfg.model.name, cfg.data.task, cfg.train.lr) == (
        "Qwen/Qwen2.5-3B-Instruct",
        "axolotl-ai-co/AceCode-87K",
        5.3e-6,
    )
    assert cfg.reward.functions == [f"grpo_code:{n}" for n in names]


def test_ms_swift_script_is_read_as_trl_arguments(tmp_path: Path) -> None:
    proc = run_script(tmp_path, "ms-swift/gspo.sh", "swift", "from-ms-swift")
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = tmp_path / "swift.yaml"
    out.write_text(proc.stdout)
    cfg = build_config("grpo", config_file=str(out), job=True)
    assert (cfg.rollout.group_size, cfg.algo.policy_loss, cfg.algo.eps_low, cfg.algo.eps_high) == (
        16,
        "gspo",
        3e-4,
        4e-4,
    )
    assert (cfg.data.task, cfg.data.train_size, cfg.algo.kl_coef) == ("AI-MO/NuminaMath-TIR", 10000, 0.0)
    assert cfg.reward.functions == ["trl.rewards:accuracy_reward"] and cfg.rollout.max_new_tokens == 8192


def test_openrlhf_script_carries_its_batch_and_refuses_its_agent_by_name(tmp_path: Path) -> None:
    from grpokit.config import Config, all_keys
    from grpokit.config.compat import detect, translate
    from grpokit.config.compat.table import parse_flags

    proc = run_script(tmp_path, "openrlhf/train_reinforce_baseline_hybrid_engine.sh", "ray", "from-openrlhf")
    assert proc.returncode == 2 and proc.stdout == ""
    assert "the conversion would drop the reward (train.agent_func_path='examples/python/agent_func.py'" in proc.stderr
    args = proc.stderr.split("grpokit config from-openrlhf ", 1)[1]  # the flags bash passed, as grpokit read them
    flags = parse_flags(["--actor.model_name_or_path", "Qwen/Qwen3-4B-Thinking-2507", "--rollout.batch_size", "128",
                         "--rollout.n_samples_per_prompt", "8", "--train.batch_size", "1024", "--algo.kl.init_coef",
                         "1e-5", "--algo.kl.use_loss", "--algo.kl.estimator", "k2", "--algo.advantage.estimator",
                         "reinforce_baseline", "--data.prompt_dataset", "zhuzilin/dapo-math-17k"])  # fmt: skip
    assert args.startswith("--actor.model_name_or_path Qwen/Qwen3-4B-Thinking-2507") and detect(flags) == "openrlhf"
    t = translate(flags, "x", set(all_keys(Config())), strict=False)
    assert t is not None
    assert t.keys["rollout.group_size"] == 8 and t.keys["rollout.prompts_per_step"] == 128
    assert (t.keys["train.mini_batches"], t.keys["algo.advantage"]) == (1, "reinforce_pp_baseline")
    assert (t.keys["algo.kl_coef"], t.keys["algo.kl_estimator"], t.keys["algo.kl_placement"]) == (1e-5, "k2", "loss")


@pytest.mark.parametrize("action", ["from", "from-easyr1"])
def test_a_conversion_carrying_no_data_reward_or_group_size_writes_nothing(tmp_path: Path, action: str) -> None:
    src = tmp_path / "lr_only.yaml"
    src.write_text("worker:\n  actor:\n    optim:\n      lr: 2.0e-6\n")
    out = tmp_path / "out.yaml"
    proc = grpokit_config(action, str(src), "-o", str(out))
    assert proc.returncode == 2 and not out.exists()
    assert errors(proc) == [
        f"config error: config from-easyr1: {src} is an EasyR1 config, but none of its data, reward or group size maps "
        "to grpokit (keys with no grpokit meaning: none); nothing written"
    ]
