"""The field's own artifacts run unchanged through `grpokit train` (real subprocesses, the tiny model, 2 steps).

The artifacts are copied byte for byte under tests/fixtures/field (SOURCE.md beside each; `SHA256` holds them to
it); the data is grpokit's own, a few arithmetic rows in their layouts. Each job is launched as its project
launches it, shrunk only the way its own tool would be (TRL flags after `--config`, verl overrides after the
script's, as its `$@` passes them):

* open-r1: `recipes/Qwen2.5-1.5B-Instruct/grpo/config_demo.yaml` with open-r1's own `rewards.py`
  (`reward_funcs: [accuracy, format, tag_count]`, conversational completions, `dataset_prompt_column`,
  `system_prompt`);
* verl: `examples/grpo_trainer/run_qwen2-7b.sh`'s overrides on GSM8K-layout parquet, scored by verl's default for
  `openai/gsm8k` (no custom reward), and the same with verl's `gsm8k.py` as `custom_reward_function`;
* verl: the fully resolved `_generated_ppo_trainer.yaml` (PPO with a critic, 62 `${...}` interpolations);
* a TRL-style reward reading `trainer_state`, in training and in evaluation.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

datasets = pytest.importorskip("datasets")

FIELD = Path(__file__).parents[1] / "fixtures" / "field"
OPEN_R1 = FIELD / "open-r1"
VERL = FIELD / "verl"
SHA256 = {
    OPEN_R1 / "open_r1" / "rewards.py": "cbd7bf97e2befb37091258c14a343d182be889fdb5d9eab1e86a7dd3934614d3",
    OPEN_R1 / "config_demo.yaml": "dd0d982efd2dd26eea167e32105c493f67fe4e75b869398b6050f8eeac62488b",
    VERL / "gsm8k.py": "497c6e32b708d0bc8803b5a048ca5983de7756eb9c146abdc56e6f5d28767189",
    VERL / "gsm8k_preprocess.py": "b67a4b58eb97a1a8c5f4157072296798668af13d2db0958b921cfff1f4938975",
    VERL / "run_qwen2-7b.sh": "3ab572a916b6d37b65a62e308162650a17f37edcd6f58dcbe51159cf16a71597",
    VERL / "_generated_ppo_trainer.yaml": "8d589770107c4a8f0e018111816a5f459a189e5f11b9e683b49082286c45f858",
}
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
CLI = [sys.executable, "-m", "grpokit.cli"]


def run(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    proc = subprocess.run([*CLI, *args], capture_output=True, text=True, env=env or ENV, cwd=cwd, timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    assert "Traceback" not in proc.stderr
    return proc


def rows(run_dir: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(training rows, evaluation rows) of a run's metrics.jsonl."""
    lines = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines() if x.strip()]
    return [r for r in lines if "reward/mean" in r], [r for r in lines if "eval/accuracy" in r]


def test_the_copied_artifacts_are_byte_for_byte() -> None:
    for path, digest in SHA256.items():
        assert hashlib.sha256(path.read_bytes()).hexdigest() == digest, f"{path} differs from its SOURCE"


# ---------------------------------------------------------------------------------------------------- open-r1


def test_open_r1_recipe_with_its_own_rewards(tmp_path: Path) -> None:
    """`trl grpo --config config_demo.yaml`'s job: open-r1's reward names resolved in open-r1's rewards.py, which
    index `completion[0]["content"]`: they get conversational completions, the prompt being the recipe's system
    prompt + the `problem` column, as open-r1's make_conversation builds it."""
    out = tmp_path / "open-r1-run"
    shrink = [  # the flags a TRL user adds after --config for a 2-step CPU smoke run
        "--model_name_or_path", "tiny", "--dataset_name", str(FIELD / "data" / "openr1_math.jsonl"),
        "--num_generations", "4", "--per_device_train_batch_size", "8", "--gradient_accumulation_steps", "1",
        "--max_completion_length", "8", "--max_steps", "2", "--use_vllm", "false", "--attn_implementation", "sdpa",
        "--report_to", "none", "--bf16", "false", "--torch_dtype", "float32", "--output_dir", str(out),
    ]  # fmt: skip
    env = {**ENV, "PYTHONPATH": str(OPEN_R1)}
    proc = run("train", "--config", str(OPEN_R1 / "config_demo.yaml"), "--reward-module", "open_r1.rewards",
               *shrink, "--set", "data.eval_size=2", cwd=tmp_path, env=env)  # fmt: skip
    assert "TRL flag --num_generations 4 -> " in proc.stderr
    assert "with TRL flags is a TRL GRPOConfig file" in proc.stderr
    train, evals = rows(out)
    assert [r["step"] for r in train] == [1, 2]
    for r in train:
        assert r["reward/fail_frac"] == 0.0  # each reward read completion[0]["content"] without an error
        assert r["reward/tag_count_reward_mean"] >= 0.0 and r["reward/format_reward_mean"] == 0.0
    assert evals and all(r["eval/n"] > 0 for r in evals)
    cfg = yaml.safe_load((out / "config.yaml").read_text())
    assert cfg["reward"]["functions"] == [
        "open_r1.rewards:accuracy_reward", "open_r1.rewards:format_reward", "open_r1.rewards:tag_count_reward",
    ]  # fmt: skip
    assert cfg["data"]["prompt_key"] == "problem" and cfg["data"]["system_prompt"].startswith("You are a helpful AI")
    assert (cfg["rollout"]["prompts_per_step"], cfg["rollout"]["group_size"], cfg["train"]["lr"]) == (2, 4, 2e-5)


# ------------------------------------------------------------------------------------------------------- verl


def gsm8k_home(tmp_path: Path) -> Path:
    """$HOME with data/gsm8k/{train,test}.parquet as verl's gsm8k preprocessing writes them (own rows)."""
    lines = (FIELD / "data" / "gsm8k_train.jsonl").read_text().splitlines()
    data = tmp_path / "home" / "data" / "gsm8k"
    data.mkdir(parents=True)
    for split in ("train", "test"):
        datasets.Dataset.from_list([json.loads(x) for x in lines]).to_parquet(str(data / f"{split}.parquet"))
    return tmp_path / "home"


def script_overrides(home: Path) -> list[str]:
    """run_qwen2-7b.sh's `key=value` overrides as bash passes them to verl.trainer.main_ppo."""
    text = (VERL / "run_qwen2-7b.sh").read_text().replace("\\\n", " ")
    return [t.replace("$HOME", str(home)) for t in shlex.split(text) if "=" in t and not t.startswith("$")]


VERL_SHRINK = [  # what a verl user appends to the script ($@) for a 2-step smoke run
    "actor_rollout_ref.model.path=tiny", "data.train_batch_size=2", "actor_rollout_ref.actor.ppo_mini_batch_size=2",
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8", "actor_rollout_ref.rollout.n=4",
    "data.max_response_length=8", "actor_rollout_ref.rollout.name=hf", "trainer.logger=[console]",
    "trainer.total_training_steps=2",
]  # fmt: skip


def verl_run(tmp_path: Path, overrides: list[str], name: str) -> tuple[subprocess.CompletedProcess, Path]:
    config = tmp_path / f"{name}.yaml"
    translated = run("config", "from-verl", *overrides, *VERL_SHRINK, "-o", str(config), cwd=tmp_path)
    out = tmp_path / name
    run("train", "--config", str(config), "--set", "data.eval_size=2", "--output-dir", str(out), cwd=tmp_path)
    return translated, out


def test_verl_gsm8k_example_without_custom_reward_is_scored_by_verls_gsm8k_check(tmp_path: Path) -> None:
    translated, out = verl_run(tmp_path, script_overrides(gsm8k_home(tmp_path)), "verl-default")
    assert "verl scores data_source 'openai/gsm8k' with gsm8k.compute_score" in translated.stderr
    train, _ = rows(out)
    assert [r["step"] for r in train] == [1, 2]
    assert all(r["reward/fail_frac"] == 0.0 and "reward/gsm8k_mean" in r for r in train)
    assert yaml.safe_load((out / "config.yaml").read_text())["reward"]["functions"] == ["gsm8k"]


def test_verl_gsm8k_example_with_verls_own_scorer_as_custom_reward(tmp_path: Path) -> None:
    overrides = [*script_overrides(gsm8k_home(tmp_path)), f"custom_reward_function.path={VERL / 'gsm8k.py'}"]
    _, out = verl_run(tmp_path, overrides, "verl-custom")
    train, _ = rows(out)
    assert [r["step"] for r in train] == [1, 2]
    assert all(r["reward/fail_frac"] == 0.0 and "reward/compute_score_mean" in r for r in train)


def test_verls_fully_resolved_config(tmp_path: Path) -> None:
    """PPO with a critic from verl's own generated config: `${...}` resolved (the run directory name is
    checkpoints/verl_examples/gsm8k, not a literal `${trainer.project_name}`), a message of a few lines."""
    home = gsm8k_home(tmp_path)
    data = [f"data.train_files={home}/data/gsm8k/train.parquet", f"data.val_files={home}/data/gsm8k/test.parquet",
            "critic.model.path=tiny", "critic.ppo_micro_batch_size_per_gpu=8"]  # fmt: skip
    config = tmp_path / "ppo.yaml"
    translated = run("config", "from-verl", str(VERL / "_generated_ppo_trainer.yaml"), *data, *VERL_SHRINK,
                     "-o", str(config), cwd=tmp_path)  # fmt: skip
    assert len(translated.stderr) < 4000 and "${" not in config.read_text().split("\n# ")[-1]
    written = yaml.safe_load(config.read_text())
    assert written["train"]["output_dir"] == "checkpoints/verl_examples/gsm8k"
    run("train", "--config", str(config), "--set", "data.eval_size=2", cwd=tmp_path)
    train, _ = rows(tmp_path / "checkpoints" / "verl_examples" / "gsm8k")
    assert [r["step"] for r in train] == [1, 2]


# ------------------------------------------------------------------------------------------ trainer_state


STATE_REWARD = '''
def at_last_step(completions, trainer_state, **kwargs):
    """A TRL-style reward reading trainer_state (a curriculum would): 1.0 once global_step reaches max_steps."""
    return [float(trainer_state.global_step == trainer_state.max_steps) for _ in completions]
'''


def test_a_reward_reading_trainer_state_gets_it_in_evaluation_too(tmp_path: Path) -> None:
    (tmp_path / "state_reward.py").write_text(STATE_REWARD)
    out = tmp_path / "state-run"
    run("train", "--model", "tiny", "--steps", "2", "--output-dir", str(out),
        "--set", "reward.functions=[state_reward.py:at_last_step]", "--set", "rollout.prompts_per_step=2",
        "--set", "rollout.group_size=2", "--set", "rollout.max_new_tokens=4", "--set", "data.eval_size=2",
        cwd=tmp_path)  # fmt: skip
    train, evals = rows(out)
    assert [r["step"] for r in train] == [1, 2] and all(r["reward/fail_frac"] == 0.0 for r in train)
    # before training the state says step 0 of 2, after it step 2 of 2 (was None: every eval sample failed)
    assert [r["eval/accuracy"] for r in evals] == [0.0, 1.0]
