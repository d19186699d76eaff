"""The shape of a spec's grid: its zips, exclusions and sequence, checked against its axes, and
how many combinations they cross into (refused past MAX_COMBINATIONS before a plan is made)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from harness.config.spec_checker import FIELDS_BY_DOTTED, Checker, show


@dataclass(frozen=True, kw_only=True, slots=True)
class SequenceStep:
    name: str
    overrides: Mapping[str, Any]
    """Dotted field -> value set at this step; later steps keep it (cumulative)."""


MAX_COMBINATIONS = 250_000
"""The most combinations a spec's axes may cross into (before its exclusions). A plan of
100,000 points takes about 15 s and 250 MB (benchmarks/plan_scale.py); a grid of 40 values on
each of four axes would cross into millions, and `plan` would run for hours, out of memory,
where one line was due (issue 37)."""


def check_combinations(
    c: Checker, axes: Mapping[str, tuple[Any, ...]], zipped: tuple[tuple[str, ...], ...], steps: int
) -> None:
    """Refuse a spec whose axes (zipped ones counted once, times its sequence steps) cross
    into more than MAX_COMBINATIONS, naming each axis's length."""
    in_zip = {name for group in zipped for name in group}
    lengths = {name: len(v) for name, v in axes.items() if len(v) > 1 and name not in in_zip}
    lengths |= {" + ".join(group): len(axes[group[0]]) for group in zipped}
    total = steps * math.prod(lengths.values())
    if total <= MAX_COMBINATIONS:
        return
    factors = " × ".join(f"{name} {n}" for name, n in lengths.items())
    if steps > 1:
        factors += f" × sequence {steps}"
    first = next(iter(lengths), "sequence")
    raise c.fail(
        first.split(" + ")[0],
        f"the axes cross into {total:,} combinations ({factors}); at most {MAX_COMBINATIONS:,} are "
        "planned: narrow an axis, zip axes that go together, or split the sweep",
    )


def zip_axes(c: Checker, raw: Any, axes: Mapping[str, tuple[Any, ...]]) -> tuple[tuple[str, ...], ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list) or not all(isinstance(g, list) for g in raw):
        raise c.fail("zip", f"{show(raw)} is not allowed; expected a list of lists of axis names")
    groups: list[tuple[str, ...]] = []
    used: set[str] = set()
    for i, group in enumerate(raw):
        path = f"zip[{i}]"
        if len(group) < 2:
            raise c.fail(path, f"{show(group)} zips fewer than two axes")
        names = tuple(c.field_name(n, f"{path}[{j}]") for j, n in enumerate(group))
        lengths = {n: len(axes[n]) for n in names}
        if any(length == 1 for length in lengths.values()):
            single = next(n for n, length in lengths.items() if length == 1)
            raise c.fail(path, f"{single} is not an axis (a single value); zip needs lists")
        if len(set(lengths.values())) != 1:
            shown = ", ".join(f"{n} has {length}" for n, length in lengths.items())
            raise c.fail(path, f"zipped axes must have the same length: {shown}")
        if used & set(names):
            raise c.fail(path, f"{sorted(used & set(names))[0]} is already zipped in another group")
        used |= set(names)
        groups.append(names)
    return tuple(groups)


def exclusions(c: Checker, raw: Any) -> tuple[Mapping[str, Any], ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise c.fail("exclude", f"{show(raw)} is not allowed; expected a list of mappings")
    out: list[Mapping[str, Any]] = []
    for i, item in enumerate(raw):
        path = f"exclude[{i}]"
        if not isinstance(item, Mapping) or not item:
            raise c.fail(path, f"{show(item)} is not allowed; expected a mapping of field: value")
        resolved: dict[str, Any] = {}
        for key, value in item.items():
            dotted = c.field_name(key, f"{path}.{key}")
            c.value(FIELDS_BY_DOTTED[dotted], value, f"{path}.{key}")
            resolved[dotted] = value
        out.append(resolved)
    return tuple(out)


def sequence_steps(c: Checker, raw: Any, axes: Mapping[str, tuple[Any, ...]]) -> tuple[SequenceStep, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list) or not raw:
        raise c.fail("sequence", f"{show(raw)} is not allowed; expected a list of override mappings")
    steps: list[SequenceStep] = []
    for i, item in enumerate(raw):
        path = f"sequence[{i}]"
        if not isinstance(item, Mapping):
            raise c.fail(path, f"{show(item)} is not allowed; expected a mapping of field: value")
        label = item.get("name", f"step{i}")
        if not isinstance(label, str) or not label:
            raise c.fail(f"{path}.name", f"{show(label)} is not allowed; expected a string")
        # A step's name is a cell of every table and a word of the recommendation's lines: a
        # line break there split the console's one-line answer in two (issue 37's hostile name).
        c.line_safe(label, f"{path}.name")
        overrides: dict[str, Any] = {}
        for key, value in item.items():
            if key == "name":
                continue
            dotted = c.field_name(key, f"{path}.{key}")
            if len(axes[dotted]) > 1:
                raise c.fail(f"{path}.{key}", f"{dotted} is an axis; a sequence step cannot also set it")
            c.value(FIELDS_BY_DOTTED[dotted], value, f"{path}.{key}")
            overrides[dotted] = value
        steps.append(SequenceStep(name=label, overrides=overrides))
    if len({s.name for s in steps}) != len(steps):
        raise c.fail("sequence", "step names must be distinct")
    return tuple(steps)
