"""How each rung of the caching ladder builds its stream of batches.

Every rung that still reads from a dataset goes through a DataLoader built from the point's
loader settings (workers, prefetch, pinning...: dataloader.py), so that two rungs differ only
in the stage that is cached: one batch repeated (device_batch, host_batch: RepeatStream) or a
cached sample (sample_cache.py), read epoch after epoch (loader_stream.py).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Protocol

from torch.utils.data import Dataset

from harness.execution import batches
from harness.execution.dataloader import LoaderParts, Placement, make_loader
from harness.execution.loader_stream import LoaderStream
from harness.execution.sample_cache import CachedStage, CachedStream, sample_dataset
from harness_schema.settings import LoaderSettings


class RepeatStream:
    """The same batch at every step (device_batch, host_batch)."""

    epoch_steps: int | None = None
    stock = 0

    def __init__(self, batch: Any) -> None:
        self.batch = batch

    def next(self) -> Any:
        return self.batch

    def close(self) -> None:
        self.batch = None


def cached_value_bytes(stream: LoaderStream | RepeatStream) -> int | None:
    """Bytes of the value a cached sample-level rung served (what caching that stage's output
    would hold per sample), as the process that produced it sized it; None for other rungs,
    before a value was produced, or where it has no size. Read before the stream is closed.
    A stream's value too (CachedStream), sized by its reader: whether the cache has a size is
    the data set's length's question (runner.dataset_samples)."""
    stage = getattr(getattr(stream, "loader", None), "dataset", None)
    if not isinstance(stage, CachedStage | CachedStream):
        return None
    size = int(stage.value_bytes[0])
    return size if size >= 0 else None


class BatchSource(Protocol):
    """A stream a cached rung takes its one batch from (a LoaderStream, a given loader's IterStream)."""

    def next(self) -> Any: ...

    def close(self) -> None: ...


def cached_batch(source: BatchSource, rung: str, where: Placement) -> RepeatStream:
    """device_batch's and host_batch's stream, whoever built the loader: the source's first
    batch (the source closed after it), on the device for device_batch, repeated."""
    try:
        batch = source.next()
    finally:
        source.close()
    if rung == "device_batch":
        batch = batches.to_device(batch, where.device)
    return RepeatStream(batch)


def build_stream(
    rung: str,
    dataset: Dataset[Any],
    loader: LoaderSettings,
    batch_size: int,
    where: Placement,
    parts: LoaderParts = LoaderParts(),  # frozen, so one shared default is safe  # noqa: B008
    *,
    timeout_s: float = 0,
) -> LoaderStream | RepeatStream:
    """The rung's stream; `timeout_s` bounds each wait for a batch from the workers."""
    if rung in ("device_batch", "host_batch"):
        source = LoaderStream(make_loader(dataset, loader, batch_size, where, parts, timeout_s=timeout_s))
        return cached_batch(source, rung, where)
    return LoaderStream(
        make_loader(
            sample_dataset(rung, dataset, batch_size),
            loader,
            batch_size,
            where,
            on(parts, dataset),
            timeout_s=timeout_s,
        )
    )


def on(parts: LoaderParts, dataset: Dataset[Any]) -> LoaderParts:
    """The parts with the user's sampler or batch sampler built on the user's own dataset, not
    on a rung's cached stage: a sampler may read the dataset's attributes (a length-bucketing
    one reads its `lengths`, as a length-grouped sampler does), and the stage has
    the dataset's length and serves any index, so the indices it gets stay valid."""
    sampler, batch_sampler = parts.sampler, parts.batch_sampler
    return dataclasses.replace(
        parts,
        sampler=None if sampler is None else (lambda _stage, where: sampler(dataset, where)),
        batch_sampler=None
        if batch_sampler is None
        else (lambda _stage, where, size, last: batch_sampler(dataset, where, size, last)),
    )
