"""How each rung of the caching ladder builds its stream of batches.

Every rung that still reads from a dataset goes through a DataLoader built from the point's
loader settings (workers, prefetch, pinning...), so that two rungs differ only in the stage
that is cached. The sample caches live in the dataset object and are filled lazily, once per
worker process, during warmup.
"""

from __future__ import annotations

import copy as copying
import dataclasses
import functools
import gc
import itertools
import logging
import operator
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch
from torch.utils.data import (
    DataLoader,
    Dataset,
    DistributedSampler,
    IterableDataset,
    RandomSampler,
    Sampler,
    Subset,
    default_collate,
    get_worker_info,
)

from harness.adapters import registry
from harness.execution import batches, worker_deaths
from harness.naming import type_name
from harness.sources.length import length
from harness.workloads.contract import BytesDataset, SplitDataset, SplitStream, WholeSampleDataset
from harness_schema import rungs as rung_names
from harness_schema.settings import LoaderSettings

log = logging.getLogger(__name__)


class RungUnavailable(Exception):
    """This dataset cannot serve this rung; the message says what it lacks."""


class LoaderTimeout(RuntimeError):
    """No batch came from the DataLoader's workers within `limits.batch_timeout_s`."""


TIMEOUT_SETTING = "limits.batch_timeout_s"
_TORCH_TIMEOUT = "DataLoader timed out after"
"""The start of the RuntimeError torch raises when `timeout` passes without a batch
(torch/utils/data/dataloader.py, _MultiProcessingDataLoaderIter._get_data)."""


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


class LoaderStream:
    """Batches from a DataLoader, epoch after epoch: a new iterator (and, without persistent
    workers, new worker processes) at each epoch end, as in training."""

    def __init__(self, loader: DataLoader[Any]) -> None:
        self.loader, self.epoch = loader, 0
        self.iterator: Any = None
        self.epoch_steps: int | None = length(loader)
        """Batches per epoch of this rank's share of the data; None for a stream that does not
        say (an IterableDataset without __len__): its epochs are counted when it ends."""
        workers = loader.num_workers
        self.stock = workers * (loader.prefetch_factor or 0) if workers else 0
        """Batches the workers can hold ready before they are asked (see loop.py)."""

    def next(self) -> Any:
        try:
            return worker_deaths.asked(self._next)
        except RuntimeError as e:
            if not is_timeout(e):
                raise
            # The stuck worker would outlive the rung (and, after a kill -9 of the harness,
            # the harness itself, reparented to init): end them all now.
            end_workers(self.iterator)
            raise timed_out(self.loader) from None

    def _next(self) -> Any:
        return next_across_epochs(self, _set_epoch, _no_batch)

    def idle_workers(self) -> int | None:
        """Workers of this loader that have delivered no batch so far (None without workers)."""
        tally = getattr(self.loader, "collate_fn", None)
        return tally.idle() if isinstance(tally, WorkerTally) else None

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


def is_timeout(e: BaseException) -> bool:
    """Whether `e` is torch's error for a DataLoader's `timeout` passed without a batch."""
    return isinstance(e, RuntimeError) and str(e).startswith(_TORCH_TIMEOUT)


def timed_out(loader: DataLoader[Any]) -> LoaderTimeout:
    """The rung's error where `loader`'s workers delivered no batch within its timeout."""
    return LoaderTimeout(
        f"no batch from the DataLoader for {loader.timeout:g} s: {_stuck_where(loader.dataset)} "
        f"{TIMEOUT_SETTING} in the spec sets the wait, 0 for none)"
    )


def _stuck_where(dataset: Any) -> str:
    """Where a worker that delivers nothing is stuck, as the dataset's kind says."""
    if isinstance(dataset, IterableDataset):
        # A stream whose iteration starts threads that hold locks (a streaming library's), read
        # in the process the workers forked from: they inherit the locks held, not the threads.
        return (
            f"a worker stuck in {type_name(dataset)}.__iter__? (a read that never returns, or a "
            "lock the stream's threads held when the workers were forked: a stream read in the "
            "parent process before the fork;"
        )
    return "a worker stuck in __getitem__? (a read that never returns;"


def end_workers(iterator: Any) -> None:
    """Shut a multi-process iterator's workers down, and kill those that do not stop: a
    worker blocked in __getitem__ ignores the polite request (torch's shutdown then sends
    SIGTERM, which a user's handler may catch). Private attributes of torch.utils.data's
    _MultiProcessingDataLoaderIter, read defensively."""
    shutdown = getattr(iterator, "_shutdown_workers", None)
    if callable(shutdown):
        shutdown()
    for worker in getattr(iterator, "_workers", None) or ():
        if worker.is_alive():
            worker.kill()
            worker.join(timeout=5)


def kill_workers(iterator: Any) -> None:
    """SIGKILL a multi-process iterator's live workers, for a rung that has failed: nothing they
    hold is wanted. Its shutdown then finds them gone (`end_workers` asks them first)."""
    for worker in getattr(iterator, "_workers", None) or ():
        if worker.is_alive():
            worker.kill()
            worker.join(timeout=5)


def next_across_epochs(stream: Any, announce: Callable[[Any, int], None], empty: Callable[[Any], str]) -> Any:
    """The next batch of `stream.loader`, epoch after epoch, as a training loop takes them:
    each epoch announced to the loader's parts (`announce(loader, epoch)`) before its iter(),
    the first (0) too, as `for epoch in range(n): sampler.set_epoch(epoch)` does: a part whose
    own count does not start at 0 (a streaming library's starts at 1) would otherwise be
    told 1 at the second epoch and read the first's order again. An iterator that yields
    nothing even after a restart raises RuntimeError(`empty(loader)`). `stream` keeps `loader`,
    `iterator` and `epoch` (LoaderStream, given_loader.IterStream)."""
    if stream.iterator is None:
        announce(stream.loader, stream.epoch)
        stream.iterator = iter(stream.loader)
    try:
        return next(stream.iterator)
    except StopIteration:
        stream.epoch += 1
        announce(stream.loader, stream.epoch)
        stream.iterator = iter(stream.loader)
        try:
            return next(stream.iterator)
        except StopIteration:
            raise RuntimeError(empty(stream.loader)) from None


def _no_batch(loader: DataLoader[Any]) -> str:
    """Why an epoch ended before its first batch, in the words of what the user can change."""
    if isinstance(loader.dataset, IterableDataset):
        return (
            f"the stream yields no batch: {type_name(loader.dataset)} ended before a first batch "
            f"(batch_size {loader.batch_size}, drop_last {loader.drop_last}) on this rank; a stream "
            "sharded between ranks and workers needs at least one sample per reader"
        )
    if loader.batch_size is None:  # a user's batch sampler
        return (
            f"the loader yields no batch: the batch sampler gave no batch for {len(loader.dataset)} samples"  # type: ignore[arg-type]
        )
    return (
        f"the loader yields no batch: {len(loader.sampler)} samples per rank, "  # type: ignore[arg-type]
        f"batch_size {loader.batch_size}, drop_last {loader.drop_last}"
    )


def _set_epoch(loader: DataLoader[Any], epoch: int) -> None:
    """Tell the samplers a new epoch starts, as a training loop does (DistributedSampler
    reshuffles only then): the loader's sampler, its batch sampler and the sampler that one
    wraps, and a stream that reshuffles by epoch (a library's stream of shards), each once,
    wherever they have `set_epoch`."""
    stream = loader.dataset if isinstance(loader.dataset, IterableDataset) else None
    found = (loader.sampler, loader.batch_sampler, getattr(loader.batch_sampler, "sampler", None), stream)
    done: list[int] = []
    for sampler in found:
        set_epoch = getattr(sampler, "set_epoch", None)
        if callable(set_epoch) and id(sampler) not in done:
            done.append(id(sampler))
            set_epoch(epoch)


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


class CachedStage(Dataset[Any]):
    """Serve one cached intermediate sample, finishing the pipeline from it at every item.

    `produce()` gives the cached value once per process; `finish(value)` runs the stages that
    are not cached and returns the sample (None: the value is the sample).

    The value is served as `distinct` objects in turn (copies made once, with the value, in
    the process that produced it: inside the warmup, never in a measured window), so that the
    samples of one batch are distinct objects, as a real read makes them. Served as one object,
    a batch of 8 held 8 references to one sample, and a collate that keeps per-sample tensors
    (torchvision's detection recipe: `tuple(zip(*batch))`) sent that sample between processes
    once where training sends it 8 times: the rung read collation and worker IPC too low (367
    batches/s against 21), and the stage below was charged with the difference (issue 41).
    No copy is made per item either: that would charge a memcpy of the whole sample to the
    stages under test (seen: +15 ms per batch of 16 3×512² samples). A transform that works in
    place (the article's RandomMask does) changes a copy each time; that changes values, not
    the work done, and the ladder measures work.
    """

    def __init__(
        self,
        length: int,
        produce: Callable[[], Any],
        finish: Callable[[Any], Any] | None,
        distinct: int = 1,
    ) -> None:
        self.length, self.produce, self.finish = length, produce, finish
        self.distinct = max(1, distinct)
        # Filled in the process that serves (a spawned worker gets a pickled copy of the stage
        # before anything is produced): the value and its copies, and the items served.
        self.values: list[Any] = []
        self.served = 0
        self.value_bytes = torch.full((1,), -1, dtype=torch.int64).share_memory_()
        """Bytes of the cached value (the caching what-if's size a sample), written by the
        process that produced it, a worker included (shared memory); -1 until then, or where
        it has no size. Sized where it is made, so the harness never reads the user's dataset
        in the rank's own process between rungs: state a read opens there (an HDF5 or LMDB
        handle, a library's threads) would be inherited by the next rung's forked workers."""

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> Any:
        if not self.values:
            self.values = _produced(self.produce, self.distinct, self.value_bytes)
        value = self.values[self.served % len(self.values)]
        self.served += 1
        return value if self.finish is None else self.finish(value)


class CachedStream(IterableDataset[Any]):
    """CachedStage for a stream: each reader (a worker, or the rank without workers) produces
    its value from its own share of the stream, then yields finish(value) endlessly, its
    `distinct` copies in turn (CachedStage says why). Endless, as a cached rung of a stream
    never ends an epoch, where `full` may (the row's epoch_restarts says so). The reader that
    made the value sizes it, as CachedStage does (`value_bytes`, shared memory): the what-if of
    a stream that has a length."""

    def __init__(
        self, produce: Callable[[], Any], finish: Callable[[Any], Any] | None, distinct: int = 1
    ) -> None:
        self.produce, self.finish = produce, finish
        self.distinct = max(1, distinct)
        self.value_bytes = torch.full((1,), -1, dtype=torch.int64).share_memory_()

    def __iter__(self) -> Iterator[Any]:
        values = _produced(self.produce, self.distinct, self.value_bytes)
        for served in itertools.count():
            value = values[served % len(values)]
            yield value if self.finish is None else self.finish(value)


def _produced(produce: Callable[[], Any], distinct: int, value_bytes: torch.Tensor) -> list[Any]:
    """A cached stage's value made in this process, sized into the stage's shared `value_bytes`
    (-1 where it has no size), and served as `distinct` objects: the one step CachedStage and
    CachedStream share."""
    value = produce()
    size = batches.nbytes(value)
    value_bytes[0] = -1 if size is None else size
    return distinct_copies(value, distinct)


def distinct_copies(value: Any, n: int) -> list[Any]:
    """`value` and n - 1 deep copies of it; the value alone where it cannot be copied (a
    sample holding a lock or a file handle), which the rung then serves as one object."""
    copies = [value]
    try:
        copies += [copying.deepcopy(value) for _ in range(n - 1)]
    except Exception as e:  # deepcopy raises whatever a __deepcopy__ or __reduce__ raises
        log.warning("the cached sample cannot be copied (%s): a batch holds it %d times", e, n)
        return [value]
    return copies


@dataclass(frozen=True, slots=True)
class _Cut:
    """A dataset's pipeline as the sample-level rungs cut it: `load()` the raw sample (of
    index 0, or the first of the stream), `transform(raw)` into the sample, its Compose steps
    (None without a Compose), and, file-backed, `read()` the bytes and `decode(bytes)`."""

    load: Callable[[], Any]
    transform: Callable[[Any], Any] | None
    steps: list[Callable[[Any], Any]] | None
    read: Callable[[], Any] | None
    decode: Callable[[Any], Any] | None


def sample_dataset(rung: str, dataset: Dataset[Any], distinct: int = 1) -> Dataset[Any]:
    """The dataset a sample-level rung reads from (the full dataset for `full`); a cached
    stage serves its value as `distinct` objects in turn (the batch size: CachedStage)."""
    if rung == "full":
        return dataset
    if isinstance(dataset, IterableDataset):
        stream = dataset

        def stage(produce: Callable[[], Any], finish: Callable[[Any], Any] | None) -> Dataset[Any]:
            return CachedStream(produce, finish, distinct)

        if rung == "processed_sample":
            return stage(functools.partial(_first_of, stream), None)
    else:
        length = len(dataset)  # type: ignore[arg-type]

        def stage(produce: Callable[[], Any], finish: Callable[[Any], Any] | None) -> Dataset[Any]:
            return CachedStage(length, produce, finish, distinct)

        if rung == "processed_sample":
            return stage(functools.partial(operator.getitem, dataset, 0), None)
    dataset = _selected(dataset)
    cut = _cut(rung, dataset)
    if rung == "raw_sample":
        return stage(cut.load, cut.transform)
    if rung == "raw_bytes":
        if cut.read is None or cut.decode is None:
            raise RungUnavailable(
                f"rung raw_bytes needs a file-backed dataset with read_bytes(index) and "
                f"decode(bytes), map-style; {type_name(dataset)} has not"
            )
        decode, transform = cut.decode, cut.transform
        return stage(cut.read, decode if transform is None else _Chain(decode, transform))
    k = rung_names.transform_cut(rung)
    if k is None:
        raise RungUnavailable(f"unknown rung {rung!r}")
    return stage(*_transform_cut(rung, k, cut, dataset))


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


def _selected(dataset: Any) -> Any:
    """The data set a Subset selects from (random_split's, as DataModules split off
    their validation set): a cached stage serves one sample at every index, so which indices
    the Subset holds does not matter, and its data set's load_raw and transform are the cut."""
    while isinstance(dataset, Subset):
        dataset = dataset.dataset
    return dataset


def _cut(rung: str, dataset: Any) -> _Cut:
    """How this dataset splits loading from transforming (contract.py), or RungUnavailable."""
    name = type_name(dataset)
    if isinstance(dataset, IterableDataset):
        if not isinstance(dataset, SplitStream):
            raise RungUnavailable(
                f"rung {rung} needs a stream with iter_raw() and transform_sample(raw) (see "
                f"docs/guides/own-workload.md); {name} has not"
            )
        steps = _compose_steps(dataset.transform_sample)
        return _Cut(functools.partial(_first_raw, dataset), dataset.transform_sample, steps, None, None)
    # a library's data set read as it is (an adapter's `samples`: a stock ImageFolder...)
    dataset = registry.first(lambda adapter: adapter.samples(dataset)) or dataset
    read = getattr(dataset, "read_bytes", None)
    decode = getattr(dataset, "decode", None)
    if isinstance(dataset, WholeSampleDataset):
        steps = _compose_steps(dataset.transform_sample)
        return _Cut(
            functools.partial(dataset.load_raw, 0),
            dataset.transform_sample,
            steps,
            read and functools.partial(read, 0),
            decode,
        )
    if isinstance(dataset, SplitDataset):
        transform = dataset.transform
        inner = _compose_steps(transform)
        return _Cut(
            functools.partial(dataset.load_raw, 0),
            None if transform is None else _OnInput(transform),
            None if inner is None else [_OnInput(step) for step in inner],
            None if not isinstance(dataset, BytesDataset) else functools.partial(dataset.read_bytes, 0),
            None if decode is None else _OnInput(decode),
        )
    raise RungUnavailable(
        f"rung {rung} needs a dataset with load_raw(index) and transform, or load_raw(index) and "
        f"transform_sample(raw) (see docs/guides/own-workload.md); {name} has not"
    )


def _transform_cut(
    rung: str, k: int, cut: _Cut, dataset: Any
) -> tuple[Callable[[], Any], Callable[[Any], Any]]:
    steps = cut.steps
    if steps is None:
        transform = getattr(dataset, "transform_sample", getattr(dataset, "transform", None))
        raise RungUnavailable(
            f"rung {rung} needs a transform that is a torchvision Compose; "
            f"{type_name(dataset)}'s is {type_name(transform)}"
        )
    if not 1 <= k < len(steps):
        raise RungUnavailable(
            f"rung {rung}: the Compose has {len(steps)} transforms, so k must be in "
            f"1..{len(steps) - 1} (k={len(steps)} is processed_sample)"
        )
    return _Chain(cut.load, _Compose(steps[:k])), _Compose(steps[k:])


# The cached stages' parts are module-level functions, partials and small classes, never
# lambdas or closures: a DataLoader whose workers are spawned (a script's
# multiprocessing_context="spawn", and every DataLoader from Python 3.14 on, whose default start
# method on Linux is forkserver) pickles its dataset to each worker, and a closure cannot be
# pickled ("Can't pickle local object 'sample_dataset.<locals>.<lambda>'").


def _first(iterator: Iterator[Any] | Iterable[Any], stream: Any) -> Any:
    for item in iterator:
        return item
    raise RuntimeError(f"the stream {type_name(stream)} yields no sample in this reader (rank or worker)")


def _first_of(stream: Any) -> Any:
    """The stream's first sample in this reader (processed_sample of a stream)."""
    return _first(iter(stream), stream)


def _first_raw(split: Any) -> Any:
    """The stream's first raw sample in this reader (its iter_raw)."""
    return _first(split.iter_raw(), split)


class _OnInput:
    """A transform of the input applied to an (input, target) pair."""

    def __init__(self, transform: Callable[[Any], Any]) -> None:
        self.transform = transform

    def __call__(self, pair: Any) -> Any:
        value, target = pair
        return self.transform(value), target


class _Chain:
    """then(first(...)): a stage's producer after a cut (first takes no argument there) or its
    finisher after the decode (first takes the bytes)."""

    def __init__(self, first: Callable[..., Any], then: Callable[[Any], Any]) -> None:
        self.first, self.then = first, then

    def __call__(self, *value: Any) -> Any:
        return self.then(self.first(*value))


class _Compose:
    """Compose steps applied in turn (a slice of the dataset's Compose)."""

    def __init__(self, steps: list[Callable[[Any], Any]]) -> None:
        self.steps = steps

    def __call__(self, x: Any) -> Any:
        for step in self.steps:
            x = step(x)
        return x


def _compose_steps(transform: Any) -> list[Callable[[Any], Any]] | None:
    """A Compose's steps (its `.transforms`, a list), else those an adapter finds in a
    transform of its library's (a recipe's preset holding its Compose one level down)."""
    steps = getattr(transform, "transforms", None)
    if isinstance(steps, list):
        return steps
    if transform is None:
        return None
    return registry.first(lambda adapter: adapter.steps(transform))


def transform_names(dataset: Dataset[Any]) -> str:
    """The class names of the dataset's Compose steps (transform_sample's, else transform's),
    "" when it has no Compose."""
    steps = _compose_steps(getattr(dataset, "transform_sample", None)) or _compose_steps(
        getattr(dataset, "transform", None)
    )
    return ",".join(type(t).__name__ for t in steps or [])


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
    parts: LoaderParts = LoaderParts(),  # frozen, so one shared default is safe
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
