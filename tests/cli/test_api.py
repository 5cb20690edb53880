"""The Python API, `grpokit.train(...)`, as a notebook uses it: a script run as a real subprocess on the tiny model,
with an in-memory conversational `datasets.Dataset`, a list-of-dicts eval set and reward functions defined in it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from grpokit.api import dotted_overrides, qualified_name, reward_specs
from grpokit.config import ConfigError

pytest.importorskip("datasets")

NOTEBOOK = '''
import json
import sys

import grpokit
from datasets import Dataset
from trl.rewards import think_format_reward


def brevity(completions, **kwargs):
    """TRL-style: conversational completions are message lists."""
    return [-len(c[0]["content"]) / 100 for c in completions]


def make_bonus(value):
    def bonus(completions, examples):  # grpokit-style, a closure
        return [value] * len(completions)
    return bonus


def question(a, b):
    return [{"role": "user", "content": f"What is {a} + {b}?"}]


train = Dataset.from_list([{"prompt": question(a, b), "answer": str(a + b)} for a in range(4) for b in range(4)])
held_out = [{"prompt": question(a, 9), "answer": str(a + 9)} for a in range(3)]
result = grpokit.train(
    recipe="grpo",
    model="tiny",
    train_dataset=train,
    eval_dataset=held_out,
    reward_funcs=[brevity, make_bonus(0.5), think_format_reward, "exact_numeric"],
    steps=2,
    prompts_per_step=2,
    group_size=4,
    max_new_tokens=8,
    eval_size=2,
    out=sys.argv[1],
    run_name="nb",
    **{"algo.eps_high": 0.3},
)
print(json.dumps({"run_dir": str(result.run_dir), "final": str(result.final_model)}))
'''


def test_notebook_script_trains_with_in_memory_data_and_functions(tmp_path: Path) -> None:
    script = tmp_path / "notebook.py"
    script.write_text(NOTEBOOK)
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "runs")], capture_output=True, text=True, env=env, timeout=600
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    run = Path(out["run_dir"])
    assert run == tmp_path / "runs" / "nb" and out["final"] == str(run / "final")
    text = (run / "config.yaml").read_text()
    assert "<function" not in text
    cfg = yaml.safe_load(text)
    assert cfg["reward"]["functions"] == [
        "__main__:brevity",
        "__main__:make_bonus.<locals>.bonus",
        "trl.rewards.format_rewards:think_format_reward",
        "exact_numeric",
    ]
    assert cfg["data"]["task"] == str((run / "data" / "train").resolve())
    assert cfg["data"]["eval_data"] == str((run / "data" / "eval").resolve())
    assert (cfg["train"]["steps"], cfg["rollout"]["group_size"], cfg["algo"]["eps_high"]) == (2, 4, 0.3)
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in rows if "reward/mean" in r]
    assert [r["step"] for r in steps] == [1, 2]
    for r in steps:
        assert r["reward/fail_frac"] == 0.0 and r["reward/bonus_mean"] == 0.5
        assert r["reward/brevity_mean"] < 0 and r["reward/think_format_reward_mean"] == 0.0
    evals = [r for r in rows if "eval/accuracy" in r]
    assert evals and all(r["eval/n"] == 2 for r in evals)  # two of the three list-of-dicts held-out prompts


def test_overrides_by_dotted_key_section_or_bare_name() -> None:
    got = dotted_overrides({"steps": 3, "lr": 1e-6, "algo.eps_high": 0.3, "rollout": {"group_size": 4}})
    assert got == {"train.steps": 3, "train.lr": 1e-6, "algo.eps_high": 0.3, "rollout.group_size": 4}
    assert dotted_overrides({"system_prompt": "Be brief.", "answer_key": None}) == {
        "data.system_prompt": "Be brief.",
        "data.answer_key": None,
    }
    with pytest.raises(ConfigError, match=r"unknown keyword stepz=2\. Did you mean 'steps'"):
        dotted_overrides({"stepz": 2})


def test_reward_functions_by_qualified_name() -> None:
    def local(completions, examples):
        return [0.0] * len(completions)

    names, functions = reward_specs([local, "exact_numeric"])
    assert names == [qualified_name(local), "exact_numeric"]
    assert names[0].endswith("test_api:test_reward_functions_by_qualified_name.<locals>.local")
    assert functions == {names[0]: local}
    with pytest.raises(ConfigError, match=r"two different functions are both named '.*<lambda>'"):
        reward_specs([lambda c, e: c, lambda c, e: c])
    with pytest.raises(ConfigError, match=r"reward_funcs: 3 is neither a function nor a reward name"):
        reward_specs([3])


def test_functions_in_overrides_are_recorded_by_name_and_never_stringified(tmp_path: Path) -> None:
    from grpokit.api import train
    from grpokit.config import build_config

    def scorer(completions, examples):
        return [0.0] * len(completions)

    with pytest.raises(ConfigError, match=r"reward.functions=.*a function is not a config value.*reward_funcs"):
        build_config("grpo", **{"reward.functions": [scorer]})
    with pytest.raises(ConfigError, match=r"give the reward functions once"):
        train(model="tiny", reward_funcs=[scorer], reward={"functions": [scorer]}, out=str(tmp_path))


def test_prompt_only_data_without_reward_functions_is_one_clear_error(tmp_path: Path) -> None:
    from grpokit.config import build_config
    from grpokit.training.session import open_session

    data = tmp_path / "prompts.jsonl"
    data.write_text("".join(json.dumps({"prompt": f"Tell a joke about {w}."}) + "\n" for w in ("cats", "dogs")))
    cfg = build_config("grpo", overrides=["data.answer_key=null", "model.name=tiny"], **{"data.task": str(data)})
    assert cfg.data.answer_key is None
    with pytest.raises(ValueError, match=r"reward.functions is empty and data.answer_key is null"):
        open_session(cfg)


def test_output_dir_is_the_run_directory_claimed_as_the_cli_claims_it(tmp_path: Path) -> None:
    """`grpokit.train(output_dir=...)` writes the run into exactly that folder (TRL's meaning), claimed with the
    CLI's marker; a second run into it is refused; a run name that would leave `out` is refused."""
    from grpokit.api import train
    from grpokit.run.directory import MARKER
    from grpokit.run.output_dir import OutputDirError

    small = dict(model="tiny", steps=1, prompts_per_step=1, group_size=2, max_new_tokens=2, eval_size=1)
    exact, parent = tmp_path / "exact", tmp_path / "parent"
    result = train(output_dir=str(exact), out=str(parent), **small)
    assert result.run_dir == exact and (exact / MARKER).exists() and (exact / "metrics.jsonl").exists()
    assert not parent.exists()
    with pytest.raises(OutputDirError, match="already holds a run"):
        train(output_dir=str(exact), **small)
    with pytest.raises(OutputDirError, match="not a plain folder name"):
        train(out=str(parent), run_name="../escaped", **small)
    assert not (tmp_path / "escaped").exists()


def live_children() -> set[int]:
    """Process ids of this process's children that have not been reaped (Linux /proc)."""
    return {int(pid) for task in Path("/proc/self/task").iterdir() for pid in (task / "children").read_text().split()}


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads child processes from Linux /proc")
def test_api_prints_config_warnings_and_closes_a_multi_turn_session(
    tmp_path: Path, capfd: pytest.CaptureFixture
) -> None:
    """`grpokit.train` runs through `grpokit.training.run.run` as the command line does: the config's warning is
    printed, and the multi-turn run's tool worker (add2-tool's calculator, a sandboxed child process) and reward
    worker are stopped when `train` returns, not left to the garbage collector."""
    from grpokit.api import train

    before = live_children()
    result = train(
        model="tiny",
        train_dataset="add2-tool",
        steps=1,
        prompts_per_step=1,
        group_size=2,
        max_new_tokens=4,
        eval_size=1,
        out=str(tmp_path),
        run_name="agent",
        critic={"lr": 1e-4},  # grpo trains no critic: a setting with no effect, which the config warns about
    )
    assert live_children() - before == set()  # checked before anything could collect the trainer
    out = capfd.readouterr().out
    assert "warning: critic.lr=0.0001 has no effect: recipe 'grpo' trains no critic" in out
    assert result.run_dir == tmp_path / "agent" and (result.run_dir / "final").is_dir()
    rows = [json.loads(x) for x in (result.run_dir / "metrics.jsonl").read_text().splitlines()]
    assert any("episode/turns_mean" in r for r in rows)  # it trained on episodes
