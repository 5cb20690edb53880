"""The package's layers hold: every import goes to the same room or to a lower layer, no module imports itself back
through others (eager or inside a function), and no module imports another module's underscore-private name.

The layers, lowest first, are written down in docs/layout.md; `LAYERS` here is the same list."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"

# lowest first; a room may import its own modules and those of any room in a lower layer, nothing else
LAYERS: list[tuple[str, ...]] = [
    ("grpokit.metric_names", "grpokit.common"),
    ("grpokit.algos", "grpokit.data", "grpokit.run"),
    ("grpokit.models", "grpokit.rewards", "grpokit.monitor"),
    ("grpokit.parallel",),
    ("grpokit.config",),
    ("grpokit.rollout",),
    ("grpokit.agents",),
    ("grpokit.training",),
    ("grpokit.preflight", "grpokit.audit", "grpokit.integrations"),
    ("grpokit.cli",),
    ("grpokit.api",),
    ("grpokit", "grpokit.__main__"),
]
LAYER_OF = {room: i for i, rooms in enumerate(LAYERS) for room in rooms}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted((SRC / "grpokit").rglob("*.py"))}


def room(module: str) -> str:
    """The most specific room of LAYERS that holds `module`."""
    parts = module.split(".")
    for i in range(len(parts), 0, -1):
        if ".".join(parts[:i]) in LAYER_OF:
            return ".".join(parts[:i])
    raise AssertionError(f"{module} is in no layer: add its room to LAYERS and to docs/layout.md")


def imports(module: str) -> list[tuple[int, str, list[str]]]:
    """(line, imported grpokit module, names taken from it) for every import of `module`, wherever it is."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - node.level + 1]
                base = ".".join(parts + ([node.module] if node.module else []))
            if not base.startswith("grpokit"):
                continue
            names = []
            for a in node.names:
                if f"{base}.{a.name}" in MODULES:  # a submodule imported by name
                    out.append((node.lineno, f"{base}.{a.name}", []))
                else:
                    names.append(a.name)
            if names:
                out.append((node.lineno, base, names))
        elif isinstance(node, ast.Import):
            out.extend((node.lineno, a.name, []) for a in node.names if a.name.startswith("grpokit"))
    return out


def test_each_folder_is_one_room_on_one_floor() -> None:
    """A room is grpokit itself or one of its top-level folders or modules: no folder is split over several layers."""
    top = SRC / "grpokit"
    for r in LAYER_OF:
        name = r.split(".", 1)[1] if "." in r else ""
        assert r == "grpokit" or ("." not in name and ((top / name).is_dir() or (top / f"{name}.py").is_file())), r


def test_the_layout_page_lists_the_same_layers() -> None:
    """docs/layout.md's table of layers is LAYERS, row for row."""
    page = (SRC.parent / "docs" / "layout.md").read_text()
    table = page.split("| layer | folders | what they are |")[1].split("\n\n")[0]
    rows = [line.split("|")[2] for line in table.strip().splitlines()[1:]]
    named = {"__init__.py": "grpokit", "__main__.py": "grpokit.__main__"}
    listed = [
        tuple(named.get(n, "grpokit." + n.removesuffix("/").removesuffix(".py")) for n in re.findall(r"`([^`]+)`", row))
        for row in rows
    ]
    assert listed == LAYERS


def test_every_module_is_in_a_layer() -> None:
    for module in MODULES:
        room(module)


def test_imports_go_down_the_layers() -> None:
    upward = []
    for module in MODULES:
        here = room(module)
        for line, target, _ in imports(module):
            there = room(target)
            if there != here and LAYER_OF[there] >= LAYER_OF[here]:
                upward.append(f"{MODULES[module].relative_to(SRC)}:{line} {here} -> {there}")
    assert not upward, "imports that do not go down the layers:\n" + "\n".join(upward)


def test_no_import_cycles_eager_or_inside_a_function() -> None:
    graph = {m: {t for _, t, _ in imports(m) if t in MODULES and t != m} for m in MODULES}
    # a package's __init__ re-exporting its modules is not a cycle with them: the edge child -> own package is
    # an import of a name the package re-exports, which resolves to the child itself or a sibling
    index, low, stack, on, cycles, counter = {}, {}, [], set(), [], [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            scc = []
            while True:
                w = stack.pop()
                on.discard(w)
                scc.append(w)
                if w == v:
                    break
            if len(scc) > 1:
                cycles.append(sorted(scc))

    for v in graph:
        if v not in index:
            visit(v)
    assert not cycles, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_no_module_imports_another_modules_private_name() -> None:
    found = []
    for module in MODULES:
        for line, target, names in imports(module):
            private = [n for n in names if n.startswith("_") and not n.startswith("__")]
            if private and target != module:
                found.append(f"{MODULES[module].relative_to(SRC)}:{line} from {target} import {', '.join(private)}")
    assert not found, "underscore-private names imported across modules:\n" + "\n".join(found)


@pytest.mark.parametrize("old", ["grpokit.trainer", "grpokit.loop", "grpokit.runlog", "grpokit.cli_args"])
def test_the_root_holds_no_engine_module(old: str) -> None:
    assert old not in MODULES
