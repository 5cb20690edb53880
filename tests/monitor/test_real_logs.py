"""`grpokit doctor` on a corpus of real training logs from public repositories (issue 13).

Each directory under `tests/fixtures/logs/real/` holds one log file kept byte-for-byte as found and a `SOURCE` file:
where it comes from (repository, path, commit, sha256; or the issue a log was pasted in), what its authors said, and
the ground truth derived from the log and their words, as a `truth` mapping per run: the doctor's verdict, the exact
set of failure modes it must report (anything else is a false alarm, anything missing a miss), the findings and notes
it must state.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest

from grpokit.monitor.doctor.corpus import compare, corpus_runs, diagnoses_by_key, read_source

REAL = Path(__file__).parents[1] / "fixtures" / "logs" / "real"
RUNS = corpus_runs(REAL)


def source(name: str) -> dict[str, Any]:
    return read_source(REAL / name)


def test_the_corpus_has_at_least_ten_runs_from_public_repositories() -> None:
    runs = [(name, run) for name in RUNS for run in source(name)["truth"]]
    assert len(RUNS) >= 25 and len(runs) >= 25
    assert len({source(name)["repository"] for name in RUNS}) >= 6
    trainers = " ".join(source(name)["trainer"] for name in RUNS)
    assert "TRL" in trainers and "verl" in trainers and "OpenRLHF" in trainers


@pytest.mark.parametrize("name", RUNS)
def test_log_is_kept_byte_for_byte(name: str) -> None:
    src = source(name)
    stored = REAL / name / src["stored_as"].split(" ")[0]
    data = stored.read_bytes()
    assert hashlib.sha256(data).hexdigest() == src["sha256"] and len(data) == src["size_bytes"]
    if "issue" in src:  # a log pasted in an issue: the issue is the source (no commit)
        assert src["url"] == f"https://github.com/{src['repository']}/issues/{src['issue']}"
    else:
        assert src["repository"] in src["url"] and src["commit"] in src["url"] and len(src["commit"]) == 40


@pytest.mark.parametrize("name", RUNS)
def test_doctor_matches_the_ground_truth(name: str) -> None:
    truth = source(name)["truth"]
    diags = diagnoses_by_key(REAL / name)
    assert set(diags) == set(truth), f"runs found: {sorted(diags)}"
    for run, want in truth.items():
        d = diags[run]
        c = compare(want, d)
        assert c.verdict == c.want_verdict, (run, d["verdict"])
        missed, false_alarms = set(c.modes.missed), set(c.modes.false_alarms)
        assert not missed and not false_alarms, (run, {"missed": missed, "false alarms": false_alarms})
        assert not c.missing_findings, (run, set(c.findings))
        assert not c.missing_notes, (run, d["notes"])


@pytest.mark.parametrize("page", ["docs/diagnosis.md"])
def test_corpus_table_lists_every_corpus_run_with_its_verdict(page: str) -> None:
    """The corpus table of docs/diagnosis.md (with sources and ground truths); README.md links to it."""
    text = (Path(__file__).parents[2] / page).read_text(encoding="utf-8")
    for name in RUNS:
        for run, want in source(name)["truth"].items():
            row = next((line for line in text.splitlines() if f"`{name}`" in line and f"`{run}`" in line), None)
            assert row is not None, f"{page}'s corpus table lacks {name} {run}"
            assert want["verdict"].split(";")[0] in row, row


def test_a_run_directory_that_is_one_trl_run_is_keyed_by_its_trainer_state(tmp_path: Path) -> None:
    """A corpus directory holding `trainer_state.json` is a TRL output directory, one run that `diagnose_all` names
    `''`; the corpus keys it by the file, as its truth does (and as the file diagnosed on its own is named)."""
    import json

    from grpokit.monitor.doctor import diagnose_all

    rows = [{"step": s, "reward": 0.5, "kl": 0.01, "loss": 0.1} for s in range(1, 4)]
    (tmp_path / "trainer_state.json").write_text(json.dumps({"log_history": rows}), encoding="utf-8")
    assert [d["run"] for d in diagnose_all(tmp_path)] == [""]
    assert list(diagnoses_by_key(tmp_path)) == ["trainer_state.json"]
    assert [d["run"] for d in diagnose_all(tmp_path / "trainer_state.json")] == [""]
