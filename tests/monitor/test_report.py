"""`grpokit report` on real tiny-model runs: the summary block (model, recipe, precision and device actually used,
wall time, held-out start -> end, steps without update), run.json, completions with their prompt and answer,
charts greyed with the reason they cannot move, skipped steps, and the page itself."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from tiny_runs import COLLAPSING, LEARNING, tiny_run

from grpokit.config import build_config
from grpokit.monitor.report import make_report, pick_completions
from grpokit.monitor.report.panels import clip_static, kl_static, rounds_static
from grpokit.monitor.report.summary import duration, summary_fields
from grpokit.monitor.rundata import load_run
from grpokit.training import Trainer, fit


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("runs")
    return tiny_run(root / "learning", "grpo", LEARNING), tiny_run(root / "collapsing", "dapo", COLLAPSING)


def _rows(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def test_run_json_records_device_precision_and_wall_time(runs: tuple[Path, Path]) -> None:
    info = json.loads((runs[0] / "run.json").read_text())
    # what `auto` resolved to: forced by GRPOKIT_CPU_BF16 when set, else this CPU's own (timing-probed) choice
    forced = {"1": "bf16-autocast", "0": "fp32"}.get(os.environ.get("GRPOKIT_CPU_BF16", ""))
    assert info["device"] == "cpu" and info["precision"] in ({forced} if forced else {"fp32", "bf16-autocast"})
    assert info["parameters"] > 0 and info["versions"]["torch"]
    (seg,) = info["segments"]
    assert seg["first_step"] == 0 and seg["last_step"] == 4
    assert info["wall_s"] == pytest.approx(seg["seconds"]) and info["wall_s"] > 0
    # the wall time covers every logged step and evaluation
    logged = sum(r.get("time/step", 0) + r.get("time/eval", 0) for r in _rows(runs[0] / "metrics.jsonl"))
    assert info["wall_s"] >= logged


def test_resume_adds_a_segment_and_sums_wall_time(runs: tuple[Path, Path], tmp_path: Path) -> None:
    run_dir = tiny_run(tmp_path / "r", "grpo", [*LEARNING, "train.steps=1", "train.save_every=1"])
    cfg = build_config("grpo", overrides=[*LEARNING, "train.steps=2", "train.save_every=1"])
    trainer = Trainer(cfg, run_dir)
    assert trainer.restore() == 1
    fit(trainer, None, eval_before=False)
    info = json.loads((run_dir / "run.json").read_text())
    assert [(s["first_step"], s["last_step"]) for s in info["segments"]] == [(0, 1), (1, 2)]
    assert info["wall_s"] == pytest.approx(sum(s["seconds"] for s in info["segments"]))


def test_completions_carry_their_prompt_and_reference_answer(runs: tuple[Path, Path]) -> None:
    cfg = build_config("grpo", overrides=LEARNING)
    trainer = Trainer(cfg, runs[0].parent / "unused")  # the same seeded data split as the run
    by_prompt = {ex.prompt: ex.answer for ex in trainer.train_examples}
    rows = [r for r in _rows(runs[0] / "completions.jsonl") if "text" in r]
    assert len(rows) == 4 * 3  # train.log_completions=3 per step
    for r in rows:
        assert by_prompt[r["prompt"]] == r["answer"]


def test_summary_block_fields(runs: tuple[Path, Path]) -> None:
    learning = dict(summary_fields(load_run(runs[0]), []))
    assert learning["model"].startswith("tiny")
    assert learning["recipe"] == "grpo on task add1"
    assert "G 4" in learning["key hyper-parameters"] and "mini-batches 2" in learning["key hyper-parameters"]
    used = json.loads((runs[0] / "run.json").read_text())["precision"]  # what `auto` resolved to on this CPU
    assert learning["precision and device used"].startswith(f"{used} on cpu")
    info = json.loads((runs[0] / "run.json").read_text())
    assert learning["wall time"] == duration(info["wall_s"])
    evals = [r["eval/accuracy"] for r in _rows(runs[0] / "metrics.jsonl") if "eval/accuracy" in r]
    assert learning["held-out accuracy"].startswith(f"{evals[0]:.1%} (step 0) -> {evals[-1]:.1%} (step 4)")
    assert learning["steps without update"] == "0 of 4"
    assert learning["training steps"] == "4 of 4 planned"
    collapsing = dict(summary_fields(load_run(runs[1]), []))
    assert collapsing["steps without update"].startswith("3 of 3 (steps 1, 2, 3)")


def test_summary_of_a_run_without_run_json_says_where_figures_come_from(runs: tuple[Path, Path]) -> None:
    run = load_run(runs[1])
    run.info = {}
    fields = dict(summary_fields(run, []))
    assert fields["precision and device used"] == "not recorded by this log (config asked for auto)"
    assert fields["wall time"].startswith("about ") and "no run.json" in fields["wall time"]


def test_charts_that_cannot_move_say_why(runs: tuple[Path, Path]) -> None:
    learning, collapsing = load_run(runs[0]), load_run(runs[1])
    # one optimizer step per batch: the ratio is 1, nothing clips
    assert collapsing.cfg("train.mini_batches") == 1
    reason = clip_static(collapsing)
    assert reason and "train.ppo_epochs=1 and train.mini_batches=1" in reason
    assert clip_static(learning) is None  # two mini-batches: the second one can clip
    assert "algo.reference=none" in (kl_static(collapsing) or "")
    assert rounds_static(collapsing) is None  # DAPO: dynamic sampling on
    assert "algo.group_filter=all" in (rounds_static(learning) or "")


def test_report_page_has_summary_greyed_charts_skipped_steps_and_completions(runs: tuple[Path, Path]) -> None:
    page = make_report(runs[1])
    html = page.read_text()
    used = json.loads((runs[1] / "run.json").read_text())["precision"]
    assert "<h2>Summary</h2>" in html and f"{used} on cpu" in html
    assert "cannot move: train.ppo_epochs=1 and train.mini_batches=1" in html
    assert "A1 CRITICAL advantage collapse" in html  # numbered like the markers on the charts
    # every update was skipped (no group had mixed rewards): the verdict says so first, in the colour of a failure
    verdict = "<p class='verdict critical'><b>verdict: never trained: no update changed the model"
    assert verdict in html and html.index(verdict) < html.index("<h2>Summary</h2>")  # the verdict leads
    assert "<h2>Sample completions</h2>" in html and "What is" in html  # the add1 prompts
    pngs = {p.name for p in page.parent.glob("*.png")}
    assert {"05_clip_fractions.png", "07_generation_rounds.png", "09_time_per_phase.png"} <= pngs
    assert html.count("data:image/png;base64,") == len(pngs)


def test_pick_completions_takes_first_middle_and_last_steps() -> None:
    rows = [{"step": s, "text": f"{s}-{i}"} for s in range(1, 8) for i in range(4)]
    picked = pick_completions(rows, limit=6)
    assert [r["text"] for r in picked] == ["1-0", "1-1", "4-0", "4-1", "7-0", "7-1"]
