"""Streams with fewer shards than DataLoader workers, said by `harness plan` before anything runs.

A stream is sharded between its readers (every rank's workers) by the stream itself: Hugging
Face's IterableDataset gives worker k the shards k, k + num_workers, ... and stops the workers
past its `n_shards` (its `to_iterable_dataset` makes 1 shard unless told `num_shards`);
webdataset's `split_by_worker` and `streams.shard` give them nothing. Those workers idle while
the row says num_workers=N. The plan can tell only where the spec says the shards without
building the dataset: a `num_shards` or `n_shards` integer in `dataset_args`, or a dataset
class with such an integer class attribute. Otherwise the rows tell, once run: `idle_workers`
counts the workers that made no batch (harness/execution/ladder.py:WorkerTally).
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from harness.workloads import registry

if TYPE_CHECKING:  # plan.py calls this module
    from harness.config.plan import Point

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


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def plan_notes(points: Sequence[Point]) -> list[str]:
    """One line per dataset, shard count and worker count where workers would idle."""
    groups: dict[tuple[str, int, str, int], list[int]] = {}
    for point in points:
        w = point.workload
        if w.script is not None or w.dataset is None:
            continue  # a script reads its own, unseen here; a loader factory's has none to count
        found = declared_shards(w.dataset, w.dataset_args)
        if found is None or point.loader.num_workers <= found[0]:
            continue
        groups.setdefault((w.dataset, *found, point.loader.num_workers), []).append(point.index)
    return [
        f"points {', '.join(map(str, indices))}: {dataset} has {shards} shard{'s' * (shards != 1)} "
        f"({where}) for num_workers={workers}: {workers - shards} worker(s) of each rank will deliver "
        "nothing while the rows say num_workers="
        f"{workers} (their idle_workers column counts them); give the stream at least num_workers × "
        "ranks shards"
        for (dataset, shards, where, workers), indices in groups.items()
    ]
