"""YAML read with bounds: every YAML grpokit reads (config files, recipes, `--set` values, a run's config.yaml,
configs found by `doctor`) goes through `load`, so hostile or broken YAML is one `yaml.YAMLError`, never a
`RecursionError` traceback or a hang.

`yaml.safe_load` already refuses `!!python` tags; on top of it:

- nesting deeper than `MAX_DEPTH` levels is refused while the document is composed (PyYAML's composer recurses
  once per level: 5000 nested `[` end in a `RecursionError`);
- aliases are counted by what they expand to: a document whose nodes, each alias counted as the whole node it
  names, exceed `MAX_NODES` (an "alias bomb" of nine nested lists of ten aliases is 10^9 nodes, which building
  a config from then walks for minutes in gigabytes) is refused before anything is constructed, as is an alias
  that refers to a node containing itself;
- a key given twice in one mapping (a `--config` with two `train:` sections, `lr:` twice in one) is refused,
  naming the key and both lines: PyYAML keeps the last one and drops the first without a word.
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, SequenceNode

MAX_DEPTH = 64
MAX_NODES = 100_000


class YAMLLimitError(yaml.MarkedYAMLError):
    """A YAML document over the nesting or expansion limits; `problem` and `problem_mark` say what and where."""


class DuplicateKeyError(YAMLLimitError):
    """A mapping that gives one key twice; `problem` names the key and the line of its first use."""


class _Bounds:
    """The limits above, for a loader class: depth while composing, duplicate keys while constructing."""

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

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue  # `<<: *base` merges; a key given beside it overrides the merged one, as YAML says
            key = self.construct_object(key_node, deep=False)
            try:
                first = seen.get(key)
            except TypeError:
                continue  # an unhashable key: SafeLoader's own error names it
            if first is not None:
                raise DuplicateKeyError(
                    problem=f"key {key!r} given twice (first on line {first + 1}); keep one",
                    problem_mark=key_node.start_mark,
                )
            seen[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep=deep)


class BoundedLoader(_Bounds, yaml.SafeLoader):
    """`yaml.SafeLoader` that refuses documents nested deeper than `MAX_DEPTH` levels and keys given twice."""


class LiteralLoader(_Bounds, yaml.BaseLoader):
    """The same limits, every scalar kept as the text it was written as (`no`, `1.10`, `12:30`, `010` stay
    strings): a `--set` value is typed by the key it sets, not by YAML 1.1's guesses (`no` -> False, `010` -> 8)."""


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


def load(text: str | bytes, literal: bool = False) -> Any:
    """One YAML document as Python values, as `yaml.safe_load` gives it (`literal`: every scalar a string), within
    the limits above; a `yaml.YAMLError` (a `YAMLLimitError` for the limits) otherwise."""
    loader = (LiteralLoader if literal else BoundedLoader)(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        expanded_size(node)
        return loader.construct_document(node)
    finally:
        loader.dispose()
