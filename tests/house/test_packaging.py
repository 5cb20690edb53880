"""What a plain `pip install grpokit` brings: everything `grpokit demo` runs, the report's plots included (issue 8:
the demo crashed with ModuleNotFoundError: matplotlib without the `report` extra)."""

from __future__ import annotations

import re
from pathlib import Path

import tomllib

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def core_requirements() -> set[str]:
    deps = tomllib.loads(PYPROJECT.read_text())["project"]["dependencies"]
    return {re.split(r"[<>=!~\[; ]", d, maxsplit=1)[0].lower() for d in deps}


def test_the_demo_and_report_need_no_extra() -> None:
    core = core_requirements()
    for module in ("matplotlib", "rich", "tensorboard", "torch", "transformers"):
        assert module in core, f"{module} is imported by `grpokit demo`/`grpokit report` but is not a core dependency"


def test_every_dependency_has_a_lower_bound() -> None:
    deps = tomllib.loads(PYPROJECT.read_text())["project"]["dependencies"]
    assert all(">=" in d for d in deps), [d for d in deps if ">=" not in d]
