"""A group's summary rows as Python values, column by column: what the recommendation reads of
each point, without a dict or a Series per point.

A report on 100,000 points (issue #36) judges every point of a group against its best, but
makes a Choice (a dict of the point's values) only for the few it names: the best, the
cheapest, the undecided, the unranked. Building a dict per point was a fifth of recommending.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pandas as pd

from analysis.aggregate import LOADER_COLUMNS, WORKLOAD_COLUMNS

READ = (
    *("point_id", "jobid", "point_index", "samples_per_s", "run_samples_per_s", "run_passes"),
    *("cpu_memory_gb", "pooled", "failed_runs", "all_runs", "ranks", "world_size", "run_seconds"),
    *("sequence_step", *LOADER_COLUMNS, *WORKLOAD_COLUMNS),
)
"""What a Choice and an unranked reason read of a row: its settings shown, its figures and runs."""


class Records(Sequence[dict[str, Any]]):
    """The rows of a frame as the Python values of the columns read (READ), as iterrows gives
    them; `records[i]` is row i as a dict, made when asked."""

    __slots__ = ("_length", "columns")

    def __init__(self, columns: dict[str, list[Any]], length: int) -> None:
        self.columns = columns
        self._length = length

    @classmethod
    def of(cls, rows: pd.DataFrame) -> Records:
        return cls({c: rows[c].tolist() for c in READ if c in rows.columns}, len(rows))

    def column(self, name: str) -> list[Any]:
        return self.columns[name]

    def __len__(self) -> int:
        return self._length

    def __getitem__(self, i: int) -> dict[str, Any]:  # type: ignore[override]
        if not -self._length <= i < self._length:
            raise IndexError(i)
        return {c: values[i] for c, values in self.columns.items()}

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return (self[i] for i in range(self._length))

    def take(self, positions: list[int]) -> Records:
        """The rows at `positions`, in that order."""
        if len(positions) == self._length and positions == list(range(self._length)):
            return self
        return Records({c: [v[i] for i in positions] for c, v in self.columns.items()}, len(positions))
