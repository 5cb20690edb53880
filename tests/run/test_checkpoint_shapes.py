"""A checkpoint whose tensor shapes are not the model's (issue 38: a transposed tensor, another model's checkpoint)
is treated as the truncated or oversized ones are: the newest is moved aside in one line and the run resumes from
the previous checkpoint; when none fits, one error names the tensor and both shapes, and nothing is half restored.
It used to end in torch's `size mismatch for model.embed_tokens.weight` traceback. Real tiny runs and files."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file
from tiny_config import tiny_overrides

from grpokit.config import build_config
from grpokit.models import build_tiny_model
from grpokit.run.checkpoint import CheckpointError, list_checkpoints
from grpokit.training import Trainer, fit

pytestmark = pytest.mark.slow

FAST = tiny_overrides("model.precision=fp32", "train.lr=1e-3", drop=("train.save_every",))
SAVES = ["train.save_every=2", "train.save_total_limit=3"]
EMBED = "model.embed_tokens.weight"


def trainer(run: Path, steps: int, extra: list[str]) -> Trainer:
    return Trainer(build_config("grpo", overrides=FAST + [f"train.steps={steps}", *SAVES, *extra]), run)


def transpose(file: Path, key: str) -> tuple[list[int], list[int]]:
    """Write `file` back with tensor `key` transposed; (its shape before, after)."""
    tensors = load_file(str(file))
    before = list(tensors[key].shape)
    tensors[key] = tensors[key].t().contiguous()
    save_file(tensors, str(file), metadata={"format": "pt"})
    return before, list(tensors[key].shape)


@pytest.fixture(scope="module")
def four_steps(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("four") / "run"
    fit(trainer(run, 4, []), None, eval_before=False)
    return run


def test_a_transposed_tensor_in_the_newest_checkpoint_falls_back_a_step(
    four_steps: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    run = tmp_path / "run"
    shutil.copytree(four_steps, run)
    model_shape, saved_shape = transpose(run / "checkpoints" / "step_4" / "model.safetensors", EMBED)
    t = trainer(run, 4, [])
    assert t.restore() == 2
    lines = [ln for ln in capsys.readouterr().err.splitlines() if "checkpoint" in ln]
    assert lines == [
        f"grpokit: checkpoint step_4 is unreadable (step_4/model: {EMBED} has shape {saved_shape} in the checkpoint "
        f"but {model_shape} in the model (a checkpoint of another model, or an edited one)), moved to "
        "step_4.corrupt; resuming from step_2"
    ]
    assert [p.name for p in list_checkpoints(run)] == ["step_2"] and (run / "checkpoints" / "step_4.corrupt").is_dir()
    step_2 = load_file(str(run / "checkpoints" / "step_2" / "model.safetensors"))
    for key, value in t.model.state_dict().items():  # step 2's weights, every one
        if key in step_2:
            assert torch.equal(value, step_2[key]), key


def test_another_models_checkpoints_are_refused_naming_both_shapes(four_steps: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(four_steps, run)
    other = build_tiny_model(vocab_size=49152, hidden=32, heads=4)  # the same architecture, half as wide
    for ck in list_checkpoints(run):
        other.save_pretrained(ck)  # model.safetensors and config.json replaced
    t = trainer(run, 4, [])
    before = {k: v.clone() for k, v in t.model.state_dict().items()}
    with pytest.raises(CheckpointError) as e:
        t.restore()
    message = str(e.value)
    assert message.startswith(f"no readable checkpoint in {run / 'checkpoints'}: step_4 (step_4/model: ")
    assert "has shape [49152, 32] in the checkpoint but [49152, 64] in the model" in message
    assert "; step_2 (step_2/model: " in message and "\n" not in message
    for key, value in t.model.state_dict().items():  # nothing was half restored
        assert torch.equal(value, before[key]), key
    p = subprocess.run(
        [sys.executable, "-m", "grpokit.cli", "train", "--resume", str(run)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(Path(__file__).resolve().parents[1])},
    )
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert p.returncode == CheckpointError.exit_code and "Traceback" not in p.stderr, p.stderr[-3000:]
    assert lines[-1] == f"{CheckpointError.label}: {message}"


def test_a_transposed_adapter_tensor_falls_back_a_step(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    run = tmp_path / "run"
    lora = ["model.lora_r=4"]
    fit(trainer(run, 4, lora), None, eval_before=False)
    adapter = run / "checkpoints" / "step_4" / "adapter_model.safetensors"
    key = next(k for k in load_file(str(adapter)) if "lora_A" in k)
    model_shape, saved_shape = transpose(adapter, key)
    capsys.readouterr()
    assert trainer(run, 4, lora).restore() == 2
    lines = [ln for ln in capsys.readouterr().err.splitlines() if "checkpoint" in ln]
    assert len(lines) == 1 and lines[0].startswith("grpokit: checkpoint step_4 is unreadable (step_4/model: ")
    assert f"{key} has shape {saved_shape} in the checkpoint but {model_shape} in the model" in lines[0]
    assert lines[0].endswith("moved to step_4.corrupt; resuming from step_2")
