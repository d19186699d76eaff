"""A configuration's neighbours on the grid (analysis/tune/neighbours.py): what the confirmation
search measures beside its choice."""

from __future__ import annotations

from dataclasses import replace

from analysis.tune.model import Config
from analysis.tune.neighbours import neighbours


def w(n: int, prefetch: int = 2, persistent: bool = False) -> Config:
    return Config(num_workers=n, prefetch_factor=prefetch if n else None, persistent_workers=persistent)


GRID = [w(0), *[w(n, p) for n in (1, 2, 3, 4, 6, 8) for p in (1, 2, 4)]]


def test_neighbours_are_one_value_away_on_each_axis() -> None:
    assert set(neighbours(w(4, 2), GRID)) == {w(3, 2), w(6, 2), w(4, 1), w(4, 4)}
    # num_workers=0 has no worker settings: each first worker count is its neighbour.
    assert set(neighbours(w(0), GRID)) == {w(1, 1), w(1, 2), w(1, 4)}
    assert set(neighbours(w(1, 1), GRID)) == {w(0), w(2, 1), w(1, 2)}


def test_neighbours_on_a_copy_axis_hold_the_rest() -> None:
    def pin(c: Config) -> Config:
        return replace(c, pin_memory=True)

    grid = [*GRID, *(pin(c) for c in GRID)]
    assert set(neighbours(w(4, 2), grid)) == {w(3, 2), w(6, 2), w(4, 1), w(4, 4), pin(w(4, 2))}
    assert set(neighbours(pin(w(1, 1)), grid)) == {pin(w(0)), pin(w(2, 1)), pin(w(1, 2)), w(1, 1)}
    # num_workers=0 keeps its copy mode: its neighbours are the first worker counts in it.
    assert set(neighbours(w(0), grid)) == {w(1, 1), w(1, 2), w(1, 4), pin(w(0))}
