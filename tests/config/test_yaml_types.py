"""YAML values keep the type the key declares, and a key given twice is refused (issue 46 item 5): `--set` and a
`--config` file's scalars are read as written and typed by their key (`no`, `1.10`, `12:30`, `010` stay that text
for a str key; `010` is 10 for an int key), where YAML 1.1 made them False, 1.1, 750 and 8."""

from __future__ import annotations

from pathlib import Path

import pytest

from grpokit.cli.main import main
from grpokit.common import safe_yaml
from grpokit.config import ConfigError, build_config


@pytest.mark.parametrize("text", ["no", "1.10", "12:30", "010", "~x", "0x1F"])
def test_set_value_of_a_str_key_is_the_literal_text(text: str) -> None:
    cfg = build_config("grpo", overrides=[f"data.task={text}", f"model.name={text}"])
    assert cfg.data.task == text and cfg.model.name == text


def test_set_value_of_an_int_key_is_decimal_and_sexagesimal_is_refused() -> None:
    assert build_config("grpo", overrides=["train.steps=010"]).train.steps == 10
    with pytest.raises(ConfigError, match=r"train.steps='12:30' must be an integer"):
        build_config("grpo", overrides=["train.steps=12:30"])


def test_set_value_of_bool_float_list_and_mapping_keys() -> None:
    cfg = build_config(
        "grpo",
        overrides=[
            "train.lr=1.10e-6",
            "reward.functions=[no, 1.10]",
            "monitor.thresholds={entropy_collapse: {}}",
            "model.trust_remote_code=no",
        ],
    )
    assert cfg.train.lr == pytest.approx(1.1e-6)
    assert cfg.reward.functions == ["no", "1.10"]
    assert cfg.monitor.thresholds == {"entropy_collapse": {}}
    assert cfg.model.trust_remote_code is False


def test_config_file_scalars_keep_their_text_for_str_keys(tmp_path: Path) -> None:
    f = tmp_path / "c.yaml"
    f.write_text("data:\n  task: no\nmodel:\n  name: 1.10\ntrain:\n  steps: 010\n" + "reward:\n  functions: [m:f]\n")
    cfg = build_config("grpo", config_file=str(f))
    assert (cfg.data.task, cfg.model.name, cfg.train.steps) == ("no", "1.10", 10)


def test_a_config_section_given_twice_is_refused_naming_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "c.yaml"
    f.write_text("train:\n  steps: 3\ndata:\n  task: add1\ntrain:\n  lr: 1.0e-5\n")
    assert main(["train", "--config", str(f)]) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(err) == 1, err
    assert str(f) in err[0] and "line 5" in err[0] and "key 'train' given twice (first on line 1)" in err[0]


def test_a_key_given_twice_in_a_section_or_a_set_value_is_refused() -> None:
    with pytest.raises(safe_yaml.DuplicateKeyError, match="key 'lr' given twice"):
        safe_yaml.load("train:\n  lr: 1\n  lr: 2\n")
    with pytest.raises(ConfigError, match="key 'a' given twice"):
        build_config("grpo", overrides=["monitor.thresholds={a: 1, a: 2}"])
    assert safe_yaml.load("b: &b {x: 1}\nc:\n  <<: *b\n  x: 2\n") == {"b": {"x": 1}, "c": {"x": 2}}  # merge keeps
