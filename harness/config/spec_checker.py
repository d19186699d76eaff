"""The spec's checker: the file and line table behind every error (`SpecError`: file, line,
dotted field, value, what is allowed), and the checks of one section's settings against their
rules (harness_schema/settings.py), scalar or an axis."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import Field, fields
from typing import Any

from harness.config import sbatch_safe
from harness_schema import settings
from harness_schema.settings import REQUIRED
from harness_schema.yaml_lines import LoadedYaml

LINE_SAFE = "a single line without control characters"


class SpecError(ValueError):
    """A spec that cannot run. str() is the one line a user sees."""

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        line: int | None = None,
        field: str | None = None,
    ) -> None:
        self.file, self.line, self.field, self.message = file, line, field, message
        where = file or "<spec>"
        if line is not None:
            where += f":{line}"
        super().__init__(f"{where}: {field}: {message}" if field else f"{where}: {message}")


# "num_workers" and "loader.num_workers" both name the same setting.
FIELDS_BY_DOTTED: dict[str, Field[Any]] = settings.setting_fields()


SHORT_TO_DOTTED: dict[str, str] = {dotted.split(".", 1)[1]: dotted for dotted in FIELDS_BY_DOTTED}


class Checker:
    """Holds the file and line table so that each check is one readable line."""

    def __init__(self, loaded: LoadedYaml, file: str | None) -> None:
        self.loaded, self.file = loaded, file

    def fail(self, dotted: str, message: str) -> SpecError:
        # A key may hold a line break too: the field is shown escaped, so the error is one line.
        shown = "".join(repr(ch)[1:-1] if sbatch_safe.is_control(ch) else ch for ch in dotted)
        return SpecError(message, file=self.file, line=self.loaded.line_of(dotted), field=shown)

    def mapping(self, value: Any, dotted: str) -> Mapping[str, Any]:
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise self.fail(dotted, f"{show(value)} is not allowed; expected a mapping")
        return value

    def known_keys(self, section: Mapping[str, Any], dotted: str, valid: Sequence[str]) -> None:
        for key in section:
            if key not in valid:
                path = f"{dotted}.{key}" if dotted else str(key)
                raise self.fail(path, f"unknown key; valid keys: {', '.join(valid)}")

    def value(self, f: Field[Any], value: Any, dotted: str) -> Any:
        rule = settings.rule_of(f)
        if not rule.check(value):
            raise self.fail(dotted, f"{show(value)} is not allowed; expected {rule.allowed}")
        return value

    def given_or_default(self, f: Field[Any], given: Mapping[str, Any], path: str) -> Any:
        if f.name in given:
            return given[f.name]
        default = settings.default_of(f)
        if default is REQUIRED:
            raise self.fail(path, f"missing; expected {settings.rule_of(f).allowed}")
        return default

    def section(self, cls: type, raw: Any, dotted: str) -> dict[str, Any]:
        """Scalar settings of one section: defaults filled in, every value checked."""
        given = self.mapping(raw, dotted)
        self.known_keys(given, dotted, [f.name for f in fields(cls)])
        out: dict[str, Any] = {}
        for f in fields(cls):
            path = f"{dotted}.{f.name}"
            value = self.given_or_default(f, given, path)
            out[f.name] = self.value(f, value, path) if f.name in given else value
        return out

    def axes(
        self, cls: type, raw: Any, dotted: str, optional: Sequence[str] = ()
    ) -> dict[str, tuple[Any, ...]]:
        """Like section(), but a list is an axis: each of its values is checked. A required
        field named in `optional` is null when not given."""
        given = self.mapping(raw, dotted)
        self.known_keys(given, dotted, [f.name for f in fields(cls)])
        out: dict[str, tuple[Any, ...]] = {}
        for f in fields(cls):
            path = f"{dotted}.{f.name}"
            absent = f.name in optional and f.name not in given
            value = None if absent else self.given_or_default(f, given, path)
            if f.name not in given:
                out[path] = (value,)
            elif isinstance(value, list) and settings.rule_of(f).axis:
                out[path] = self.axis(f, value, path)
            else:
                out[path] = (self.value(f, value, path),)
        return out

    def axis(self, f: Field[Any], values: list[Any], path: str) -> tuple[Any, ...]:
        if not values:
            allowed = settings.rule_of(f).allowed
            raise self.fail(path, f"empty list; an axis needs at least one value of {allowed}")
        for i, item in enumerate(values):
            self.value(f, item, f"{path}[{i}]")
        if len(set(map(freeze, values))) != len(values):
            raise self.fail(path, f"{show(values)} repeats a value; each value once")
        return tuple(values)

    def line_safe(self, value: Any, dotted: str) -> None:
        """A value that becomes one line (of an sbatch script, a table's cell) holds no line break."""
        if isinstance(value, str) and sbatch_safe.has_line_break(value):
            raise self.fail(dotted, f"{show(value)} is not allowed; expected {LINE_SAFE}")

    def field_name(self, name: Any, dotted: str) -> str:
        """Accept `num_workers` or `loader.num_workers`; return the dotted form."""
        if isinstance(name, str):
            if name in FIELDS_BY_DOTTED:
                return name
            if name in SHORT_TO_DOTTED:
                return SHORT_TO_DOTTED[name]
        raise self.fail(
            dotted,
            f"{show(name)} is not a workload or loader field; valid: {', '.join(SHORT_TO_DOTTED)}",
        )


def show(value: Any) -> str:
    text = repr(value) if isinstance(value, str) else str(value).replace("None", "null")
    if isinstance(value, bool):
        text = str(value).lower()
    return text if len(text) <= 60 else text[:57] + "..."


def freeze(value: Any) -> Any:
    if isinstance(value, Mapping):
        return tuple(sorted((k, freeze(v)) for k, v in value.items()))
    if isinstance(value, list):
        return tuple(freeze(v) for v in value)
    return value
