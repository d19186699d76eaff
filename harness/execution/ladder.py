"""How each rung of the caching ladder builds its stream of batches.

Every rung that still reads from a dataset goes through a DataLoader built from the point's
loader settings (workers, prefetch, pinning...), so that two rungs differ only in the stage
that is cached. The sample caches live in the dataset object and are filled lazily, once per
worker process, during warmup.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils.data import DataLoader, Dataset, DistributedSampler, RandomSampler, Sampler

from harness.config import rungs as rung_names
from harness.config.settings import LoaderSettings
from harness.workloads.contract import BytesDataset, SplitDataset


class RungUnavailable(Exception):
    """This dataset cannot serve this rung; the message says what it lacks."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Placement:
    """Where batches go: the device, and this rank's share of the data."""

    device: torch.device
    rank: int = 0
    world_size: int = 1
    seed: int = 0


def make_loader(
    dataset: Dataset[Any], loader: LoaderSettings, batch_size: int, where: Placement
) -> DataLoader[Any]:
    sampler: Sampler[int]
    if where.world_size > 1:
        sampler = DistributedSampler(
            dataset, num_replicas=where.world_size, rank=where.rank, shuffle=True, seed=where.seed
        )
    else:
        sampler = RandomSampler(
            dataset,  # type: ignore[arg-type]  # map-style datasets are Sized
            generator=torch.Generator().manual_seed(where.seed),
        )
    return DataLoader(
        dataset,
        batch_size=batch_size,
        sampler=sampler,
        num_workers=loader.num_workers,
        persistent_workers=loader.persistent_workers,
        prefetch_factor=loader.prefetch_factor,
        # Pinning is only meaningful for a copy to a GPU; on the CPU PyTorch warns and skips it.
        pin_memory=loader.pin_memory and where.device.type == "cuda",
        drop_last=loader.drop_last,
    )


class LoaderStream:
    """Batches from a DataLoader, epoch after epoch: a new iterator (and, without persistent
    workers, new worker processes) at each epoch end, as in training."""

    def __init__(self, loader: DataLoader[Any]) -> None:
        self.loader, self.epoch = loader, 0
        self.iterator: Any = None
        self.epoch_steps: int | None = len(loader)
        """Batches per epoch of this rank's share of the data."""
        workers = loader.num_workers
        self.stock = workers * (loader.prefetch_factor or 0) if workers else 0
        """Batches the workers can hold ready before they are asked (see loop.py)."""

    def next(self) -> Any:
        if self.iterator is None:
            self.iterator = iter(self.loader)
        try:
            return next(self.iterator)
        except StopIteration:
            self.epoch += 1
            if isinstance(self.loader.sampler, DistributedSampler):
                self.loader.sampler.set_epoch(self.epoch)
            self.iterator = iter(self.loader)
            try:
                return next(self.iterator)
            except StopIteration:
                raise RuntimeError(
                    f"the loader yields no batch: {len(self.loader.sampler)} samples per rank, "  # type: ignore[arg-type]
                    f"batch_size {self.loader.batch_size}, drop_last {self.loader.drop_last}"
                ) from None

    def ready(self) -> int | None:
        """Batches made and not yet taken: in the result queue, and received out of order
        (PyTorch keeps those in `_task_info`). With pin_memory the workers' results pass
        through a second queue, the pin thread's: both count. None where the iterator cannot
        say (no worker processes, or a queue without qsize(), as on macOS). Private attributes
        of torch.utils.data's _MultiProcessingDataLoaderIter: read defensively."""
        queue = getattr(self.iterator, "_data_queue", None)
        info = getattr(self.iterator, "_task_info", None)
        if queue is None or not isinstance(info, dict):
            return None
        queues = [queue]
        results = getattr(self.iterator, "_worker_result_queue", None)
        if results is not None and results is not queue:
            queues.append(results)  # pinned: the workers' queue feeds the pin thread's
        try:
            queued = sum(int(q.qsize()) for q in queues)
        except (NotImplementedError, OSError, AttributeError):
            return None
        return queued + sum(1 for entry in info.values() if len(entry) == 2)

    def close(self) -> None:
        # Dropping the last references shuts the worker processes down (persistent ones too).
        self.iterator = None
        self.loader = None  # type: ignore[assignment]
        gc.collect()


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


class CachedStage(Dataset[tuple[Any, int]]):
    """Serve one cached intermediate sample, finishing the pipeline from it at every item.

    `produce()` gives (cached value, target) once per process; `finish(value)` runs the
    stages that are not cached. The cached value is handed to `finish` as is, as the article
    does (001_*): a copy per item would charge a memcpy of the whole sample to the stages
    under test (seen: +15 ms per batch of 16 3×512² samples). A transform that works in place
    (001_*'s RandomMask does) therefore also changes the cache; that changes values, not the
    work done, and the ladder measures work.
    """

    def __init__(
        self,
        length: int,
        produce: Callable[[], tuple[Any, int]],
        finish: Callable[[Any], Any] | None,
    ) -> None:
        self.length, self.produce, self.finish = length, produce, finish
        self.cache: tuple[Any, int] | None = None

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> tuple[Any, int]:
        if self.cache is None:
            self.cache = self.produce()
        value, target = self.cache
        if self.finish is None:
            return value, target
        return self.finish(value), target


def sample_dataset(rung: str, dataset: Dataset[Any]) -> Dataset[Any]:
    """The dataset a sample-level rung reads from (the full dataset for `full`)."""
    if rung == "full":
        return dataset
    length = len(dataset)  # type: ignore[arg-type]
    if rung == "processed_sample":
        return CachedStage(length, lambda: dataset[0], None)
    if not isinstance(dataset, SplitDataset):
        raise RungUnavailable(
            f"rung {rung} needs a dataset with load_raw(index) and transform "
            f"(see README, 'Your own workload'); {type(dataset).__name__} has not"
        )
    transform = dataset.transform
    if rung == "raw_sample":
        return CachedStage(length, lambda: dataset.load_raw(0), transform)
    if rung == "raw_bytes":
        if not isinstance(dataset, BytesDataset):
            raise RungUnavailable(
                f"rung raw_bytes needs a file-backed dataset with read_bytes(index) and "
                f"decode(bytes); {type(dataset).__name__} has not"
            )

        def decode_and_transform(data: bytes) -> Any:
            raw = dataset.decode(data)
            return transform(raw) if transform is not None else raw

        return CachedStage(length, lambda: dataset.read_bytes(0), decode_and_transform)
    k = rung_names.transform_cut(rung)
    if k is not None:
        steps = getattr(transform, "transforms", None)
        if not isinstance(steps, list):
            raise RungUnavailable(
                f"rung {rung} needs a transform that is a torchvision Compose; "
                f"{type(dataset).__name__}.transform is {type(transform).__name__}"
            )
        if not 1 <= k < len(steps):
            raise RungUnavailable(
                f"rung {rung}: the Compose has {len(steps)} transforms, so k must be in "
                f"1..{len(steps) - 1} (k={len(steps)} is processed_sample)"
            )
        head, tail = _compose(steps[:k]), _compose(steps[k:])

        def produce_head() -> tuple[Any, int]:
            raw, target = dataset.load_raw(0)
            return head(raw), target

        return CachedStage(length, produce_head, tail)
    raise RungUnavailable(f"unknown rung {rung!r}")


def transform_names(dataset: Dataset[Any]) -> str:
    """The class names of the dataset's Compose steps, "" when it has no Compose."""
    steps = getattr(getattr(dataset, "transform", None), "transforms", None)
    if not isinstance(steps, list):
        return ""
    return ",".join(type(t).__name__ for t in steps)


def build_stream(
    rung: str,
    dataset: Dataset[Any],
    loader: LoaderSettings,
    batch_size: int,
    where: Placement,
) -> LoaderStream | RepeatStream:
    if rung in ("device_batch", "host_batch"):
        source = LoaderStream(make_loader(dataset, loader, batch_size, where))
        try:
            batch = source.next()
        finally:
            source.close()
        if rung == "device_batch":
            batch = [t.to(where.device) if isinstance(t, torch.Tensor) else t for t in batch]
        return RepeatStream(batch)
    return LoaderStream(make_loader(sample_dataset(rung, dataset), loader, batch_size, where))


def _compose(steps: list[Callable[[Any], Any]]) -> Callable[[Any], Any]:
    def run(x: Any) -> Any:
        for step in steps:
            x = step(x)
        return x

    return run
