"""docs/threat_model.md names, for each claim, the test that holds it: every test it names exists, in the file it
names where it names one (a renamed or deleted test makes the document untrue)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOKEN = re.compile(r"`([^`\s]+)`")


def _tests_in(path: Path) -> set[str]:
    return set(re.findall(r"^def (test_\w+)", path.read_text(), flags=re.M))


def test_every_test_the_threat_model_names_exists() -> None:
    files = {p.relative_to(ROOT).as_posix(): p for p in (ROOT / "tests").rglob("test_*.py")}
    everywhere = set().union(*(_tests_in(p) for p in files.values()))
    current: Path | None = None
    named, missing = 0, []
    for token in TOKEN.findall((ROOT / "docs" / "threat_model.md").read_text()):
        where, _, name = token.partition("::")
        if where.endswith(".py"):
            matches = [p for rel, p in files.items() if rel == where or rel.endswith("/" + where)]
            if len(matches) == 1:
                current = matches[0]
            elif where.startswith("tests/") or where.startswith("test_"):
                missing.append(token)
                continue
        name = name or (token if token.startswith("test_") else "")
        if not name:
            continue
        name = re.sub(r"\[.*\]$|\(.*$", "", name)
        named += 1
        scope = _tests_in(current) if token.startswith("::") and current is not None else None
        if where.endswith(".py") and current is not None:
            scope = _tests_in(current)
        if name not in (scope if scope is not None else everywhere):
            missing.append(token)
    assert named > 40 and missing == []
