"""Every relative link of README.md and docs/ names a file that exists and, with `#anchor`, a heading of that page
(issue 37: the README's tables moved into docs/, and the links must follow them)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation but '-' and '_' dropped, spaces to '-'."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    return {slug(m.group(1)) for m in re.finditer(r"^#+\s+(.*)$", page.read_text(encoding="utf-8"), re.M)}


def links(page: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)  # code blocks hold no links
    return [m.group(1) for m in re.finditer(r"\]\(([^)\s]+)\)", text) if not m.group(1).startswith(("http", "mailto"))]


def test_slug_is_githubs() -> None:
    assert slug("Before the GPUs burn: preflight and reward audit") == "before-the-gpus-burn-preflight-and-reward-audit"
    assert slug("Use `grpokit.train` from Python") == "use-grpokittrain-from-python"


def test_every_relative_link_resolves() -> None:
    broken = []
    for page in PAGES:
        for link in links(page):
            path, _, anchor = link.partition("#")
            target = (page.parent / path).resolve() if path else page
            if not target.exists():
                broken.append(f"{page.relative_to(ROOT)}: {link} (no such file)")
            elif anchor and target.suffix == ".md" and anchor not in anchors(target):
                broken.append(f"{page.relative_to(ROOT)}: {link} (no such heading)")
    assert not broken, "\n".join(broken)
    assert sum(len(links(p)) for p in PAGES) > 50
