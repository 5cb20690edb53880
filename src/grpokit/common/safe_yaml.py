"""YAML read with bounds: every YAML grpokit reads (config files, recipes, `--set` values, a run's config.yaml,
configs found by `doctor`) goes through `load`, so hostile or broken YAML is one `yaml.YAMLError`, never a
`RecursionError` traceback or a hang.

`yaml.safe_load` already refuses `!!python` tags; on top of it:

- nesting deeper than `MAX_DEPTH` levels is refused while the document is composed (PyYAML's composer recurses
  once per level: 5000 nested `[` end in a `RecursionError`);
- aliases are counted by what they expand to: a document whose nodes, each alias counted as the whole node it
  names, exceed `MAX_NODES` (an "alias bomb" of nine nested lists of ten aliases is 10^9 nodes, which building
  a config from then walks for minutes in gigabytes) is refused before anything is constructed, as is an alias
  that refers to a node containing itself.
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, SequenceNode

MAX_DEPTH = 64
MAX_NODES = 100_000


class YAMLLimitError(yaml.MarkedYAMLError):
    """A YAML document over the nesting or expansion limits; `problem` and `problem_mark` say what and where."""


class BoundedLoader(yaml.SafeLoader):
    """`yaml.SafeLoader` that refuses documents nested deeper than `MAX_DEPTH` levels."""

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Node | None, index: Any) -> Node:
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise YAMLLimitError(
                    problem=f"nested deeper than {MAX_DEPTH} levels", problem_mark=self.peek_event().start_mark
                )
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def expanded_size(root: Node) -> int:
    """Nodes of `root` with every alias counted as the node it names (shared nodes are sized once, so this is
    linear in the document); YAMLLimitError past MAX_NODES or for a node that contains itself."""
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if key in sizes:
            continue
        children = _children(node)
        if children_done:
            open_nodes.discard(key)
            sizes[key] = 1 + sum(sizes[id(c)] for c in children)
            if sizes[key] > MAX_NODES:
                raise YAMLLimitError(
                    problem=f"aliases expand it past {MAX_NODES} values (an alias bomb?)", problem_mark=node.start_mark
                )
            continue
        if key in open_nodes:
            raise YAMLLimitError(problem="an alias refers to a node containing itself", problem_mark=node.start_mark)
        open_nodes.add(key)
        stack.append((node, True))
        for child in children:
            if id(child) in open_nodes:
                raise YAMLLimitError(
                    problem="an alias refers to a node containing itself", problem_mark=child.start_mark
                )
            stack.append((child, False))
    return sizes[id(root)]


def _children(node: Node) -> list[Node]:
    if isinstance(node, SequenceNode):
        return list(node.value)
    if isinstance(node, MappingNode):
        return [x for pair in node.value for x in pair]
    return []


def load(text: str | bytes) -> Any:
    """One YAML document as Python values, as `yaml.safe_load` gives it, within the limits above; a
    `yaml.YAMLError` (a `YAMLLimitError` for the limits) otherwise."""
    loader = BoundedLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        expanded_size(node)
        return loader.construct_document(node)
    finally:
        loader.dispose()
