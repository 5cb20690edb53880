"""The corpus of real training logs (`tests/fixtures/logs/real/`) and the scoring of a diagnosis against its ground
truth, shared by `tests/monitor/test_real_logs.py` and `bench/vs_rlwatch.py`.

Each directory of the corpus holds one log kept byte for byte and a `SOURCE` file whose YAML front matter (between
the first two `---` lines) says where the log comes from and gives the ground truth: a `truth` mapping from run name
(the log file, `file#k` for the k-th run a file holds) to the doctor's expected `verdict`, the exact set of failure
`modes` it must report (anything else is a false alarm, anything missing a miss), the `findings` it must state and
`notes` it must print.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..detectors.system_time import TIME_VERDICTS
from ..readers import discover
from .diagnose import diagnose_all


def read_source(run_dir: str | Path) -> dict[str, Any]:
    """The YAML front matter of a corpus run's `SOURCE` file (ValueError when the file does not start with one)."""
    text = (Path(run_dir) / "SOURCE").read_text(encoding="utf-8")
    if not text.startswith("---\n"):
        raise ValueError(f"{run_dir}/SOURCE: no YAML front matter (it must start with a '---' line)")
    return yaml.safe_load(text.split("---\n")[1])


def corpus_runs(root: str | Path) -> list[str]:
    """The corpus' run directories under `root`, by name, sorted."""
    return sorted(p.name for p in Path(root).iterdir() if p.is_dir())


def split_run_key(key: str) -> tuple[str, str]:
    """A truth key as (log file, run suffix): `docker_run.log#2` -> (`docker_run.log`, `#2`), `output.log` ->
    (`output.log`, ``); the suffix is the run name `diagnose_all(<the file>)` gives that run."""
    file, sep, k = key.partition("#")
    return file, (sep + k if sep else "")


def diagnoses_by_key(run_dir: str | Path) -> dict[str, dict[str, Any]]:
    """The doctor's diagnoses of a corpus run directory (`diagnose_all(run_dir)`), keyed as its truth keys are: by
    run name, except where the directory itself is one run (a TRL output directory: `trainer_state.json` at its
    top), which `diagnose_all` names `''` (`#k` for its k-th run); that run is keyed by the file it was read from
    (`trainer_state.json`, `trainer_state.json#k`), the name the same file gets when it is diagnosed on its own."""
    root = Path(run_dir)
    itself = next((files for name, _, files in discover(root) if name == ""), None)
    out: dict[str, dict[str, Any]] = {}
    for d in diagnose_all(root):
        key = d["run"]
        if itself and (key == "" or key.startswith("#")):
            key = itself[0].relative_to(root).as_posix() + key
        out[key] = d
    return out


def found_modes(diagnosis: dict[str, Any]) -> set[str]:
    """The failure modes a diagnosis reports: the mode of each of its alerts (cleared or not), less the system's
    verdicts on where the time goes (a bottleneck is not a failure)."""
    return {a["mode"] for a in diagnosis["alerts"]} - TIME_VERDICTS


@dataclass(frozen=True)
class ModeScore:
    """Reported failure modes scored against the true ones: hits, misses (true, not reported) and false alarms
    (reported, not true). `len(hits) + len(missed) == len(truth)` and `len(hits) + len(false_alarms) ==
    len(found)`."""

    truth: frozenset[str]
    found: frozenset[str]

    @property
    def hits(self) -> frozenset[str]:
        return self.truth & self.found

    @property
    def missed(self) -> frozenset[str]:
        return self.truth - self.found

    @property
    def false_alarms(self) -> frozenset[str]:
        return self.found - self.truth


def score_modes(truth: Iterable[str], found: Iterable[str]) -> ModeScore:
    """Score the reported modes `found` against the true modes `truth`."""
    return ModeScore(frozenset(truth), frozenset(found))


@dataclass(frozen=True)
class Comparison:
    """One diagnosis against one truth entry: the verdict (and the expected one), the modes' score, the finding
    kinds stated, the expected findings not stated and the expected notes not printed."""

    verdict: str
    want_verdict: str
    modes: ModeScore
    findings: frozenset[str]
    missing_findings: frozenset[str]
    missing_notes: tuple[str, ...] = field(default=())

    @property
    def verdict_ok(self) -> bool:
        return self.verdict == self.want_verdict

    @property
    def ok(self) -> bool:
        """The diagnosis matches the truth entry in every respect `tests/monitor/test_real_logs.py` checks."""
        m = self.modes
        wrong = m.missed or m.false_alarms or self.missing_findings or self.missing_notes
        return self.verdict_ok and not wrong


def compare(want: dict[str, Any], diagnosis: dict[str, Any]) -> Comparison:
    """Compare a diagnosis (an item of `diagnose_all`) with its truth entry (`verdict`, `modes`, optional `findings`
    and `notes`): an expected finding must be among the diagnosis' finding kinds, an expected note a substring of
    one of its notes."""
    kinds = frozenset(f["kind"] for f in diagnosis["findings"])
    notes = [n for n in want.get("notes", []) if not any(n in got for got in diagnosis["notes"])]
    return Comparison(
        verdict=diagnosis["verdict"],
        want_verdict=want["verdict"],
        modes=score_modes(want["modes"], found_modes(diagnosis)),
        findings=kinds,
        missing_findings=frozenset(want.get("findings", [])) - kinds,
        missing_notes=tuple(notes),
    )


__all__ = [
    "Comparison",
    "ModeScore",
    "compare",
    "corpus_runs",
    "diagnoses_by_key",
    "found_modes",
    "read_source",
    "score_modes",
    "split_run_key",
]
