"""Streams with fewer shards than DataLoader workers, said by `harness plan` before anything runs.

A stream is sharded between its readers (every rank's workers) by the stream itself: Hugging
Face's IterableDataset gives worker k the shards k, k + num_workers, ... and stops the workers
past its `n_shards` (its `to_iterable_dataset` makes 1 shard unless told `num_shards`);
a tar-shard stream's `split_by_worker` and `streams.shard` give them nothing. Those workers idle while
the row says num_workers=N. The plan can tell only where the spec says the shards without
building the dataset: a `num_shards` or `n_shards` integer in `dataset_args`, or a dataset
class with such an integer class attribute; for a `workload.loader` factory that takes the
point's `num_workers`, such an integer in `loader_args`. Otherwise the rows tell, once run:
`idle_workers` counts the workers that made no batch (harness/execution/dataloader.py:WorkerTally)
of a DataLoader the harness built; a factory's loader is its own, its collate not ours to count
in, so its rows leave idle_workers empty and this note is all there is.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from harness.workloads import registry

SHARD_NAMES = ("num_shards", "n_shards")
"""How datasets spell their shard count: `to_iterable_dataset(num_shards=)`, `IterableDataset.n_shards`."""


def declared_shards(dataset: str, dataset_args: Mapping[str, Any]) -> tuple[int, str] | None:
    """(shards, where the spec says it) without building the dataset; None where it does not."""
    for name in SHARD_NAMES:
        count = _count(dataset_args.get(name))
        if count is not None:
            return count, f"dataset_args.{name}"
    if dataset in registry.DATASETS:
        return None  # the built-ins are map-style, and importing them would import torch
    try:
        factory = registry.resolve(dataset, registry.DATASETS, "dataset")
    except registry.FactoryError:
        return None  # the spec check has said so already
    if not inspect.isclass(factory):
        return None  # a function's dataset is only known once built
    for name in SHARD_NAMES:
        count = _count(inspect.getattr_static(factory, name, None))  # a property is not a count
        if count is not None:
            return count, f"{dataset}.{name}"
    return None


def declared_shards_of(dataset: Any) -> int | None:
    """The shards a built stream says it has (the runner's idle-workers line), read from its
    attributes under SHARD_NAMES without iterating it (an IterableDataset's `n_shards`);
    None where none says."""
    for name in SHARD_NAMES:
        try:
            value = getattr(dataset, name, None)
        except Exception:  # a property that fails: the stream does not say
            continue
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


@dataclass(frozen=True, slots=True)
class Readers:
    """A point's stream and the workers reading it (plan.py gives them: this module does not
    know the Point, which plan.py builds with its notes)."""

    index: int
    dataset: str | None
    dataset_args: Mapping[str, Any]
    num_workers: int
    loader: str | None = None
    """workload.loader's factory, where the point has one: it builds the loader itself."""
    loader_args: Mapping[str, Any] = field(default_factory=dict)


COUNTED = "their idle_workers column counts them"
NOT_COUNTED = "the rows cannot count them: the factory's loader is its own, not the harness's to count in"


def _takes_workers(loader: str) -> bool:
    """The factory takes the point's num_workers: otherwise its loader's workers are its own."""
    try:
        return registry.accepts(registry.resolve(loader, {}, "loader"), "num_workers")
    except registry.FactoryError:
        return False  # the spec check has said so already


def _found(point: Readers) -> tuple[str, int, str] | None:
    """(whose shards, how many, where the spec says it) where workers would idle; None where
    they would not, or the plan cannot tell."""
    if point.loader is not None and not _takes_workers(point.loader):
        return None
    found: tuple[str, int, str] | None = None
    if point.dataset is not None:
        declared = declared_shards(point.dataset, point.dataset_args)
        found = None if declared is None else (point.dataset, *declared)
    if found is None and point.loader is not None:
        counts = ((name, _count(point.loader_args.get(name))) for name in SHARD_NAMES)
        found = next(((point.loader, n, f"loader_args.{name}") for name, n in counts if n is not None), None)
    return found if found is not None and point.num_workers > found[1] else None


def plan_notes(points: Sequence[Readers]) -> list[str]:
    """One line per stream, shard count and worker count where workers would idle."""
    groups: dict[tuple[str, int, str, int, bool], list[int]] = {}
    for point in points:
        found = _found(point)
        if found is not None:
            key = (*found, point.num_workers, point.loader is None)
            groups.setdefault(key, []).append(point.index)
    return [
        f"points {', '.join(map(str, indices))}: {who} has {shards} shard{'s' * (shards != 1)} "
        f"({where}) for num_workers={workers}: {workers - shards} worker(s) of each rank will deliver "
        f"nothing while the rows say num_workers={workers} ({COUNTED if counted else NOT_COUNTED}); "
        "give the stream at least num_workers × ranks shards"
        for (who, shards, where, workers, counted), indices in groups.items()
    ]
