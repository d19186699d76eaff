"""The point's DataLoader: built from its loader settings and the user's collate, sampler or
batch sampler (LoaderParts), for this rank's share of the data (Placement), the batches of each
worker counted (WorkerTally).

A concept apart from the ladder (ladder.py), which decides what each rung caches, and from the
reading of a loader epoch after epoch (loader_stream.py): a user's own training script's
DataLoader (given_loader.py, the probe) is built here too, whatever the rung.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils.data import (
    DataLoader,
    Dataset,
    DistributedSampler,
    IterableDataset,
    RandomSampler,
    Sampler,
    default_collate,
    get_worker_info,
)

from harness.naming import type_name
from harness_schema.settings import LoaderSettings


@dataclass(frozen=True, kw_only=True, slots=True)
class Placement:
    """Where batches go: the device, and this rank's share of the data."""

    device: torch.device
    rank: int = 0
    world_size: int = 1
    seed: int = 0


SamplerFactory = Callable[[Any, Placement], "Sampler[Any]"]
"""`(dataset, placement) -> Sampler`: a user's sampler, built for this rank."""
BatchSamplerFactory = Callable[[Any, Placement, int, bool], Iterable[list[int]]]
"""`(dataset, placement, batch_size, drop_last) -> iterable of lists of indices`."""

OWNED_BY_PARTS = ("dataset", "batch_size", "shuffle", "sampler", "batch_sampler", "collate_fn")
"""DataLoader arguments that `LoaderParts.extra` may not give: the parts' fields say them."""


@dataclass(frozen=True, kw_only=True, slots=True)
class LoaderParts:
    """What a user's pipeline brings to the DataLoader besides the point's loader settings.

    Under DDP (world_size > 1) a map-style dataset gets a DistributedSampler unless the user
    gives `sampler` or `batch_sampler`; theirs then gets the rank and world size through the
    Placement and must shard itself (each rank its own share), as in the user's own training.
    `extra` holds other DataLoader keyword arguments (worker_init_fn, generator,
    multiprocessing_context, timeout...); the point's settings always win for num_workers,
    persistent_workers, pin_memory, prefetch_factor and drop_last.
    """

    collate_fn: Callable[[list[Any]], Any] | None = None
    sampler: SamplerFactory | None = None
    batch_sampler: BatchSamplerFactory | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.sampler is not None and self.batch_sampler is not None:
            raise ValueError("give a sampler or a batch_sampler, not both (the batch sampler samples)")
        owned = sorted(set(self.extra) & set(OWNED_BY_PARTS))
        if owned:
            raise ValueError(
                f"LoaderParts.extra may not set {', '.join(owned)}: collate_fn, sampler and "
                "batch_sampler are LoaderParts fields; dataset and batch_size come from the point"
            )


def make_loader(
    dataset: Dataset[Any],
    loader: LoaderSettings,
    batch_size: int,
    where: Placement,
    parts: LoaderParts = LoaderParts(),  # frozen, so one shared default is safe
    *,
    timeout_s: float = 0,
) -> DataLoader[Any]:
    """The point's DataLoader over `dataset`, with the user's collate, sampler or batch sampler.

    `timeout_s` (limits.batch_timeout_s; 0: none) bounds the wait for each batch from the
    workers; a `timeout` the user's own DataLoader arguments give is kept. Without workers it
    cannot apply: torch's single-process iterator asserts timeout == 0, as the main thread
    itself reads (the point's own time limit bounds that)."""
    settings: dict[str, Any] = {
        "timeout": timeout_s,
        **parts.extra,
        "num_workers": loader.num_workers,
        "persistent_workers": loader.persistent_workers,
        "prefetch_factor": loader.prefetch_factor,
        # Pinning is only meaningful for a copy to a GPU; on the CPU PyTorch warns and skips it.
        "pin_memory": loader.pin_memory and where.device.type == "cuda",
    }
    if loader.num_workers == 0:
        # torch's single-process iterator asserts timeout == 0: a script's own timeout (given
        # for its workers) would fail every point without workers.
        settings["timeout"] = 0
    if loader.num_workers > 0:
        settings["collate_fn"] = WorkerTally(parts.collate_fn or default_collate, loader.num_workers)
    elif parts.collate_fn is not None:
        settings["collate_fn"] = parts.collate_fn
    if isinstance(dataset, IterableDataset):
        if parts.sampler is not None or parts.batch_sampler is not None:
            raise ValueError(
                f"{type_name(dataset)} is an IterableDataset (a stream): it orders and shards "
                "its samples itself, so it takes no sampler or batch_sampler (PyTorch's rule)"
            )
        return DataLoader(dataset, batch_size=batch_size, drop_last=loader.drop_last, **settings)
    if parts.batch_sampler is not None:
        indices = parts.batch_sampler(dataset, where, batch_size, loader.drop_last)
        return DataLoader(dataset, batch_sampler=indices, **settings)
    return DataLoader(
        dataset,
        batch_size=batch_size,
        sampler=_sampler(dataset, where, parts),
        drop_last=loader.drop_last,
        **settings,
    )


class WorkerTally:
    """The collate, counting the batches each DataLoader worker makes, in shared memory.

    Why: a stream with fewer shards than workers leaves the extra workers without data (one
    library's stops them, a tar-shard stream's and `streams.shard` give them nothing), and the row would
    say num_workers=2 where one worked. The collate runs in the worker for every batch, so it
    is the one cheap place to count (one add per batch); the counts live in a tensor in shared
    memory, which forked and spawned workers alike write into (each its own slot)."""

    def __init__(self, collate: Callable[[list[Any]], Any], workers: int) -> None:
        self.collate = collate
        self.made = torch.zeros(workers, dtype=torch.int64).share_memory_()

    def __call__(self, samples: list[Any]) -> Any:
        batch = self.collate(samples)
        info = get_worker_info()
        if info is not None:
            self.made[info.id] += 1
        return batch

    def idle(self) -> int:
        """Workers that have made no batch so far."""
        return int((self.made == 0).sum())


def _sampler(dataset: Dataset[Any], where: Placement, parts: LoaderParts) -> Sampler[Any]:
    if parts.sampler is not None:
        return parts.sampler(dataset, where)
    if where.world_size > 1:
        return DistributedSampler(
            dataset, num_replicas=where.world_size, rank=where.rank, shuffle=True, seed=where.seed
        )
    return RandomSampler(
        dataset,  # type: ignore[arg-type]  # map-style datasets are Sized
        generator=torch.Generator().manual_seed(where.seed),
    )
