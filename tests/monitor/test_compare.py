"""`grpokit compare` on real run directories (short tiny-model trainings of two recipes and lengths): the page,
the charts, the final table with differences, runs lined up on generated tokens / samples / seconds, alert markers
from alerts.jsonl, the TensorBoard layout, and one-line errors for bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tiny_runs import COLLAPSING, LEARNING, tiny_run

from grpokit.monitor.compare.page import PANELS, make_compare
from grpokit.monitor.compare.table import final_table
from grpokit.monitor.rundata import load_run, x_positions

LOGS = Path(__file__).parents[1] / "fixtures" / "logs"
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(Path(__file__).parents[1])}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("runs")
    return tiny_run(root / "grpo-learning", "grpo", LEARNING), tiny_run(root / "dapo-collapse", "dapo", COLLAPSING)


def _metrics(run_dir: Path) -> list[dict]:
    return [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]


def test_x_axes_are_running_sums_of_the_logged_per_step_figures(runs: tuple[Path, Path]) -> None:
    learning, collapsing = runs
    for run_dir in runs:
        rows = _metrics(run_dir)
        run = load_run(run_dir)
        tokens = x_positions(run, "tokens")
        samples = x_positions(run, "samples")
        seconds = x_positions(run, "seconds")
        last = max(tokens)
        assert tokens[last] == sum(r.get("perf/gen_tokens", 0) for r in rows) > 0
        assert samples[last] == sum(r.get("reward/sampled_n", 0) for r in rows)
        expect_s = sum(r.get("time/step", 0) + r.get("time/eval", 0) for r in rows)
        assert seconds[last] == pytest.approx(expect_s)
        assert tokens[0] == 0 and list(tokens.values()) == sorted(tokens.values())
    # dynamic sampling's extra rounds count on the samples axis: every generated group x G=2, more than the
    # 2 prompts x G=2 a step trains on (the verifier never passes, so every step uses all its rounds)
    steps = [r for r in _metrics(collapsing) if "reward/sampled_n" in r]
    assert len(steps) == 3
    assert all(r["reward/sampled_n"] == 2 * r["sampling/generated_groups"] > 2 * 2 for r in steps)
    assert all(r["sampling/rounds"] == 2 for r in steps)
    assert [r["reward/sampled_n"] for r in _metrics(learning) if "reward/sampled_n" in r] == [8.0] * 4


def test_compare_cli_writes_page_charts_table_and_tensorboard(runs: tuple[Path, Path], tmp_path: Path) -> None:
    out = tmp_path / "cmp"
    proc = subprocess.run(
        [sys.executable, "-m", "grpokit.cli", "compare", *map(str, runs), "--x", "samples", "--out", str(out)],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    html = (out / "compare.html").read_text()
    assert "A: grpo-learning" in html and "B: dapo-collapse" in html
    assert "generated samples (cumulative)" in html
    assert "vs A" in html  # differences to the first run
    # the collapsing run's advantage-collapse alert is listed with its tag and marked on the charts
    alerts = [json.loads(x) for x in (runs[1] / "alerts.jsonl").read_text().splitlines()]
    assert alerts and "B1</td>" in html and alerts[0]["mode"] in html
    pngs = sorted(p.name for p in out.glob("*.png"))
    assert len(pngs) >= 7 and len(pngs) <= len(PANELS)
    assert html.count("data:image/png;base64,") == len(pngs)
    tb_runs = sorted(p.name for p in (out / "tb").iterdir())
    assert tb_runs == ["A_grpo-learning", "B_dapo-collapse"]


def test_tensorboard_layout_has_same_tags_and_steps_on_the_chosen_axis(runs: tuple[Path, Path], tmp_path: Path) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    make_compare(list(runs), "tokens", tmp_path)
    tags = []
    for run_dir, tb in zip(runs, sorted((tmp_path / "tb").iterdir())):
        acc = EventAccumulator(str(tb))
        acc.Reload()
        tags.append(set(acc.Tags()["scalars"]))
        events = acc.Scalars("reward/mean")
        expected = x_positions(load_run(run_dir), "tokens")
        assert [e.step for e in events] == [round(expected[s]) for s in sorted(expected) if s >= 1]
    shared = tags[0] & tags[1]
    assert {"reward/mean", "entropy/token_mean", "eval/accuracy", "zv/all_wrong"} <= shared


def test_final_table_gives_values_and_differences_to_the_first_run(runs: tuple[Path, Path]) -> None:
    a, b = load_run(runs[0]), load_run(runs[1])
    headers, rows = final_table([a, b], ["A", "B"])
    assert headers == ["figure", "A: grpo-learning", "B: dapo-collapse"]
    by_label = {r[0]: r for r in rows}
    steps = by_label["training steps"]
    assert steps[1] == "4" and steps[2] == "3 (-1 vs A)"
    skipped = by_label["steps without update"]
    assert skipped[1] == "0" and skipped[2] == "3 (+3 vs A)"  # the collapsing run never updates
    tokens_a = sum(r.get("perf/gen_tokens", 0) for r in _metrics(runs[0]))
    assert by_label["generated tokens"][1] == f"{tokens_a:,.0f}"


def test_unknown_axis_and_a_log_without_the_axis_metric_are_one_line_errors(
    runs: tuple[Path, Path], tmp_path: Path
) -> None:
    def compare(*args: str) -> subprocess.CompletedProcess:
        cmd = [sys.executable, "-m", "grpokit.cli", "compare", *args, "--out", str(tmp_path / "o")]
        return subprocess.run(cmd, capture_output=True, text=True, env=ENV, timeout=300)

    trl = compare(str(runs[0]), str(LOGS / "trl_healthy"), "--x", "tokens")
    assert trl.returncode == 2 and "Traceback" not in trl.stderr
    assert "perf/gen_tokens" in trl.stderr and "--x steps" in trl.stderr
    missing = compare(str(tmp_path / "nothing-here"))
    assert missing.returncode == 2 and "nothing-here" in missing.stderr and "Traceback" not in missing.stderr
    # on steps, a TRL run lines up with a grpokit run
    ok = compare(str(runs[0]), str(LOGS / "trl_healthy"), "--x", "steps")
    assert ok.returncode == 0, ok.stderr
