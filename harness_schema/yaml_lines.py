"""Load YAML while remembering the line of every dotted field, for error messages.

PyYAML builds a node tree (with marks) before it builds Python objects; we keep both so that
`spec.py` can say ``jobs/x.yaml:12: loader.num_workers: ...`` without a second parser.

Aliases (`*name`) are bounded before anything walks the tree. PyYAML composes an alias as a
second reference to its anchor's node, so nine nested anchors of nine aliases each (a few
hundred bytes) compose at once into a graph that every walker (this module's line table, the
checks, the point ids) reads as 9**9 values: 33 s and 3.4 GB before the first error. The graph
is measured once with each node's expanded size memoised, so a bomb is refused at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml

MAX_EXPANDED = 10_000
"""Values (mappings, lists, scalars) a spec may hold once its aliases are expanded. The
largest spec in jobs/ has 106; a sequence of 100 steps of 10 fields has about 2,000."""


class YamlSyntaxError(ValueError):
    """The text is not valid YAML (or has a duplicate key); carries the 1-based line."""

    def __init__(self, message: str, line: int | None) -> None:
        super().__init__(message)
        self.line = line


@dataclass(frozen=True, slots=True)
class LoadedYaml:
    data: Any
    lines: dict[str, int]  # dotted path ("loader.num_workers", "rungs[2]") -> 1-based line

    def line_of(self, path: str) -> int | None:
        """The line of `path`, or of its closest ancestor that has one."""
        while path:
            if path in self.lines:
                return self.lines[path]
            cut = max(path.rfind("."), path.rfind("["))
            path = path[:cut] if cut > 0 else ""
        return self.lines.get("")


def load_yaml_with_lines(text: str) -> LoadedYaml:
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return LoadedYaml(data=None, lines={})
        _check_expansion(node)
        lines: dict[str, int] = {}
        _walk(node, "", lines)
        data = loader.construct_document(node)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line = mark.line + 1 if mark is not None else None
        problem = e.problem or str(e)
        raise YamlSyntaxError(f"invalid YAML: {problem}", line) from e
    except yaml.YAMLError as e:
        raise YamlSyntaxError(f"invalid YAML: {e}", None) from e
    except RecursionError as e:  # PyYAML composes recursively: [[[[... a few thousand deep
        raise YamlSyntaxError("invalid YAML: nested too deeply for a spec", None) from e
    finally:
        loader.dispose()
    return LoadedYaml(data=data, lines=lines)


def _walk(node: yaml.Node, path: str, lines: dict[str, int]) -> None:
    lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key_node, value_node in node.value:
            key = str(key_node.value)
            if key in seen:
                # PyYAML would silently keep the last one; a benchmark spec must not.
                raise YamlSyntaxError(f"duplicate key {key!r}", key_node.start_mark.line + 1)
            seen.add(key)
            child = f"{path}.{key}" if path else key
            lines[child] = key_node.start_mark.line + 1
            _walk(value_node, child, lines)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _walk(item, f"{path}[{i}]", lines)


def _check_expansion(root: yaml.Node) -> None:
    """Refuse an alias that refers to its own anchor (an endless value) and a document that
    expands past MAX_EXPANDED values; the line is the first field that alone goes past."""
    sizes: dict[int, int] = {}
    if _expanded(root, sizes, set()) <= MAX_EXPANDED:
        return
    node, path = root, ""
    while True:
        bigger = next(((k, v) for k, v in _children(node, path) if sizes[id(v)] > MAX_EXPANDED), None)
        if bigger is None:
            break
        path, node = bigger
    where = f"{path}:" if path else "the document"
    raise YamlSyntaxError(
        f"{where} expands to {sizes[id(node)]:,} values through aliases (*name); "
        f"at most {MAX_EXPANDED:,} are allowed: write the values out, or use fewer aliases",
        node.start_mark.line + 1,
    )


def _expanded(node: yaml.Node, sizes: dict[int, int], open_nodes: set[int]) -> int:
    """Values under `node`, aliases counted as many times as they are used; each node is
    measured once (memoised), so this is linear in the text, not in the expansion."""
    key = id(node)
    if key in sizes:
        return sizes[key]
    if key in open_nodes:
        raise YamlSyntaxError(
            "an alias inside its own anchor (&name ... *name) makes an endless value; "
            "aliases must refer to a value defined before them",
            node.start_mark.line + 1,
        )
    open_nodes.add(key)
    total = 1 + sum(_expanded(child, sizes, open_nodes) for _, child in _children(node, ""))
    open_nodes.discard(key)
    sizes[key] = total
    return total


def _children(node: yaml.Node, path: str) -> list[tuple[str, yaml.Node]]:
    """(dotted path, node) of each child; a mapping's keys count as values too."""
    if isinstance(node, yaml.MappingNode):
        out: list[tuple[str, yaml.Node]] = []
        for key_node, value_node in node.value:
            key = str(key_node.value) if isinstance(key_node, yaml.ScalarNode) else "<key>"
            out += [(path, key_node), (f"{path}.{key}" if path else key, value_node)]
        return out
    if isinstance(node, yaml.SequenceNode):
        return [(f"{path}[{i}]", item) for i, item in enumerate(node.value)]
    return []
