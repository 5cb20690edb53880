"""Every path the project's text names exists: a docstring, a comment or a page that says `src/grpokit/...`,
`grpokit/...`, a package folder's file (`training/loop.py`), `tests/...`, `docs/...`, `bench/...` or `scripts/...`
names a file or folder of this checkout, so a moved module cannot leave its old path behind (issue 37).

Read: the Python files of src/, tests/ (not the vendored fixtures), bench/ and scripts/, docs/*.md and README.md.
Metric names look like paths (`rollout/staleness`), so a path that starts with a package folder or `grpokit/` is
checked only when it names a file (.py, .md, .yaml, .json, .toml); a glob (`c*.py`) is not a path. No torch."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "grpokit"
FOLDERS = sorted(p.name for p in PACKAGE.iterdir() if p.is_dir() and not p.name.startswith("__"))
PATH = re.compile(rf"(?<![\w./-])((?:src/grpokit|grpokit|tests|docs|bench|scripts|{'|'.join(FOLDERS)})/[\w./-]*\w)")
FILE = re.compile(r"\.(py|md|yaml|json|toml)$")

#: paths in other projects' trees, named as theirs: (the file that names it, the path)
FOREIGN = {
    ("src/grpokit/monitor/doctor/knobs.py", "docs/algo/dapo.md"),  # verl's docs
    ("docs/math.md", "docs/algo"),  # verl's docs, in the reference-code list
    ("docs/math.md", "rewards/other_rewards.py"),  # TRL's trl/rewards/
    ("tests/integrations/test_field_artifacts.py", "recipes/Qwen2.5-1.5B-Instruct/grpo/config_demo.yaml"),  # open-r1
    ("docs/bring_your_job.md", "recipes/Qwen2.5-1.5B-Instruct/grpo/config_demo.yaml"),  # open-r1
}


def texts() -> list[tuple[str, str]]:
    """(path from the checkout's root, text) of every file read."""
    py = [p for d in ("src", "tests", "bench", "scripts") for p in (ROOT / d).rglob("*.py")]
    py = [p for p in py if "fixtures" not in p.parts and p != Path(__file__).resolve()]  # this file names bad ones
    files = sorted(py) + sorted((ROOT / "docs").glob("*.md"))
    return [(f.relative_to(ROOT).as_posix(), f.read_text(errors="replace")) for f in [*files, ROOT / "README.md"]]


def candidates(path: str) -> list[Path]:
    first = path.split("/")[0]
    if first == "grpokit":
        return [ROOT / "src" / path]
    if first in FOLDERS:
        return [PACKAGE / path, ROOT / path]
    return [ROOT / path]


def missing_paths(texts: list[tuple[str, str]]) -> list[str]:
    out = []
    for name, text in texts:
        for i, line in enumerate(text.splitlines(), 1):
            for m in PATH.finditer(line):
                path = m.group(1).rstrip(".")
                first = path.split("/")[0]
                if line[m.end() : m.end() + 1] in ("*", "{", "<") or (name, path) in FOREIGN:
                    continue
                if (first in FOLDERS or first == "grpokit") and not FILE.search(path):
                    continue  # a metric name (rollout/staleness), not a path
                if not any(c.exists() for c in candidates(path)):
                    out.append(f"{name}:{i}: {path}")
    return out


def test_every_path_named_in_docstrings_comments_and_docs_exists() -> None:
    missing = missing_paths(texts())
    assert not missing, "paths that do not exist (moved? rename them here too):\n" + "\n".join(missing)


def test_a_moved_path_is_found() -> None:
    """The check itself: a docstring naming a module that moved, a test file and a page that do not exist is caught;
    existing paths, metric names and globs are not."""
    probe = (
        '"""See src/grpokit/monitor/divergence.py, tests/monitor/test_gone.py and training/phases/filter.py;\n'
        'docs/layout.md and algos/group_filter.py exist; rollout/staleness is a metric; bench/claims/c*.py a glob."""\n'
    )
    found = missing_paths([("src/grpokit/probe.py", probe)])
    assert found == [
        "src/grpokit/probe.py:1: src/grpokit/monitor/divergence.py",
        "src/grpokit/probe.py:1: tests/monitor/test_gone.py",
        "src/grpokit/probe.py:1: training/phases/filter.py",
    ]
