"""A reward model whose chat template is hostile (it reaches for Python internals, or raises) gives one line naming
the template's file, through the manager as a counted reward failure, not a traceback."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from tiny_reward_model import build_tiny_reward_model

from grpokit.data import Example
from grpokit.rewards import RewardManager

HOSTILE = {
    "sandbox": "{{ ''.__class__.__mro__[1].__subclasses__() }}",
    "raises": "{{ raise_exception('this template refuses every conversation') }}",
}


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_a_hostile_reward_model_template_is_one_line(tmp_path: Path, embedded_model_dir: Path, kind: str) -> None:
    rm = build_tiny_reward_model(tmp_path / "rm", embedded_model_dir)
    for name in ("chat_template.jinja", "chat_template.json"):
        (rm / name).unlink(missing_ok=True)
    cfg = json.loads((rm / "tokenizer_config.json").read_text())
    cfg["chat_template"] = HOSTILE[kind]
    (rm / "tokenizer_config.json").write_text(json.dumps(cfg))
    messages = [{"role": "user", "content": "2+2?"}]
    with RewardManager([(str(rm), 1.0)], max_fail_frac=1.0) as m:
        result = m.score(["4"], [Example("2+2?", "4", messages=messages)])
    [failure] = result.failures
    assert "the chat template failed to render" in failure.message and "\n" not in failure.message
    assert str(rm) in failure.message
    shutil.rmtree(rm)
