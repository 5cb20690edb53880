"""bench/vs_rlwatch.py: grpokit doctor and rlwatch scored on a few corpus runs (the scoring arithmetic, the mapping
of rlwatch's detectors, its integrations, and that rlwatch stays quiet)."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest

from grpokit.monitor.detectors import DETECTORS
from grpokit.monitor.doctor.corpus import compare, corpus_runs, read_source, score_modes, split_run_key

pytest.importorskip("rlwatch")

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import vs_rlwatch  # noqa: E402

# a TRL console log holding two runs (SFT, then GRPO), a short verl log, and a SkyRL log (no rlwatch integration)
RUNS = ["trl_unsloth_tsc_grpo_collapse", "verl_grpo_gui_cursor_2_steps", "skyrl_grpo_tau_bench_13_steps"]


@pytest.fixture(scope="module")
def entries(tmp_path_factory: pytest.TempPathFactory) -> list[vs_rlwatch.Entry]:
    return vs_rlwatch.evaluate(vs_rlwatch.CORPUS, RUNS, workdir=tmp_path_factory.mktemp("rlwatch"))


def test_score_arithmetic_on_sets() -> None:
    s = score_modes(["KL drift", "numerical trouble"], ["KL drift", "entropy collapse"])
    assert s.hits == {"KL drift"} and s.missed == {"numerical trouble"} and s.false_alarms == {"entropy collapse"}
    assert len(s.hits) + len(s.missed) == len(s.truth) and len(s.hits) + len(s.false_alarms) == len(s.found)
    assert split_run_key("docker_run.log#2") == ("docker_run.log", "#2") and split_run_key("a.log") == ("a.log", "")


def test_compare_reports_what_the_test_checks() -> None:
    want = {"verdict": "failing", "modes": ["KL drift"], "findings": ["no_update"], "notes": ["ValueError"]}
    diag = {
        "verdict": "failing",
        "alerts": [{"mode": "KL drift"}, {"mode": "truncation"}],
        "findings": [{"kind": "logging_interval"}],
        "notes": ["the log ends with an error: ValueError: x"],
    }
    c = compare(want, diag)
    assert c.verdict_ok and c.modes.false_alarms == {"truncation"} and not c.modes.missed
    assert c.missing_findings == {"no_update"} and not c.missing_notes and not c.ok


def test_every_truth_entry_is_scored_and_hits_plus_misses_is_the_truth(entries: list[vs_rlwatch.Entry]) -> None:
    keys = [(name, key) for name in RUNS for key in read_source(vs_rlwatch.CORPUS / name)["truth"]]
    assert [(e.run, e.key) for e in entries] == keys
    for e in entries:
        for s in (e.grpokit_score, e.rlwatch_score):
            assert len(s.hits) + len(s.missed) == len(e.truth) == len(s.truth)
            assert len(s.hits) + len(s.false_alarms) == len(s.found)
            assert not (s.hits & s.false_alarms) and not (s.hits & s.missed)
        if not e.grpokit.read:  # a log grpokit cannot read yet: nothing found, every true mode missed
            assert e.grpokit.status.startswith(("not read", "error")) and e.grpokit_score.missed == e.truth


def test_totals_and_per_mode_table_add_up(entries: list[vs_rlwatch.Entry]) -> None:
    t = vs_rlwatch.totals(entries)
    for tool in ("grpokit", "rlwatch"):
        assert t[tool]["logs"] == len(entries)
        assert t[tool]["hits"] + t[tool]["misses"] == t[tool]["truth"] == sum(len(e.truth) for e in entries)
    per = vs_rlwatch.per_mode(entries)
    for col, tool_col in (("hits", "hits"), ("misses", "misses"), ("false_alarms", "false_alarms")):
        assert sum(s[col] for s in per.values()) == t["grpokit"][tool_col]
        assert sum(s["rlwatch_" + col] for s in per.values()) == t["rlwatch"][tool_col]
    for s in per.values():
        assert s["hits"] + s["misses"] == s["truth"]
    page = vs_rlwatch.report(entries)
    assert "Regenerate: `" + vs_rlwatch.COMMAND in page and "rlwatch 0.5.1" in page
    assert page.count("`trl_unsloth_tsc_grpo_collapse`") == 2


def test_rlwatch_runs_through_its_hooks_quietly(
    entries: list[vs_rlwatch.Entry], tmp_path: Path, capfd: pytest.CaptureFixture
) -> None:
    by_key = {(e.run, e.key): e.rlwatch for e in entries}
    grpo = by_key[("trl_unsloth_tsc_grpo_collapse", "docker_run.log#2")]
    assert grpo.status == "ran" and grpo.integration == "trl" and grpo.fed == grpo.steps == 69
    assert {"kl_divergence", "reward_mean", "reward_std", "loss", "grad_norm"} <= set(grpo.inputs)
    assert grpo.alerts, "rlwatch 0.5.1 alerts on this log (its reward-variance proxy)"
    verl = by_key[("verl_grpo_gui_cursor_2_steps", "verl_demo.log")]
    assert (
        verl.status == "ran"
        and verl.integration == "verl"
        and verl.fed == verl.steps == 2
        and verl.inputs == ["entropy"]
    )
    assert by_key[("skyrl_grpo_tau_bench_13_steps", "output.log")].status == "no integration"
    # the alerting log again: its console panels stay inside the bench, its store in the given directory
    run = vs_rlwatch.CORPUS / "trl_unsloth_tsc_grpo_collapse"
    capfd.readouterr()
    again = vs_rlwatch.rlwatch_side(run, "docker_run.log#2", read_source(run)["trainer"], tmp_path / "rlw")
    out = capfd.readouterr()
    assert again.alerts == grpo.alerts
    assert out.out == "" and out.err == ""
    assert (tmp_path / "rlw" / "metrics.db").is_file()


def test_mapping_covers_rlwatch_detectors_and_names_grpokit_modes() -> None:
    from rlwatch.config import RLWatchConfig

    sections = {f.name for f in dataclasses.fields(RLWatchConfig)} - {
        "run_id",
        "framework",
        "alerts",
        "storage",
        "dashboard",
    }
    assert set(vs_rlwatch.RLWATCH_MODES) == sections
    modes = {cls.mode for cls in DETECTORS.values()}
    assert {m for m, _ in vs_rlwatch.RLWATCH_MODES.values() if m is not None} <= modes


def test_integration_follows_the_trainer_of_every_corpus_run() -> None:
    want = {"trl": "trl", "verl": "verl", "openrlhf": "openrlhf", "skyrl": None, "nemo": None, "slime": None}
    for name in corpus_runs(vs_rlwatch.CORPUS):
        trainer = read_source(vs_rlwatch.CORPUS / name)["trainer"]
        assert vs_rlwatch.integration_of(trainer) == want[name.split("_")[0]], (name, trainer)


def test_a_log_grpokit_cannot_read_is_not_read_and_all_missed(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("nothing a reader knows\n", encoding="utf-8")
    want = {"verdict": "failing", "modes": ["KL drift"]}
    g = vs_rlwatch.grpokit_side(tmp_path, "notes.txt", want)
    assert g.status.startswith("not read") and not g.read and g.found == frozenset()
    assert score_modes(want["modes"], g.found).missed == {"KL drift"}
    r = vs_rlwatch.rlwatch_side(tmp_path, "notes.txt", "TRL GRPOTrainer (console)", tmp_path / "rlw")
    assert r.status.startswith("not fed") and r.found == frozenset()
    assert vs_rlwatch.rlwatch_side(tmp_path, "notes.txt", "SkyRL", tmp_path / "rlw").status == "no integration"
