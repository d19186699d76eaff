"""Overrides on the command line: `harness run SPEC loader.num_workers=8 measure.steps=100`.

The convention of Hydra (and hydra-submitit-launcher): a dotted key into the spec, `=`, and a
value read as YAML, so that `loader.num_workers=[0,4,8]` is an axis, `null` is None and `true`
a bool. An override is applied to the loaded mapping, never to the text: the merged spec is then
dumped again and validated as a whole by `spec.py`, which names the override in its errors.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

# A key is dotted names: `loader.num_workers`, `workload.dataset_args.size`, `slurm.extra.gres`.
_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*(\.[A-Za-z_][A-Za-z0-9_-]*)*")
OVERRIDE_SHAPE = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*=.*", re.DOTALL)
"""What argparse's leftovers must look like to be taken for overrides (not a stray option)."""


class OverrideError(ValueError):
    """An override that cannot be applied; str() names it."""


@dataclass(frozen=True, slots=True)
class Override:
    key: str
    value: Any
    text: str
    """As typed: `loader.num_workers=8`; errors name it so."""

    def touches(self, dotted: str) -> bool:
        """Whether an error on `dotted` (a field, an item `x[2]`) is about this override's key:
        the key itself, something under it, or the section above it (a key that made it wrong)."""
        for a, b in ((dotted, self.key), (self.key, dotted)):
            if a == b or a.startswith(b + ".") or a.startswith(b + "["):
                return True
        return False


def parse_override(text: str) -> Override:
    key, sep, raw = text.partition("=")
    if not sep or not _KEY.fullmatch(key):
        raise OverrideError(
            f"override {text!r}: expected KEY=VALUE with a dotted key, e.g. loader.num_workers=8"
        )
    try:
        value = yaml.safe_load(raw) if raw.strip() else None
    except yaml.YAMLError as e:
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise OverrideError(f"override {text}: the value is not valid YAML: {problem}") from e
    return Override(key=key, value=value, text=text)


def apply_overrides(data: Mapping[str, Any], overrides: Sequence[Override]) -> dict[str, Any]:
    """A copy of `data` with each override set in turn (a later one wins). Missing sections
    are created; a key cannot go through a value that is not a mapping (an axis, a number)."""
    out: dict[str, Any] = _copy(data)
    for override in overrides:
        parts = override.key.split(".")
        node = out
        for depth, part in enumerate(parts[:-1]):
            child = node.get(part)
            if child is None:
                child = node[part] = {}
            elif not isinstance(child, dict):
                above = ".".join(parts[: depth + 1])
                raise OverrideError(
                    f"override {override.text}: {above} is {_kind(child)}, not a mapping; "
                    f"give its whole value instead ({above}=...)"
                )
            node = child
        node[parts[-1]] = override.value
    return out


def dump_merged(data: Mapping[str, Any], file: str, overrides: Sequence[Override], original: str = "") -> str:
    """The merged spec as YAML, with a first line that says where it came from; then, commented
    out, the file as its author wrote it (`original`): a dump keeps no comments, and a sweep's
    spec.yaml is what a reader opens to learn why a value was chosen."""
    given = " ".join(o.text.replace("\n", " ") for o in overrides)
    body = yaml.safe_dump(dict(data), sort_keys=False, default_flow_style=None, width=100, allow_unicode=True)
    merged = f"# {file} with overrides: {given}\n{body}"
    if not original.strip():
        return merged
    quoted = "".join(f"#   {line}".rstrip() + "\n" for line in original.splitlines())
    return f"{merged}\n# {file} as written, before the overrides:\n{quoted}"


def _copy(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def _kind(value: Any) -> str:
    if isinstance(value, list):
        return "a list (an axis)"
    return f"{value!r}"
