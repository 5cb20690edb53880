"""Checkpoints are Hugging Face directories (the tiny model, real files): transformers and `grpokit eval` load
them; a LoRA run's checkpoint is a PEFT adapter (plus a merged copy on request) and resumes exactly; the trainer
state lies beside the model; an unreadable newest checkpoint (truncated safetensors, bad state.json, truncated
optimizer state) is moved aside with one line and the run resumes from the previous one, continuing exactly."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from tiny_config import tiny_overrides

from grpokit.config import build_config
from grpokit.run.checkpoint import CheckpointError, list_checkpoints
from grpokit.training import Trainer, fit

FAST = tiny_overrides("model.precision=fp32", "train.lr=1e-3", drop=("train.save_every",))


def train(run_dir: Path, steps: int, extra: list[str] | None = None, *, resume: bool = False) -> Trainer:
    cfg = build_config("grpo", overrides=FAST + [f"train.steps={steps}"] + list(extra or []))
    trainer = Trainer(cfg, run_dir)
    if resume:
        trainer.restore()
    fit(trainer, None, eval_before=False)
    return trainer


def step_rows(run_dir: Path) -> list[dict]:
    rows = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [r for r in rows if "time/step" in r]


def test_checkpoint_is_a_hugging_face_directory(tmp_path: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

    trainer = train(tmp_path, 2, ["train.save_every=2"])
    ck = tmp_path / "checkpoints" / "step_2"
    for name in ("config.json", "generation_config.json", "model.safetensors", "tokenizer.json"):
        assert (ck / name).is_file(), name
    for name in ("state.json", "optimizer.pt"):
        assert (ck / "trainer_state" / name).is_file(), name
    assert not [p.name for p in ck.glob("*.safetensors") if p.name != "model.safetensors"]  # vLLM globs these
    model = AutoModelForCausalLM.from_pretrained(ck, local_files_only=True)
    for (name, p), q in zip(trainer.model.named_parameters(), model.parameters()):
        torch.testing.assert_close(p.detach(), q.detach(), rtol=0, atol=0, msg=name)
    tok = AutoTokenizer.from_pretrained(ck)
    assert tok("12 + 1")["input_ids"] == trainer.tokenizer("12 + 1")["input_ids"]
    assert GenerationConfig.from_pretrained(ck).eos_token_id == trainer.tokenizer.eos_token_id
    state = json.loads((ck / "trainer_state" / "state.json").read_text())
    assert state["step"] == 2 and state["precision"] == "fp32"

    out = subprocess.run(
        [sys.executable, "-m", "grpokit.cli", "eval", "--model", str(ck), "--task", "add1", "--n", "4", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert out.returncode == 0, out.stderr
    res = json.loads(out.stdout.strip().splitlines()[-1])
    assert res["eval/n"] == 4 and 0.0 <= res["eval/accuracy"] <= 1.0


def test_lora_checkpoint_is_a_peft_adapter_with_merged_copy_and_resumes_exactly(tmp_path: Path) -> None:
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    from grpokit.models import load_model_and_tokenizer

    extra = ["model.lora_r=4", "train.save_every=2", "train.save_merged=true", "train.lr=1e-2"]
    straight = train(tmp_path / "a", 4, extra)
    train(tmp_path / "b", 2, extra)
    ck = tmp_path / "b" / "checkpoints" / "step_2"
    assert (ck / "adapter_config.json").is_file() and (ck / "adapter_model.safetensors").is_file()
    assert not (ck / "model.safetensors").exists()  # the adapter only, not the frozen base
    merged = AutoModelForCausalLM.from_pretrained(ck / "merged", local_files_only=True)
    assert not any("lora_" in n for n, _ in merged.named_parameters())
    base, tok = load_model_and_tokenizer("tiny", dtype="fp32")
    adapted = PeftModel.from_pretrained(base, ck)
    ids = tok("3 + 4 =", return_tensors="pt")["input_ids"]
    with torch.no_grad():
        torch.testing.assert_close(adapted(ids).logits, merged(ids).logits, rtol=1e-4, atol=1e-5)

    resumed = train(tmp_path / "b", 4, extra, resume=True)
    a, b = step_rows(tmp_path / "a"), step_rows(tmp_path / "b")
    assert [r["step"] for r in b] == [1, 2, 3, 4]
    for ra, rb in zip(a, b):
        assert ra["reward/mean"] == rb["reward/mean"] and ra["actor/loss"] == rb["actor/loss"]
    for (n, p), q in zip(straight.model.named_parameters(), resumed.model.parameters()):
        torch.testing.assert_close(p, q, rtol=0, atol=0, msg=n)


def _truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


CORRUPTIONS = {
    "truncated model.safetensors": lambda ck: _truncate(ck / "model.safetensors"),
    "bad state.json": lambda ck: (ck / "trainer_state" / "state.json").write_text('{"step": 4, "data_pos'),
    "truncated optimizer state": lambda ck: _truncate(ck / "trainer_state" / "optimizer.pt"),
}


@pytest.fixture(scope="module")
def four_steps(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("four") / "run"
    train(run, 4, ["train.save_every=2", "train.save_total_limit=3"])
    return run


@pytest.mark.parametrize("kind", sorted(CORRUPTIONS))
def test_corrupt_newest_checkpoint_falls_back_to_the_previous_one(
    kind: str, four_steps: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    run = tmp_path / "run"
    shutil.copytree(four_steps, run)
    original = step_rows(run)
    CORRUPTIONS[kind](run / "checkpoints" / "step_4")
    cfg = build_config("grpo", overrides=FAST + ["train.steps=4", "train.save_every=2", "train.save_total_limit=3"])
    trainer = Trainer(cfg, run)
    assert trainer.restore() == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if "checkpoint" in ln]
    assert len(err) == 1 and "step_4 is unreadable" in err[0] and "resuming from step_2" in err[0], err
    assert (run / "checkpoints" / "step_4.corrupt").is_dir()  # kept for inspection, out of the way
    assert [p.name for p in list_checkpoints(run)] == ["step_2"]
    assert [r["step"] for r in step_rows(run)] == [1, 2]  # rows after the checkpoint go, to be redone
    if kind != "truncated model.safetensors":
        return  # one full continuation is enough: the restore path is the same
    fit(trainer, None, eval_before=False)
    redone = step_rows(run)
    assert [r["step"] for r in redone] == [1, 2, 3, 4]
    for a, b in zip(original, redone):  # the redone steps are the steps the run made the first time
        assert a["reward/mean"] == b["reward/mean"] and a["actor/loss"] == b["actor/loss"]


def test_no_readable_checkpoint_is_one_clear_error(four_steps: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(four_steps, run)
    for ck in list_checkpoints(run):
        _truncate(ck / "model.safetensors")
    cfg = build_config("grpo", overrides=FAST + ["train.steps=4"])
    trainer = Trainer(cfg, run)
    before = [p.detach().clone() for p in trainer.model.parameters()]
    with pytest.raises(CheckpointError, match=r"no readable checkpoint .*step_4 \(.*step_2 \("):
        trainer.restore()
    for p, q in zip(before, trainer.model.parameters()):  # nothing was half-restored
        assert torch.equal(p, q)


def test_a_half_written_checkpoint_is_ignored_and_replaced(four_steps: Path, tmp_path: Path) -> None:
    """What a kill during a write leaves (`.tmp-step_N`) is never resumed from and is replaced by the next save."""
    run = tmp_path / "run"
    shutil.copytree(four_steps, run)
    tmp = run / "checkpoints" / ".tmp-step_6"
    shutil.copytree(run / "checkpoints" / "step_4", tmp)
    _truncate(tmp / "model.safetensors")
    trainer = train(run, 6, ["train.save_every=2", "train.save_total_limit=3"], resume=True)
    assert trainer.step == 6
    assert [p.name for p in list_checkpoints(run)] == ["step_2", "step_4", "step_6"]
    assert not tmp.exists()
    json.loads((run / "checkpoints" / "step_6" / "trainer_state" / "state.json").read_text())


class _Payload:
    """Unpickled, it would run a shell command (what a hostile optimizer.pt or state.json carries)."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _restore_lines(run: Path, capsys: pytest.CaptureFixture) -> tuple[int, list[str]]:
    cfg = build_config("grpo", overrides=FAST + ["train.steps=4", "train.save_every=2", "train.save_total_limit=3"])
    step = Trainer(cfg, run).restore()
    return step, [ln for ln in capsys.readouterr().err.splitlines() if "checkpoint" in ln]


def test_a_crafted_optimizer_pickle_is_refused_never_run(
    four_steps: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """optimizer.pt holds tensors and numbers only and is read with weights_only=True: a pickle that would run a
    command is refused in one line (the run resumes from the previous checkpoint, saying so). One written before
    the RNG states were plain numbers (numpy arrays, tensors, tuples) still loads: numpy's rebuilder runs no code."""
    ck = four_steps / "checkpoints" / "step_4"
    assert torch.serialization.get_unsafe_globals_in_checkpoint(ck / "trainer_state" / "optimizer.pt") == []
    run = tmp_path / "run"
    shutil.copytree(four_steps, run)
    marker = tmp_path / "pwned"
    optimizer_pt = run / "checkpoints" / "step_4" / "trainer_state" / "optimizer.pt"
    state = torch.load(optimizer_pt, weights_only=True)
    torch.save({**state, "extra": {"hook": _Payload(marker)}}, optimizer_pt)
    from grpokit.run.checkpoint import read_trainer_state

    with pytest.raises(CheckpointError) as info:
        read_trainer_state(run / "checkpoints" / "step_4", optimizer_pt)
    assert not marker.exists()
    message = str(info.value)
    assert "\n" not in message and "refused" in message and "posix.system" in message
    step, lines = _restore_lines(run, capsys)
    assert not marker.exists() and step == 2
    assert len(lines) == 1 and "step_4 is unreadable" in lines[0] and "refused" in lines[0]
    assert _legacy_rng_checkpoint_loads(four_steps, tmp_path / "legacy", capsys)


def _legacy_rng_checkpoint_loads(four_steps: Path, run: Path, capsys: pytest.CaptureFixture) -> bool:
    """Whether a copy of `four_steps` whose step_4 stores its RNG states the old way resumes from step 4."""
    import numpy as np

    shutil.copytree(four_steps, run)
    optimizer_pt = run / "checkpoints" / "step_4" / "trainer_state" / "optimizer.pt"
    state = torch.load(optimizer_pt, weights_only=True)
    plain = state["rng"]
    numpy_state = (plain["numpy"][0], np.array(plain["numpy"][1], dtype=np.uint32), *plain["numpy"][2:])
    old = {"torch": torch.tensor(plain["torch"], dtype=torch.uint8), "numpy": numpy_state, "cuda": None}
    old["python"] = (plain["python"][0], tuple(plain["python"][1]), plain["python"][2])
    torch.save({**state, "rng": old}, optimizer_pt)
    step, lines = _restore_lines(run, capsys)
    return step == 4 and lines == []


def test_a_pickled_rng_state_in_state_json_is_refused_never_run(
    four_steps: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """state.json's per-rank RNG states are plain numbers; a base64 pickle there (what a hostile file, or an older
    grpokit, wrote) is refused before anything is restored, even in a one-process run, and never unpickled."""
    import base64
    import pickle

    run = tmp_path / "run"
    shutil.copytree(four_steps, run)
    marker = tmp_path / "pwned"
    state_json = run / "checkpoints" / "step_4" / "trainer_state" / "state.json"
    state = json.loads(state_json.read_text())
    blob = base64.b64encode(pickle.dumps(_Payload(marker))).decode()
    state["ranks"] = [{"data_position": 0, "group_counter": 0, "rng": blob}]
    state_json.write_text(json.dumps(state))
    step, lines = _restore_lines(run, capsys)
    assert not marker.exists()
    assert step == 2 and len(lines) == 1 and "ranks[0].rng is a pickled RNG state" in lines[0]
    assert "never unpickled" in lines[0]


def _disk_bytes(root: Path) -> int:
    """Bytes on disk under `root`, each hard-linked file counted once (as `du` counts)."""
    seen: set[tuple[int, int]] = set()
    total = 0
    for f in root.rglob("*"):
        st = f.lstat()
        if f.is_file() and (st.st_dev, st.st_ino) not in seen:
            seen.add((st.st_dev, st.st_ino))
            total += st.st_size
    return total


def test_final_model_shares_the_last_checkpoints_weights_and_save_total_limit_prunes(tmp_path: Path) -> None:
    trainer = train(tmp_path, 3, ["train.save_every=1", "train.save_total_limit=2"])
    assert [p.name for p in list_checkpoints(tmp_path)] == ["step_2", "step_3"]  # TRL's save_total_limit
    final, last = tmp_path / "final" / "model.safetensors", tmp_path / "checkpoints" / "step_3" / "model.safetensors"
    assert os.path.samefile(final, last)  # one file, two names: the weights are stored once
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tmp_path / "final", local_files_only=True)
    for (name, p), q in zip(trainer.model.named_parameters(), model.parameters()):
        torch.testing.assert_close(p.detach(), q.detach(), rtol=0, atol=0, msg=name)
    # a later final model replaces the directory, never writes into the shared file: the checkpoint stays intact
    before = last.read_bytes()
    trainer2 = train(tmp_path, 4, ["train.save_every=0"], resume=True)
    assert trainer2.step == 4 and last.read_bytes() == before
    assert os.path.samefile(
        tmp_path / "final" / "model.safetensors", tmp_path / "checkpoints" / "step_4" / "model.safetensors"
    )


def test_save_only_model_writes_no_trainer_state_and_refuses_resume_in_one_line(tmp_path: Path) -> None:
    """train.save_only_model=true (TRL's meaning): the model only, a third of the size; continuing it is refused in
    one line that names both ways on, and restoring it at its own last step (a run killed before its final model)
    loads the model."""
    full = tmp_path / "full"
    train(full, 1, ["train.save_every=1"])
    slim = tmp_path / "slim"
    trainer = train(slim, 1, ["train.save_every=1", "train.save_only_model=true", "train.save_total_limit=1"])
    ck = slim / "checkpoints" / "step_1"
    assert not (ck / "trainer_state" / "optimizer.pt").exists() and (ck / "model.safetensors").is_file()
    # AdamW keeps two moments per weight: the trainer state is about twice the model
    assert _disk_bytes(slim) < 0.5 * _disk_bytes(full)
    cfg = build_config("grpo", overrides=FAST + ["train.steps=2"])
    with pytest.raises(CheckpointError, match=r"save_only_model=true.*no optimizer state.*--model"):
        Trainer(cfg, slim).restore()
    with pytest.raises(CheckpointError, match=r"step_1 holds the model only.*--model .*train.save_only_model=false"):
        Trainer(cfg, slim).restore()
    assert ck.is_dir()  # whole, so never moved aside as unreadable
    again = Trainer(build_config("grpo", overrides=FAST + ["train.steps=1"]), slim)
    assert again.restore() == 1
    for p, q in zip(trainer.model.parameters(), again.model.parameters()):
        torch.testing.assert_close(p.detach(), q.detach(), rtol=0, atol=0)


def test_every_checkpoint_keeps_the_optimizer_state_by_default_as_in_trl(tmp_path: Path) -> None:
    """train.save_only_model unset: TRL's default, false. Every checkpoint holds the optimizer, scheduler and RNG
    state, a finished run's last one too (issue 45 item 6), with `final/` hard-linked to its weights (the model is
    stored once); that run restored with more steps takes its state back, AdamW's moments included."""

    def cfg(steps: int):  # noqa: ANN202
        changes = ("model.precision=fp32", f"train.steps={steps}", "train.save_every=1", "train.save_total_limit=0")
        return build_config("grpo", overrides=tiny_overrides(*changes))

    assert cfg(2).train.save_only_model is False
    run = tmp_path / "run"
    trainer = Trainer(cfg(2), run)
    fit(trainer, None, eval_before=False)
    last = run / "checkpoints" / "step_2"
    for ck in (run / "checkpoints" / "step_1", last):
        assert (ck / "trainer_state" / "optimizer.pt").is_file(), ck.name
        assert "model_only" not in json.loads((ck / "trainer_state" / "state.json").read_text())
    assert os.path.samefile(run / "final" / "model.safetensors", last / "model.safetensors")
    again = Trainer(cfg(3), run)
    assert again.restore() == 2
    want, got = trainer.optimizer.state_dict()["state"], again.optimizer.state_dict()["state"]
    assert want and sorted(got) == sorted(want)
    for key, moments in want.items():
        for name in ("exp_avg", "exp_avg_sq"):
            torch.testing.assert_close(got[key][name], moments[name], rtol=0, atol=0, msg=f"{key} {name}")
    assert again.scheduler.state_dict()["last_epoch"] == 2
