"""Honest instruments: a phase's clock is read after CUDA's queued work has finished (where CUDA is in use), and a
mid-run evaluation changes nothing of the training run: the same completions are drawn and the same weights come
out, step for step, as in the run without it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from tiny_config import tiny_overrides

from grpokit.config import build_config
from grpokit.training import Trainer, fit
from grpokit.training.timer import Timer, clock


def test_the_clock_waits_for_cuda_only_where_cuda_is_in_use(monkeypatch: pytest.MonkeyPatch) -> None:
    # no CUDA on this machine: the synchronisation is observed through the two calls that decide it
    syncs: list[int] = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: syncs.append(1))
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    clock()
    assert syncs == []  # CPU: no sync
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    timer = Timer()
    with timer("generate"):
        pass
    assert len(syncs) == 2 and timer.totals["generate"] >= 0  # before and after the phase


def completions_and_weights(tmp_path: Path, name: str, eval_every: int) -> tuple[list[list[str]], torch.Tensor]:
    overrides = tiny_overrides(f"train.eval_every={eval_every}", "train.steps=3", "train.log_completions=8")
    trainer = Trainer(build_config("grpo", overrides=overrides), tmp_path / name)
    fit(trainer, None, eval_before=False)
    rows = [json.loads(line) for line in (tmp_path / name / "completions.jsonl").read_text().splitlines()]
    by_step: dict[int, list[str]] = {}
    for r in rows:
        if "text" in r:
            by_step.setdefault(int(r["step"]), []).append(r["text"])
    weights = torch.cat([p.detach().flatten() for p in trainer.model.parameters()])
    return [by_step[s] for s in sorted(by_step)], weights


@pytest.mark.trains
def test_a_mid_run_evaluation_does_not_change_the_training_run(tmp_path: Path) -> None:
    plain, w_plain = completions_and_weights(tmp_path, "plain", eval_every=0)
    evaluated, w_eval = completions_and_weights(tmp_path, "evaluated", eval_every=1)
    assert (tmp_path / "evaluated" / "metrics.jsonl").read_text().count("eval/accuracy") >= 2  # it did evaluate
    assert len(plain) == 3 and plain == evaluated  # the same completions drawn at every step
    assert torch.equal(w_plain, w_eval)
