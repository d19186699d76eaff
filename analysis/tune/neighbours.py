"""The grid's neighbourhood of a configuration: the configurations one value away on one axis
(num_workers, prefetch_factor, persistent_workers, pin_memory, non_blocking), the others held.

Apart from the search (analysis/tune/search.py), which measures neighbours: what counts as a
neighbour is a property of the grid alone (num_workers=0 has no worker settings to hold).
"""

from __future__ import annotations

from collections.abc import Sequence

from analysis.tune.model import COPY, MODELLED, Config

AXES = (*MODELLED, *COPY)


def neighbours(config: Config, grid: Sequence[Config]) -> list[Config]:
    """The grid's configurations one value away on one axis, the others held."""
    out: list[Config] = []
    for axis in AXES:
        for other in adjacent(config, grid, axis):
            if other not in out:
                out.append(other)
    return out


def adjacent(config: Config, grid: Sequence[Config], axis: str) -> list[Config]:
    here = getattr(config, axis)
    same = [c for c in grid if _held(c, config, axis)]
    values = sorted({getattr(c, axis) for c in same}, key=_order)
    if here not in values:
        return []
    i = values.index(here)
    picked = [values[j] for j in (i - 1, i + 1) if 0 <= j < len(values)]
    return [c for c in same if getattr(c, axis) in picked]


def _held(c: Config, ref: Config, axis: str) -> bool:
    """c equals ref on every axis but `axis`; num_workers=0 has no worker settings to hold
    (its copy settings it has)."""
    if axis == "num_workers":
        held: tuple[str, ...] = COPY if 0 in (c.num_workers, ref.num_workers) else AXES
    elif axis in COPY:
        held = AXES
    elif c.num_workers != ref.num_workers or ref.num_workers == 0:
        return False
    else:
        held = AXES[1:]
    return all(getattr(c, other) == getattr(ref, other) for other in held if other != axis)


def _order(value: object) -> tuple[int, float]:
    return (0, float(value)) if isinstance(value, (int, float)) else (1, 0.0)  # bools are ints
