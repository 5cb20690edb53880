"""Nothing is written, deleted or read through a link grpokit did not make (issue 46 item 1): a planted link in
`--output-dir`, at `--out P --name N`, at a run's `report/`, at `checkpoints/step_N`, or a link loop under
`grpokit doctor`'s path is refused in one line or passed by; and a run name is one printable folder name. Real
files, real links, the real CLI where it says the line."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

from grpokit.cli.main import main
from grpokit.models import build_tiny_model
from grpokit.monitor.readers.discovery import discover
from grpokit.run.checkpoint import latest_checkpoint, list_checkpoints, load_latest, save_checkpoint
from grpokit.run.directory import RunDirError
from grpokit.run.output_dir import OutputDirError, claim_new_run
from grpokit.training.resume import ResumeError, refuse_symlinks

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "logs"


def one_line(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(list(args))
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip() and not ln.startswith("grpokit: built-in defaults")]
    assert "Traceback" not in err and len(lines) == 1, err
    return code, lines[0]


def listing(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


# ----------------------------------------------------------------------------------------- where a new run goes


@pytest.mark.parametrize("name", ["a\nb", "run\x1b]0;owned\x07", "run\x1b[2J", "evil\u202egnp.exe", "tab\there"])
def test_a_run_name_with_a_newline_or_terminal_escape_is_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(OutputDirError, match="is not a plain folder name") as e:
        claim_new_run(tmp_path / "runs", None, "grpo", "add1", name)
    assert "\n" not in str(e.value) and "\x1b" not in str(e.value) and "\u202e" not in str(e.value)
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())
    assert claim_new_run(tmp_path / "runs", None, "grpo", "add1", "plain-name_1.0").name == "plain-name_1.0"


def test_out_and_name_that_is_a_link_is_refused_and_nothing_is_written_there(tmp_path: Path) -> None:
    elsewhere = tmp_path / "users_folder"
    elsewhere.mkdir()
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "mine").symlink_to(elsewhere)
    with pytest.raises(RunDirError, match="mine is a symbolic link") as e:
        claim_new_run(tmp_path / "runs", None, "grpo", "add1", "mine")
    assert str(elsewhere) in str(e.value)
    assert list(elsewhere.iterdir()) == []  # no claim, no config, no run written into the linked folder


@pytest.mark.parametrize("target", ["dangling", "existing"])
def test_output_dir_holding_a_planted_link_is_refused_in_one_line(
    tmp_path: Path, target: str, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    run.mkdir()
    outside = tmp_path / "outside" / "somebody_elses.jsonl"
    outside.parent.mkdir()
    if target == "existing":
        outside.write_text('{"theirs": 1}\n')
    (run / "metrics.jsonl").symlink_to(outside)
    with pytest.raises(OutputDirError, match="metrics.jsonl is a symbolic link"):
        claim_new_run(tmp_path / "runs", str(run), "grpo", "add1")
    code, line = one_line(capsys, "train", "--model", "tiny", "--steps", "1", "--output-dir", str(run))
    assert code == 2 and "metrics.jsonl is a symbolic link" in line and str(outside) in line
    assert listing(outside.parent) == ({} if target == "dangling" else {outside.name: b'{"theirs": 1}\n'})
    assert sorted(p.name for p in run.iterdir()) == ["metrics.jsonl"]  # no claim, no config beside the link


# ------------------------------------------------------------------------------------------------------- report


def test_report_into_a_run_whose_report_folder_is_a_link_writes_and_deletes_nothing_there(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = shutil.copytree(FIXTURES / "trl_healthy", tmp_path / "run")
    users = tmp_path / "pictures"
    users.mkdir()
    (users / "01_my_plot.png").write_bytes(b"\x89PNG the user's own")  # a name of the kind a report writes
    (run / "report").symlink_to(users)
    code, line = one_line(capsys, "report", str(run))
    assert code == 2 and "report is a symbolic link" in line and str(users) in line
    assert listing(users) == {"01_my_plot.png": b"\x89PNG the user's own"}
    (run / "report").unlink()
    code = main(["report", str(run)])  # the run's own folder: written as before
    assert code == 0 and (run / "report" / "report.html").is_file()


# ------------------------------------------------------------------------------------------------------- doctor


def test_discovery_searches_a_symlink_loop_once(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    (runs / "a").mkdir(parents=True)
    shutil.copy(FIXTURES / "verl_console.log", runs / "a" / "train.log")
    (runs / "a" / "up").symlink_to(runs)  # a link back up the tree: followed for ever, it found 8 runs
    found = discover(runs)
    assert [(name, reader) for name, reader, _ in found] == [("a/train.log", "console")]


# -------------------------------------------------------------------------------------------------- checkpoints


def _checkpoint(run: Path, step: int, model: torch.nn.Module, keep: int = 5) -> Path:
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model(torch.tensor([[1, 2, 3]])).logits.sum().backward()
    opt.step()
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0)
    state = {"data_position": step, "group_counter": step, "kl_coef": 0.0, "entropy_coef": 0.0}
    return save_checkpoint(run, step, modules={"model": model}, optimizer=opt, scheduler=sched, state=state, keep=keep)


def test_a_planted_checkpoint_link_is_never_loaded_nor_pruned_through(tmp_path: Path) -> None:
    model = build_tiny_model(vocab_size=32, hidden=16, layers=1, heads=2)
    run = tmp_path / "run"
    old = _checkpoint(run, 1, model)
    stash = shutil.copytree(old, tmp_path / "an_old_state")  # what the link points to: outside the run
    _checkpoint(run, 2, model)
    (run / "checkpoints" / "step_9").symlink_to(stash)
    assert [p.name for p in list_checkpoints(run)] == ["step_1", "step_2"]
    assert latest_checkpoint(run) == run / "checkpoints" / "step_2"
    with pytest.raises(ResumeError, match="checkpoints/step_9 is a symbolic link"):
        refuse_symlinks(run)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0)
    path, state = load_latest(run, modules={"model": model}, optimizer=opt, scheduler=sched)
    assert path.name == "step_2" and state["step"] == 2
    _checkpoint(run, 3, model, keep=1)  # rotation: the real older ones go, the link and what it points to stay
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["step_3", "step_9"]
    assert (stash / "trainer_state" / "state.json").is_file()
