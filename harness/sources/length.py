"""A loader's length, where it says one: the one place that asks `len()` of a loader."""

from __future__ import annotations

from typing import Any


def length(loader: Any) -> int | None:
    """`len(loader)`, or None for a loader without one (a stream without __len__)."""
    try:
        return len(loader)
    except TypeError:
        return None
