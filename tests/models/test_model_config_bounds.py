"""A model directory's config.json is read with bounds and its size fields range-checked before transformers builds
anything (issue 46 item 5): nesting 100,000 deep, 20,000 layers (6 GiB in 118 s before), a huge vocab_size or
intermediate_size, and a FIFO as config.json are each one ModelSpecError line naming the file and the field."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from grpokit.models.loading import MODEL_SIZE_LIMITS, load_model_and_tokenizer

LLAMA = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "num_hidden_layers": 2,
    "vocab_size": 1000,
}


def model_dir(tmp_path: Path, body: str) -> Path:
    d = tmp_path / "model"
    d.mkdir()
    (d / "config.json").write_text(body)
    return d


@pytest.mark.parametrize(
    ("field", "value"),
    [("num_hidden_layers", 20_000), ("vocab_size", 10**12), ("intermediate_size", 2**40), ("hidden_size", -5)],
)
def test_model_size_field_out_of_range_is_one_line(field: str, value: int, tmp_path: Path) -> None:
    from grpokit.models import ModelSpecError

    d = model_dir(tmp_path, json.dumps({**LLAMA, field: value}))
    t0 = time.monotonic()
    with pytest.raises(ModelSpecError) as e:
        load_model_and_tokenizer(str(d))
    assert time.monotonic() - t0 < 5
    msg = str(e.value)
    assert "\n" not in msg and str(d / "config.json") in msg
    assert f"{field}={value} is out of range" in msg and f"[1, {MODEL_SIZE_LIMITS[field]}]" in msg


def test_model_config_nested_100000_deep_is_one_line(tmp_path: Path) -> None:
    from grpokit.models import ModelSpecError

    d = model_dir(tmp_path, '{"a": ' + "[" * 100_000 + "]" * 100_000 + "}")
    with pytest.raises(ModelSpecError, match="config.json: JSON nested too deeply to be read"):
        load_model_and_tokenizer(str(d))


def test_model_config_that_is_a_fifo_is_one_line(tmp_path: Path) -> None:
    from grpokit.models import ModelSpecError

    d = tmp_path / "model"
    d.mkdir()
    os.mkfifo(d / "config.json")
    with pytest.raises(ModelSpecError, match="a FIFO"):
        load_model_and_tokenizer(str(d))
