"""Resume trusts only a checkpoint whose numbers a run can have written and whose optimizer state fits the model
(issue 46 item 1): an edited state.json (a negative or 10^18 prompt position, a NaN coefficient, step 10^18) or an
optimizer state of another shape is refused in one line naming the field and the value, and nothing is restored.
Real checkpoints of a tiny model, edited on disk."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from grpokit.models import build_tiny_model
from grpokit.run.checkpoint import CheckpointError, load_checkpoint, load_latest, read_state, save_checkpoint


def _constant(step: int) -> float:
    return 1.0


def _parts(model: torch.nn.Module) -> dict:
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, _constant)
    return {"modules": {"model": model}, "optimizer": opt, "scheduler": sched}


def _checkpoint(run: Path, step: int, model: torch.nn.Module) -> Path:
    parts = _parts(model)
    model(torch.tensor([[1, 2, 3]])).logits.sum().backward()
    parts["optimizer"].step()
    state = {"data_position": 4 * step, "group_counter": 4 * step, "kl_coef": 0.05, "entropy_coef": 0.0}
    return save_checkpoint(run, step, state=state, keep=5, **parts)


@pytest.fixture(scope="module")
def model() -> torch.nn.Module:
    return build_tiny_model(vocab_size=32, hidden=16, layers=1, heads=2)


def _edit_state(path: Path, **values: object) -> None:
    file = path / "trainer_state" / "state.json"
    state = json.loads(file.read_text())
    for key, value in values.items():
        if key == "rank0_data_position":
            state["ranks"] = [{"data_position": value, "group_counter": 1, "rng": None}]
        else:
            state[key] = value
    file.write_text(json.dumps(state))


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [
        ("data_position", -5, "data_position is -5"),
        ("data_position", 10**18, "data_position is 1000000000000000000"),
        ("group_counter", -1, "group_counter is -1"),
        ("kl_coef", float("nan"), "kl_coef is nan"),
        ("entropy_coef", float("inf"), "entropy_coef is inf"),
        ("kl_coef", -0.5, "kl_coef is -0.5"),
        ("step", 10**18, "step is 1000000000000000000"),
        ("rank0_data_position", -3, "ranks[0].data_position is -3"),
    ],
)
def test_an_out_of_range_state_is_refused_naming_the_field_and_value(
    tmp_path: Path, model: torch.nn.Module, field: str, value: object, said: str
) -> None:
    path = _checkpoint(tmp_path / "run", 2, model)
    _edit_state(path, **{field: value})
    with pytest.raises(CheckpointError) as e:
        read_state(path)
    line = str(e.value)
    assert said in line and "step_2/trainer_state/state.json" in line and "\n" not in line
    assert "outside [" in line and "start a new run" in line


def test_an_edited_newest_state_falls_back_to_the_previous_checkpoint_in_one_line(
    tmp_path: Path, model: torch.nn.Module
) -> None:
    run = tmp_path / "run"
    _checkpoint(run, 1, model)
    _edit_state(_checkpoint(run, 2, model), data_position=10**18)
    said: list[str] = []
    path, state = load_latest(run, say=said.append, **_parts(model))
    assert path.name == "step_1" and state["data_position"] == 4
    assert len(said) == 1 and "step_2 is unreadable" in said[0] and "data_position is 1000000000000000000" in said[0]
    assert (run / "checkpoints" / "step_2.corrupt").is_dir()


def _edit_optimizer(path: Path, edit: object) -> None:
    file = path / "trainer_state" / "optimizer.pt"
    ts = torch.load(file, weights_only=True)
    edit(ts["optimizer"])  # type: ignore[operator]
    torch.save(ts, file)


def _reshape_first_moment(sd: dict) -> None:
    entry = sd["state"][0]
    entry["exp_avg"] = torch.zeros(entry["exp_avg"].numel() + 1)


def _drop_a_parameter(sd: dict) -> None:
    sd["param_groups"][0]["params"] = sd["param_groups"][0]["params"][:-1]


@pytest.mark.parametrize(
    ("edit", "said"),
    [(_reshape_first_moment, "exp_avg of parameter 0 has shape"), (_drop_a_parameter, "group 0 holds")],
)
def test_an_optimizer_state_shaped_unlike_the_model_is_refused_before_anything_is_restored(
    tmp_path: Path, model: torch.nn.Module, edit: object, said: str
) -> None:
    path = _checkpoint(tmp_path / "run", 3, model)
    _edit_optimizer(path, edit)
    fresh = build_tiny_model(vocab_size=32, hidden=16, layers=1, heads=2, seed=1)
    before = {k: v.clone() for k, v in fresh.state_dict().items()}
    parts = _parts(fresh)
    with pytest.raises(CheckpointError) as e:
        load_checkpoint(path, **parts)
    line = str(e.value)
    assert said in line and "optimizer.pt" in line and "does not fit this model" in line and "\n" not in line
    assert all(torch.equal(before[k], v) for k, v in fresh.state_dict().items())  # the weights were not touched
    assert parts["optimizer"].state_dict()["state"] == {}
