"""Bring your TRL or verl job: each runs unchanged through `grpokit train` (a real subprocess) for 2 steps on the
tiny model.

* TRL-style: a conversational `datasets.Dataset` (saved with `save_to_disk`), TRL's own `accuracy_reward` and
  `think_format_reward` imported from `trl.rewards`, and a TRL-style reward reading an extra column.
* verl-style: a parquet file in verl's schema (chat `prompt`, `reward_model.ground_truth`, `data_source`,
  `extra_info`) and a `compute_score(data_source, solution_str, ground_truth, extra_info)` function.

Extending: a job is a `Job` (the `grpokit train` arguments that describe it); `run_train` adds the small-run
settings and returns the finished run. A TRL config YAML job adds its `--config` to `trl_job(...).args`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

datasets = pytest.importorskip("datasets")
pytest.importorskip("trl.rewards")

ENV = {**os.environ, "HF_HUB_OFFLINE": "1"}
SMALL_RUN = [
    "--model",
    "tiny",
    "--steps",
    "2",
    "--set",
    "rollout.prompts_per_step=2",
    "--set",
    "rollout.group_size=4",
    "--set",
    "rollout.max_new_tokens=8",
    "--set",
    "data.eval_size=2",
]


@dataclass
class Job:
    """A job as its user would launch it: `grpokit train` arguments (task, rewards, settings)."""

    args: list[str]
    files: dict[str, Path] = field(default_factory=dict)


@dataclass
class Run:
    proc: subprocess.CompletedProcess
    dir: Path

    def metrics(self) -> list[dict[str, Any]]:
        rows = [json.loads(line) for line in (self.dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
        return [r for r in rows if "reward/mean" in r]  # training steps (eval rows carry eval/*)


def run_train(tmp_path: Path, job: Job, *extra: str) -> Run:
    """`grpokit train` on the job with the small-run settings; asserts it finished."""
    out = tmp_path / "runs"
    cmd = [sys.executable, "-m", "grpokit.cli", "train", *job.args, *SMALL_RUN, *extra, "--out", str(out)]
    proc = subprocess.run([*cmd, "--name", "run"], capture_output=True, text=True, env=ENV, cwd=tmp_path, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    return Run(proc, out / "run")


TRL_REWARDS = '''
def uses_columns(prompts, completions, difficulty, **kwargs):
    """A TRL-style reward: conversational prompts and completions, the dataset's `difficulty` column."""
    for prompt, completion in zip(prompts, completions):
        if prompt[-1]["role"] != "user" or completion[0]["role"] != "assistant":
            raise TypeError(f"not conversational: {prompt!r} / {completion!r}")
    return [float(d) for d in difficulty]
'''


def trl_job(tmp_path: Path) -> Job:
    """A conversational dataset object as TRL takes it, TRL's own rewards plus one of the user's."""
    rows = [
        {
            "prompt": [{"role": "user", "content": f"What is {a} / {b}? Put the answer in \\boxed{{}}."}],
            "solution": f"\\frac{{{a}}}{{{b}}}",
            "difficulty": 1,
        }
        for a in range(1, 5)
        for b in range(2, 5)
    ]
    dataset = datasets.Dataset.from_list(rows)
    dataset.save_to_disk(str(tmp_path / "trl_data"))
    (tmp_path / "my_rewards.py").write_text(TRL_REWARDS)
    rewards = "[trl.rewards:accuracy_reward,trl.rewards:think_format_reward,my_rewards.py:uses_columns]"
    args = ["--task", str(tmp_path / "trl_data"), "--set", f"reward.functions={rewards}"]
    args += ["--set", "reward.weights=[1.0,0.5,0.1]", "--set", "data.answer_key=solution"]
    return Job(args, {"data": tmp_path / "trl_data", "rewards": tmp_path / "my_rewards.py"})


VERL_REWARD = '''
def compute_score(data_source, solution_str, ground_truth, extra_info=None):
    """A verl reward, unchanged: the ground truth comes from reward_model.ground_truth."""
    assert data_source == "openai/gsm8k", data_source
    assert ground_truth == str(10 + extra_info["index"]), (ground_truth, extra_info)
    return 1.0 if solution_str.strip().endswith(ground_truth) else 0.1
'''


def verl_job(tmp_path: Path) -> Job:
    """A parquet file in verl's schema and a `compute_score` function."""
    rows = [
        {
            "data_source": "openai/gsm8k",
            "prompt": [
                {"role": "system", "content": "Think step by step, then give the number after ####."},
                {"role": "user", "content": f"Tom has {i} apples and buys 10 more. How many does he have?"},
            ],
            "ability": "math",
            "reward_model": {"style": "rule", "ground_truth": str(10 + i)},
            "extra_info": {"split": "train", "index": i},
        }
        for i in range(12)
    ]
    datasets.Dataset.from_list(rows).to_parquet(str(tmp_path / "train.parquet"))
    (tmp_path / "verl_reward.py").write_text(VERL_REWARD)
    args = ["--task", str(tmp_path / "train.parquet"), "--set", "reward.functions=[verl_reward.py:compute_score]"]
    return Job(args, {"data": tmp_path / "train.parquet", "rewards": tmp_path / "verl_reward.py"})


def test_trl_job_runs_unchanged(tmp_path: Path) -> None:
    run = run_train(tmp_path, trl_job(tmp_path))
    steps = run.metrics()
    assert [r["step"] for r in steps] == [1, 2]
    for row in steps:
        assert row["reward/fail_frac"] == 0.0
        assert row["reward/accuracy_reward_none_frac"] == 0.0  # every gold solution parses
        assert row["reward/think_format_reward_mean"] == 0.0  # a random tiny model writes no <think> block
        assert row["reward/uses_columns_mean"] == 1.0  # the difficulty column, as a keyword list
    assert (run.dir / "final" / "config.json").is_file()
    config = (run.dir / "config.yaml").read_text()
    assert "- trl.rewards:accuracy_reward" in config and "answer_key: solution" in config


def test_verl_job_runs_unchanged(tmp_path: Path) -> None:
    run = run_train(tmp_path, verl_job(tmp_path))
    steps = run.metrics()
    assert [r["step"] for r in steps] == [1, 2]
    for row in steps:
        assert row["reward/fail_frac"] == 0.0
        assert row["reward/compute_score_mean"] == pytest.approx(0.1)  # ground truth checked inside: no failures
    config = (run.dir / "config.yaml").read_text()
    assert "compute_score" in config and "train.parquet" in config
    assert (run.dir / "final" / "config.json").is_file()


TRL_GRPO_CONFIG = """\
# a TRL GRPOConfig as `trl grpo --config` takes it
output_dir: {out}
model_name_or_path: tiny
dataset_name: {data}
reward_funcs: [accuracy_reward, think_format_reward]
reward_weights: [1.0, 0.5]
learning_rate: 1.0e-5
num_generations: 4
per_device_train_batch_size: 8
max_completion_length: 8
max_steps: 2
save_steps: 1
beta: 0.04
epsilon_high: 0.28
loss_type: dr_grpo
logging_steps: 1
push_to_hub: false
report_to: none
"""


def test_trl_job_with_its_grpoconfig_yaml(tmp_path: Path) -> None:
    """`grpokit train --config trl_grpo.yaml`: TRL's own config file, its values mapped by meaning; output_dir is
    the run directory itself and its checkpoints load with transformers."""
    job = trl_job(tmp_path)
    out = tmp_path / "Qwen-GRPO"
    config = tmp_path / "trl_grpo.yaml"
    config.write_text(TRL_GRPO_CONFIG.format(out=out, data=job.files["data"]))
    cmd = [sys.executable, "-m", "grpokit.cli", "train", "--config", str(config)]
    cmd += ["--set", "data.answer_key=solution", "--set", "data.eval_size=2"]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=ENV, cwd=tmp_path, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    assert proc.stderr.count("is a TRL GRPOConfig file") == 1
    assert "logging_steps=1" in proc.stderr and "push_to_hub=False" in proc.stderr  # named, not silently dropped
    run = Run(proc, out)  # TRL's output_dir is the run directory itself
    assert [r["step"] for r in run.metrics()] == [1, 2]
    assert all(r["train/batch_size"] == 8 for r in run.metrics())  # 8 completions = 2 prompts x 4 generations
    import yaml

    cfg = yaml.safe_load((out / "config.yaml").read_text())
    assert (cfg["rollout"]["prompts_per_step"], cfg["rollout"]["group_size"], cfg["rollout"]["max_new_tokens"]) == (
        2,
        4,
        8,
    )
    assert (cfg["algo"]["kl_coef"], cfg["algo"]["eps_high"], cfg["algo"]["loss_agg"]) == (0.04, 0.28, "constant-norm")
    assert cfg["reward"]["functions"] == ["trl.rewards:accuracy_reward", "trl.rewards:think_format_reward"]
    assert cfg["train"]["lr"] == 1e-5 and cfg["train"]["report_to"] == []
    from transformers import AutoModelForCausalLM

    AutoModelForCausalLM.from_pretrained(out / "checkpoints" / "step_2", local_files_only=True)


def test_verl_job_through_config_from_verl(tmp_path: Path) -> None:
    """verl's command-line overrides turned into a grpokit config by `grpokit config from-verl`, then trained."""
    job = verl_job(tmp_path)
    overrides = [
        f"data.train_files={job.files['data']}",
        f"custom_reward_function.path={job.files['rewards']}",
        "algorithm.adv_estimator=grpo",
        "data.train_batch_size=2",
        "data.max_response_length=8",
        "actor_rollout_ref.rollout.n=4",
        "actor_rollout_ref.actor.ppo_mini_batch_size=2",
        "actor_rollout_ref.actor.clip_ratio_high=0.28",
        "actor_rollout_ref.actor.optim.lr=1e-5",
        "trainer.total_training_steps=2",
        "trainer.logger=[console]",
    ]
    grpokit_yaml = tmp_path / "from_verl.yaml"
    base = [sys.executable, "-m", "grpokit.cli"]
    proc = subprocess.run(
        [*base, "config", "from-verl", *overrides, "-o", str(grpokit_yaml)], capture_output=True, text=True, env=ENV
    )
    assert proc.returncode == 0, proc.stderr
    text = grpokit_yaml.read_text()
    assert "eps_high: 0.28  # actor_rollout_ref.actor.clip_ratio_high" in text and "dual_clip_c: 3.0" in text
    out = tmp_path / "verl-run"
    cmd = [*base, "train", "--config", str(grpokit_yaml), "--model", "tiny", "--set", "data.eval_size=2"]
    proc = subprocess.run([*cmd, "--output-dir", str(out)], capture_output=True, text=True, env=ENV, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    steps = Run(proc, out).metrics()
    assert [r["step"] for r in steps] == [1, 2]
    assert all(r["reward/compute_score_mean"] == pytest.approx(0.1) for r in steps)
    assert all(r["train/batch_size"] == 8 for r in steps)
