"""The sample-level rungs' cached stages: a dataset's pipeline cut where a rung caches it (the raw
sample, its bytes, after k transforms of its Compose, the processed sample), the value made once
per reader and served at every index (CachedStage, CachedStream).

A concept apart from the ladder (ladder.py), which picks a rung's stream: this is how a user's
dataset is cut, against harness/workloads/contract.py, map-style or a stream. The sample
caches live in the dataset object and are filled lazily, once per worker process, during warmup.
"""

from __future__ import annotations

import copy as copying
import functools
import itertools
import logging
import operator
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils.data import (
    Dataset,
    IterableDataset,
    Subset,
)

from harness.adapters import registry
from harness.execution import batches
from harness.naming import type_name
from harness.workloads.contract import BytesDataset, SplitDataset, SplitStream, WholeSampleDataset
from harness_schema import rungs as rung_names

log = logging.getLogger(__name__)


class RungUnavailable(Exception):
    """This dataset cannot serve this rung; the message says what it lacks."""


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
