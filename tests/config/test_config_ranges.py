"""Every numeric config key has a range, checked before anything is built (issue 38): `train.steps=1e400` raised
OverflowError, `rollout.group_size=1000000000` died in the CPU allocator and `reward.timeout_s=1e308` was accepted.
Each absurd value is now one ConfigError (exit 2 on the command line) naming the key, the value and the range;
every recipe's and default value lies inside its range."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import typing
from pathlib import Path

import pytest

from grpokit.config import Config, ConfigError, build_config, list_recipes, resolve_config
from grpokit.config.ranges import RANGES, table

NUMBERS = (int, float)


def numeric_keys() -> list[str]:
    """Every config key whose type is a number, an optional number or a list of numbers."""
    keys = []
    cfg = Config()
    for section in dataclasses.fields(cfg):
        sub = getattr(cfg, section.name)
        if not dataclasses.is_dataclass(sub):
            continue
        hints = typing.get_type_hints(type(sub))
        for f in dataclasses.fields(sub):
            tp = hints[f.name]
            args = set(typing.get_args(tp)) - {type(None)}
            if tp in NUMBERS or (args and args <= set(NUMBERS)):
                keys.append(f"{section.name}.{f.name}")
    return keys


KEYS = numeric_keys()
ABSURD = ["1e400", "-1e400", "nan", "inf", "1e300", "-1e300"]
DOCS = Path(__file__).parents[2] / "docs" / "training.md"


def test_every_numeric_key_has_a_range_and_every_range_a_key() -> None:
    assert len(KEYS) > 90
    assert sorted(set(KEYS) - set(RANGES)) == []
    assert sorted(set(RANGES) - set(KEYS)) == []


def test_the_ranges_in_the_docs_are_the_ranges_checked() -> None:
    assert table() in DOCS.read_text()


@pytest.mark.parametrize("key", KEYS)
def test_an_absurd_value_of_any_numeric_key_is_one_error_naming_key_value_and_range(key: str) -> None:
    fix = RANGES[key].fix()
    for value in ABSURD:
        shown = f"[{value}]" if key == "reward.weights" else value
        with pytest.raises(ConfigError) as e:
            build_config("grpo", overrides=[f"{key}={shown}"])
        message = str(e.value)
        assert message.startswith(f"{key}=") and " is invalid" in message and fix in message, (value, message)
        assert "\n" not in message


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("train.steps=1e400", "train.steps=1e400 is invalid: use 0 or more (at most 10000000)"),
        ("rollout.group_size=1000000000", "rollout.group_size=1000000000 is invalid: use 1 or more (at most 4096)"),
        ("reward.timeout_s=1e308", "reward.timeout_s=1e+308 is invalid: use > 0 (at most 86400)"),
        ("train.seed=-1", "train.seed=-1 is invalid: use 0 or more (at most 4294967295)"),  # numpy's seed range
        ("rollout.eval_temperature=0", "rollout.eval_temperature=0.0 is invalid: use > 0 (at most 100)"),
        ("reward.weights=[1, 1e9]", "reward.weights=[1.0, 1000000000.0] is invalid (each weight: use a value in "),
        ("train.adam_beta2=1", "train.adam_beta2=1.0 is invalid: use a value in [0, 1)"),  # Adam would divide by 0
    ],
)
def test_the_probes_of_the_issue_are_refused_with_their_range(override: str, message: str) -> None:
    with pytest.raises(ConfigError) as e:
        build_config("grpo", overrides=[override])
    assert str(e.value).startswith(message)


def test_extreme_values_on_the_command_line_are_one_line_exit_2(tmp_path: Path) -> None:
    for override, line in [
        ("train.steps=1e400", "config error: train.steps=1e400 is invalid: use 0 or more (at most 10000000)"),
        ("rollout.group_size=1000000000", "config error: rollout.group_size=1000000000 is invalid: use 1 or more "),
        ("reward.timeout_s=1e308", "config error: reward.timeout_s=1e+308 is invalid: use > 0 (at most 86400)"),
    ]:
        p = subprocess.run(
            [
                sys.executable,
                "-m",
                "grpokit.cli",
                "train",
                "--model",
                "tiny",
                "--out",
                str(tmp_path),
                "--set",
                override,
            ],
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "HF_HUB_OFFLINE": "1"},
        )
        assert p.returncode == 2, p.stderr[-2000:]
        assert p.stderr.strip().startswith(line) and len(p.stderr.strip().splitlines()) == 1, p.stderr[-2000:]
        assert not any(tmp_path.iterdir())  # nothing was started


def test_a_config_file_value_out_of_range_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "run.yaml"
    path.write_text("rollout:\n  prompts_per_step: 100000000\n")
    with pytest.raises(ConfigError, match=r"run.yaml: rollout.prompts_per_step=100000000 is invalid: use 1 or more"):
        build_config("grpo", config_file=str(path))


def test_a_config_changed_in_code_is_range_checked_when_resolved() -> None:
    cfg = build_config("grpo")
    cfg.rollout.max_new_tokens = 0  # VAPO's alpha divides by it: refused before anything is derived from it
    cfg.algo.advantage, cfg.algo.gae_alpha = "vapo_gae", None
    with pytest.raises(ConfigError, match=r"rollout.max_new_tokens=0 is invalid: use 1 or more"):
        resolve_config(cfg)


@pytest.mark.parametrize("recipe", list_recipes())
def test_every_recipe_and_the_range_ends_are_accepted(recipe: str) -> None:
    build_config(recipe)  # defaults and recipe values lie in their ranges
    ends = ["rollout.group_size=4096", "rollout.group_size=1", "train.steps=10000000", "train.steps=0"]
    ends += ["reward.timeout_s=86400", "train.seed=4294967295", "algo.kl_coef=0", "data.max_prompt_tokens=null"]
    if recipe == "grpo":
        cfg = build_config(recipe, overrides=[*ends[1:], "algo.advantage=reinforce_pp"])
        assert (cfg.rollout.group_size, cfg.train.steps, cfg.reward.timeout_s) == (1, 0, 86400.0)
        assert build_config(recipe, overrides=ends[:1]).rollout.group_size == 4096


def test_a_grad_norm_of_zero_means_no_clipping_as_in_trl() -> None:
    """TRL (transformers' Trainer) reads max_grad_norm=0 as "do not clip": accepted, and an optimizer step then
    measures the norm and leaves the gradient as it is (a clip at 0 used to scale every gradient to zero)."""
    import torch

    from grpokit.training.critic import CriticOptimizer

    cfg = resolve_config(build_config(overrides=["train.max_grad_norm=0", "critic.max_grad_norm=0"]))
    assert cfg.train.max_grad_norm == 0.0 and cfg.critic.max_grad_norm == 0.0
    layer = torch.nn.Linear(2, 1, bias=False)
    opt = CriticOptimizer(layer, cfg.critic)  # type: ignore[arg-type]
    layer.weight.grad = torch.tensor([[30.0, 40.0]])
    assert opt.step() == 50.0 and layer.weight.grad.tolist() == [[30.0, 40.0]]
