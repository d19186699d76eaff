"""Expectations: the spec's `expect:` section, bounds a sweep's results must meet to pass.

    expect:
      - {min_of_bound: 0.9}                          # full reaches 90 % of the device bound
      - {min_samples_per_s: 500, num_workers: 8, node_type: "8× NVIDIA A100-SXM4-80GB"}
      - {max_loading_time: 0.01, point: 3f9c2a1b}
      - {min_gpu_util: 90}                           # DLIO's accelerator-utilisation gate

Each entry holds one figure with its bound (FIGURES), and filters that pick the points it is
about: `point` (a point id), `step` (a sequence step's name), `rung`, `node`, `node_type`, or
any workload or loader setting (`num_workers: 8`). Without filters an entry holds for every
point: its worst one decides. This module declares and validates; `analysis/expect.py` checks
the results (torch-free, from the saved spec.yaml), and `harness run`, `submit --wait` and
`report` exit with EXIT_EXPECTATION_FAILED when one fails.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from harness_schema import settings

EXIT_EXPECTATION_FAILED = 3


@dataclass(frozen=True, slots=True)
class Figure:
    column: str
    """The summary's column (analysis.aggregate), or `of_bound` (full over the bound rung)."""
    at_least: bool
    """min_*: the figure must be >= the bound; max_*: <=."""
    unit: str


FIGURES: dict[str, Figure] = {
    "min_samples_per_s": Figure("samples_per_s", True, "samples/s"),
    "max_loading_time": Figure("loading_time", False, "s per step waiting for data"),
    "min_of_bound": Figure("of_bound", True, "of the bound rung's steps/s"),
    "min_gpu_util": Figure("gpu_util", True, "% GPU utilisation (the sampler's)"),
}
PLACES = {
    "point": "point_id",
    "step": "sequence_step",
    "rung": "rung",
    "node": "node",
    "node_type": "node_type",
}
"""Filter key -> the summary's column."""

# The settings a result row carries (the others are not in the rows to filter on).
_FIELDS = {d: f for d, f in settings.setting_fields().items() if settings.rule_of(f).in_row}
_SHORT = {dotted.split(".", 1)[1]: dotted for dotted in _FIELDS}

Fail = Callable[[str, str], Exception]
"""fail(dotted field, message) -> the error to raise (spec.py's, with file and line)."""


@dataclass(frozen=True, slots=True)
class Expectation:
    name: str
    """A key of FIGURES."""
    bound: float
    filters: Mapping[str, Any] = field(default_factory=dict)
    """The summary's column -> the value a point must have (`num_workers`, `node_type`...)."""

    @property
    def figure(self) -> Figure:
        return FIGURES[self.name]

    def label(self) -> str:
        """`min_samples_per_s >= 500 (num_workers=8)`, as a user reads it."""
        sign = ">=" if self.figure.at_least else "<="
        where = ", ".join(f"{_short(k)}={v}" for k, v in self.filters.items())
        return f"{self.name} {sign} {self.bound:g}" + (f" ({where})" if where else "")


def parse_expect(
    raw: Any, fail: Fail, *, rungs: Collection[str] | None = None, steps: Collection[str] | None = None
) -> tuple[Expectation, ...]:
    """The `expect:` section, checked: one figure per entry, known filters with valid values.
    `rungs` and `steps` (the spec's), where given, are what `rung` and `step` may name."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise fail(
            "expect",
            f"{_show(raw)} is not allowed; expected a list of mappings such as {{min_samples_per_s: 500}}",
        )
    return tuple(_entry(item, f"expect[{i}]", fail, rungs, steps) for i, item in enumerate(raw))


def _entry(
    item: Any, path: str, fail: Fail, rungs: Collection[str] | None, steps: Collection[str] | None
) -> Expectation:
    if not isinstance(item, Mapping):
        raise fail(
            path, f"{_show(item)} is not allowed; expected a mapping such as {{min_samples_per_s: 500}}"
        )
    for key in item:
        if key not in FIGURES and key not in PLACES and key not in _FIELDS and key not in _SHORT:
            raise fail(f"{path}.{key}", f"unknown key; valid keys: {', '.join([*FIGURES, *PLACES, *_SHORT])}")
    named = [k for k in item if k in FIGURES]
    if len(named) != 1:
        shown = ", ".join(named) if named else "none"
        raise fail(path, f"one figure per entry ({shown} given); figures: {', '.join(FIGURES)}")
    name = named[0]
    bound = item[name]
    if isinstance(bound, bool) or not isinstance(bound, int | float):
        raise fail(f"{path}.{name}", f"{_show(bound)} is not allowed; expected a number")
    filters: dict[str, Any] = {}
    for key, value in item.items():
        if key != name:
            column, checked = _filter(str(key), value, f"{path}.{key}", fail, rungs, steps)
            filters[column] = checked
    if name == "min_of_bound" and "rung" in filters:
        raise fail(f"{path}.rung", "min_of_bound compares full with the bound rung; it takes no rung")
    return Expectation(name=name, bound=float(bound), filters=filters)


def _filter(
    key: str, value: Any, path: str, fail: Fail, rungs: Collection[str] | None, steps: Collection[str] | None
) -> tuple[str, Any]:
    if key in PLACES:
        if not isinstance(value, str) or not value:
            raise fail(path, f"{_show(value)} is not allowed; expected a string (quote an id of digits)")
        allowed = {"rung": rungs, "step": steps}.get(key)
        if allowed is not None and value not in allowed:
            raise fail(path, f"{value!r} is not among the spec's {key}s ({', '.join(allowed) or 'none'})")
        return PLACES[key], value
    dotted = key if key in _FIELDS else _SHORT[key]
    rule = settings.rule_of(_FIELDS[dotted])
    if not rule.check(value):
        raise fail(path, f"{_show(value)} is not allowed; expected {rule.allowed}")
    return dotted.split(".", 1)[1], value


def _short(column: str) -> str:
    return next((k for k, c in PLACES.items() if c == column), column)


def _show(value: Any) -> str:
    text = repr(value) if isinstance(value, str) else str(value).replace("None", "null")
    return text if len(text) <= 60 else text[:57] + "..."
