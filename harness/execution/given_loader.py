"""The rungs of a loader the harness did not build: the one a `workload.loader` factory made
(harness/workloads/loader_factory.py), or, under `harness.probe`, a script's loader measured as
it is given (a DataLoader subclass whose constructor is its own, a loader of threads that is
no DataLoader, what a library's holder of loaders gives: harness/adapters/ knows each).

- `device_batch`, `host_batch`: the loader's first batch, repeated (on the device, on the host).
- `full`: the loader itself, epoch after epoch (a new `iter()` at each end, as in training).
- the sample-level rungs: only where the loader exposes a map-style dataset (`.dataset`, as a
  torch DataLoader does); they read a cached stage of it through a plain DataLoader with the
  loader's collate_fn and settings (dataloader.make_loader). Otherwise RungUnavailable, saying what
  the loader lacks: the harness cannot cut a pipeline it cannot see into.
"""

from __future__ import annotations

import copy
import dataclasses
import gc
import logging
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from torch.utils.data import DataLoader, IterableDataset

from harness.adapters import registry as adapters
from harness.adapters.base import size
from harness.config.plan import Point
from harness.execution import dataloader, ladder, loader_stream, sample_cache, splits, worker_deaths
from harness.execution.loader_record import LoaderRecord, of_attributes, overlay
from harness.naming import type_name
from harness.sources.length import length
from harness.workloads import loader_factory, registry
from harness.workloads.loader_factory import LOADER_SETTINGS
from harness_schema.settings import LoaderSettings

log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True, slots=True)
class GivenLoader:
    """A loader measured as it is: what yields the batches, how messages name it, and the
    settings its rows record (`recorded`: the point's where they were applied; the loader's own
    where it reports them; unknown, None, where neither is known)."""

    loader: Iterable[Any]
    name: str
    recorded: LoaderRecord
    whole_on: int = 0
    """The ranks that each read the whole data set (a factory that takes neither rank nor
    world_size, its DataLoader's sampler plain: nothing splits it); 0 where it is split or
    nothing says it is not."""

    @property
    def dataset(self) -> Any:
        """The map-style dataset the loader exposes (`.dataset`), else None."""
        found = getattr(self.loader, "dataset", None)
        if found is None or isinstance(found, IterableDataset):
            return None
        if not (hasattr(found, "__getitem__") and hasattr(found, "__len__")):
            return None
        return found


def loader_given(loader: Any, *, whole_on: int = 0) -> str:
    """The rows' `loader_given` for a loader measured as given: its class, where the harness
    re-made it (an adapter's `described`: a sampler put in it on several ranks), and where
    each of `whole_on` ranks read the whole data set."""
    name = type_name(loader)
    done = adapters.first(lambda adapter: adapter.described(loader))
    if done is not None:
        name += f", {done}"
    if whole_on > 1:
        name += f", not split by rank: each of {whole_on} ranks read the whole data set"
    return name


def reported(loader: Any, point: LoaderSettings, applied: Iterable[str]) -> LoaderRecord:
    """The settings a given loader's rows record: the point's for those `applied` to it (passed
    to its factory) and non_blocking (the copy's, which the harness makes), the loader's own
    attribute for the others (a DataLoader has them all), unknown (None) where the loader says
    nothing: never a value that was not applied."""
    own = of_attributes(loader, LOADER_SETTINGS, inner=wrapped_dataloader(loader))
    return overlay(own, point, (*applied, "non_blocking"))


def wrapped_dataloader(loader: Any) -> DataLoader[Any] | None:
    """The torch DataLoader a loader of its own wraps, else None: its settings are the
    wrapper's. Which attribute holds it is the library's: its adapter says (`dataloader`)."""
    if isinstance(loader, DataLoader):
        return None
    inner = adapters.first(lambda adapter: adapter.dataloader(loader))
    return inner if isinstance(inner, DataLoader) else None


def batch_size(loader: Any) -> int | None:
    """The batch size of a loader measured as given, as it says it: its own (or its batch
    sampler's); where it wraps a DataLoader, the batch size its own stages re-batch with (an
    adapter's `batch_size`), else its DataLoader's, else the one the pipeline its DataLoader
    reads batches with (the workers make the batches, and the DataLoader's batch_size is
    None). None where nothing says a number."""
    inner = wrapped_dataloader(loader)
    if inner is None:
        return said_batch_size(loader)
    inside = getattr(inner, "dataset", None)
    for found in (
        lambda: said_batch_size(loader),
        lambda: adapters.first(lambda adapter: adapter.batch_size(loader)),
        lambda: said_batch_size(inner),
        lambda: adapters.first(lambda adapter: adapter.batch_size(inside)),
    ):
        size = found()
        if size is not None:
            return size
    return None


def said_batch_size(loader: Any) -> int | None:
    """A loader's batch size (or a batch sampler's): its own `batch_size`, else its batch
    sampler's (a DataLoader given a batch_sampler, or re-made by a library around its batch
    sampler, says None: the batch sampler knows); None where neither says a number (a batch
    sampler of variable sizes)."""
    for holder in (loader, getattr(loader, "batch_sampler", None)):
        found = size(getattr(holder, "batch_size", None))
        if found is not None:
            return found
    return None


def in_threads(loader: Any) -> bool:
    """Whether a given loader works in threads of the rank's process: its adapter's answer
    (`in_threads`), else any loader that is not a DataLoader (it has no workers of torch's)."""
    said = adapters.first(lambda adapter: adapter.in_threads(loader))
    return said if said is not None else not isinstance(loader, DataLoader)


def own_settings(loader: Any, point: LoaderSettings) -> LoaderRecord:
    """A loader's own settings and batch size, as far as it says them (a loader measured as
    given by the probe: none of the point's is applied to it but non_blocking)."""
    own = reported(loader, point, ())
    said = batch_size(loader)
    if said is None:
        return own
    return dataclasses.replace(own, batch_size=said, known=own.known | {"batch_size"})


def _own_set_epoch(loader: Any, epoch: int) -> None:
    """A loader of its own is told the epoch where it takes one."""
    set_epoch = getattr(loader, "set_epoch", None)
    if callable(set_epoch):
        set_epoch(epoch)


class IterStream:
    """Batches from any iterable, epoch after epoch: a new iter() at each end."""

    def __init__(self, loader: Iterable[Any], stock: int = 0, inner: DataLoader[Any] | None = None) -> None:
        self.loader = loader
        self.iterator: Iterator[Any] | None = None
        self.epoch = 0
        self.epoch_steps: int | None = length(loader)
        self.stock = stock
        """Batches the loader may hold ready (its prefetch, where the point set it)."""
        self.inner = inner
        """The DataLoader the loader wraps (wrapped_dataloader), whose timeout bounds its wait."""

    def next(self) -> Any:
        try:
            return worker_deaths.asked(
                lambda: loader_stream.next_across_epochs(
                    self, _own_set_epoch, lambda loader: f"the loader {type_name(loader)} yields no batch"
                )
            )
        except RuntimeError as e:
            if self.inner is None or not loader_stream.is_timeout(e):
                raise
            # The wrapper's iterator holds its DataLoader's: closing it shuts the stuck workers
            # down (torch's shutdown terminates those that do not stop).
            close = getattr(self.iterator, "close", None)
            if callable(close):
                close()
            self.close()
            raise loader_stream.timed_out(self.inner) from None

    def ready(self) -> int | None:
        return None  # a loader of its own: its queues are not ours to read

    def close(self) -> None:
        self.iterator = None
        gc.collect()  # a thread-based loader's threads stop when its iterator goes


def loop_stream(given: GivenLoader, timeout_s: float = 0) -> loader_stream.LoaderStream | IterStream:
    """The loader itself, epoch after epoch. A DataLoader (of any class) goes through
    loader_stream.LoaderStream (its workers' stock, its timeout); any other iterable through IterStream.
    A DataLoader with workers and no timeout of its own gets `timeout_s` (limits.batch_timeout_s):
    a worker stuck in `__getitem__` is then a LoaderTimeout within it, as in the harness's own
    loaders, not a wait to the point's limit (an hour inline). The timeout changes no batch."""
    if isinstance(given.loader, DataLoader):
        _bound(given.loader, timeout_s)
        return loader_stream.LoaderStream(given.loader)  # its close() drops the stream's hold only
    settings = given.recorded
    inner = wrapped_dataloader(given.loader)
    if inner is not None:  # a wrapper's DataLoader (an adapter's `dataloader`)
        _bound(inner, timeout_s)
    return IterStream(given.loader, stock=settings.prefetch_factor or 0, inner=inner)


def _bound(loader: DataLoader[Any], timeout_s: float) -> None:
    """`timeout_s` as the wait for each batch of a DataLoader with workers and no timeout of
    its own."""
    if loader.num_workers > 0 and not loader.timeout and timeout_s > 0:
        loader.timeout = timeout_s


def build_stream(
    rung: str,
    given: GivenLoader,
    batch_size: int,
    where: dataloader.Placement,
    *,
    timeout_s: float = 0,
) -> loader_stream.LoaderStream | ladder.RepeatStream | IterStream:
    """The rung's stream from a given loader (the module's docstring says which rung reads what)."""
    if rung in ("device_batch", "host_batch"):
        return ladder.cached_batch(loop_stream(given, timeout_s), rung, where)
    if rung == "full":
        return loop_stream(given, timeout_s)
    dataset = given.dataset
    if dataset is None:
        raise sample_cache.RungUnavailable(_no_samples(rung, given))
    settings = _known(given.recorded.loader_settings())
    inner = wrapped_dataloader(given.loader)
    holder = inner if inner is not None else given.loader
    parts = dataloader.LoaderParts(collate_fn=getattr(holder, "collate_fn", None), extra=_extra(holder))
    staged = dataloader.make_loader(
        sample_cache.sample_dataset(rung, dataset, batch_size or 1),
        settings,
        batch_size,
        where,
        parts,
        timeout_s=timeout_s,
    )
    if inner is None:
        return loader_stream.LoaderStream(staged)
    # The wrapper's own per-batch work (to the device, uint8 to float, normalised...) on
    # the cached stage's batches: without it the step would get batches of another kind.
    rewrapped = copy.copy(given.loader)
    rewrapped.loader = staged  # type: ignore[attr-defined]
    return IterStream(rewrapped, stock=settings.prefetch_factor or 0)


def _no_samples(rung: str, given: GivenLoader) -> str:
    """Why a sample-level rung cannot be read from a given loader: it exposes no dataset, or
    its DataLoader reads a stream (an IterableDataset: a pipeline of tar shards, batched in the
    workers as OpenCLIP does), whose samples cannot be taken by index to be cached."""
    whole = "the harness cannot cut its pipeline (device_batch, host_batch and full measure it whole)"
    inner = wrapped_dataloader(given.loader)
    stream = getattr(inner if inner is not None else given.loader, "dataset", None)
    if isinstance(stream, IterableDataset):
        reader = given.name if inner is None else f"{given.name}'s DataLoader"
        return (
            f"rung {rung} needs a map-style dataset, whose samples it caches by index; {reader} reads "
            f"a stream ({type_name(stream)}, an IterableDataset): {whole}"
        )
    return (
        f"rung {rung} needs the loader's map-style dataset (.dataset, as a torch DataLoader has); "
        f"{given.name} exposes none: {whole}"
    )


def _known(recorded: LoaderSettings) -> LoaderSettings:
    """The settings a plain DataLoader can be built with: PyTorch's defaults where unknown."""
    defaults = LoaderSettings()
    values = {name: getattr(defaults, name) for name in LOADER_SETTINGS if getattr(recorded, name) is None}
    if recorded.num_workers and recorded.prefetch_factor is None:
        values["prefetch_factor"] = 2
    known = dataclasses.replace(recorded, **values)
    if not known.num_workers:
        known = dataclasses.replace(known, prefetch_factor=None, persistent_workers=False)
    return known


KEPT_ARGUMENTS: Mapping[str, Any] = {
    "worker_init_fn": None,
    "multiprocessing_context": None,
    "in_order": True,
}
"""A DataLoader's other arguments (with PyTorch's defaults) that the sample-level rungs' loader
keeps: what each worker is set up with (worker_init_fn), how the workers start
(multiprocessing_context: a spawned worker pays its start-up and holds a pickled copy of the
dataset, a forked one neither), and the order the batches are delivered in (in_order=False
lets a fast batch pass a slow one).
A rung that lost them would measure another pipeline than the loader its neighbours time:
a script that spawns its workers (a dataset holding a handle that cannot be forked) would
have them forked, and the drop between rungs would carry the difference."""


def _extra(loader: Any) -> Mapping[str, Any]:
    """The KEPT_ARGUMENTS a loader sets away from PyTorch's defaults."""
    kept = {name: getattr(loader, name, default) for name, default in KEPT_ARGUMENTS.items()}
    return {name: value for name, value in kept.items() if value is not KEPT_ARGUMENTS[name]}


def from_factory(point: Point, where: dataloader.Placement, dataset: Any) -> GivenLoader:
    """workload.loader's loader for this rank: its factory called with the point's values it
    accepts (loader_factory.call), the settings it did not take recorded as the loader says."""
    w = point.workload
    assert w.loader is not None
    factory = registry.resolve(w.loader, {}, "loader")
    values: dict[str, Any] = {
        "batch_size": w.batch_size,
        "rank": where.rank,
        "world_size": where.world_size,
        "seed": where.seed,
        **{name: getattr(point.loader, name) for name in LOADER_SETTINGS},
    }
    if dataset is not None:
        values["dataset"] = dataset
    made = loader_factory.call(factory, w.loader, w.loader_args, values)
    applied = [name for name in LOADER_SETTINGS if name in loader_factory.passed(factory)]
    return GivenLoader(
        loader=made,
        name=f"{w.loader}'s {type_name(made)}",
        recorded=reported(made, point.loader, applied),
        whole_on=_whole_on(w.loader, factory, made, where.world_size),
    )


def _whole_on(name: str, factory: Any, loader: Any, world_size: int) -> int:
    """The ranks that each read the whole data set (GivenLoader.whole_on), said in the log as
    `harness plan` said it before the run (loader_factory.ranks_note)."""
    passed = loader_factory.passed(factory)
    if world_size <= 1 or "rank" in passed or "world_size" in passed or not splits.unsplit(loader):
        return 0
    log.warning(
        "%s's %s on %d ranks: its factory takes neither rank nor world_size and its sampler (%s) "
        "does not split by rank, so each rank reads the whole data set, an epoch %d times the "
        "training's; accept rank and world_size and split by them, or return a DataModule",
        name,
        type_name(loader),
        world_size,
        type_name(loader.sampler),
        world_size,
    )
    return world_size
