"""Load YAML while remembering the line of every dotted field, for error messages.

PyYAML builds a node tree (with marks) before it builds Python objects; we keep both so that
`spec.py` can say ``jobs/x.yaml:12: loader.num_workers: ...`` without a second parser.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml


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
