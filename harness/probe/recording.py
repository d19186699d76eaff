"""Loader recording in the script's process: the point's DataLoader built from what the script
handed to `probe.loader` (its record, harness/sources/recorded.py) with the point's settings in
place of the script's, the length it announces to the loop (`loop_length`), and the record
found again on the loader `measure` gets (or on a library's re-made one of it)."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from dataclasses import replace
from typing import Any

import torch
from torch.utils.data import BatchSampler, DataLoader

from harness.adapters import registry as adapters
from harness.config.plan import Point, resolve_loader
from harness.execution import dataloader, given_loader
from harness.execution.loader_record import overlay
from harness.execution.loop_length import batches_per_loop
from harness.execution.probe_job import ProbeJob
from harness.naming import type_name
from harness.probe.handshake import done, report_settings
from harness.sources.length import length
from harness.sources.recorded import Recorded, record
from harness.workloads.loader_factory import train_loader
from harness_schema.settings import LOADER_COLUMNS, LoaderSettings, values

log = logging.getLogger("harness.probe")  # the probe's one logger, as a script's logging names it

_PROBE = "_harness_probe"
"""The attribute of a loader made by `loader()` under the harness: what the script gave."""


def point_loader(
    job: ProbeJob, dataset: Any, batch_size: int | None, kwargs: dict[str, Any], non_blocking: bool | None
) -> DataLoader[Any]:
    """`probe.loader` under the harness: the script's arguments recorded, the DataLoader built
    with the point's settings in place of theirs, and its len() the probe's (`loop_length`)."""
    recorded = record(dataset, batch_size, kwargs)
    point = effective_point(job, recorded, non_blocking)
    where = dataloader.Placement(
        device=torch.device("cuda" if torch.cuda.is_available() else "cpu"),
        rank=job.env.rank,
        world_size=job.env.world_size,
    )
    built = dataloader.make_loader(
        dataset,
        point.loader,
        batch_size_of(point, recorded),
        where,
        recorded.parts,
        timeout_s=point.limits.batch_timeout_s,
    )
    report_settings(job, point)
    setattr(built, _PROBE, recorded)
    announced = loop_length(batches_per_loop(point, done(job)), length(built))
    built.__class__ = _Announced
    built._harness_length = announced
    if built.batch_sampler is not None:
        # DataLoader refuses a new batch_sampler once built (its __setattr__): the wrapper
        # yields the same batches, so the loader is the same loader.
        wrapped = _AnnouncedBatches(built.batch_sampler, announced * job.env.world_size, recorded)
        object.__setattr__(built, "batch_sampler", wrapped)
    return built


def loop_length(announced: int, epoch: int | None) -> int:
    """What `len()` of the probe's loader says: the script's own epoch (`epoch`, the loader's
    len() with the point's settings) or the batches the probe yields to the loop (`announced`),
    whichever is more.

    The contract with a script's arithmetic on len(loader), at any window: the loop never
    receives more batches than len() said, so a schedule sized by it
    (`OneCycleLR(total_steps=len(loader) * epochs)`, `steps_per_epoch=len(loader)`) never steps
    past its end; and len() is never less than the epoch the script would see alone, so
    "every len(loader) // 10 batches" is as safe as without the harness. The price: where the
    epoch is the longer, the loop ends (the point measured) before its "last batch of the
    epoch", and the validation there does not run, as it would not inside a measured window.
    The yielded count alone broke a print frequency of `len // 10` at a short window (the
    course's dlojz2_1.py: 9 batches, `(i + 1) % 0`); the epoch alone, a schedule at a long one.
    """
    return max(announced, epoch or 0)


class _Announced(DataLoader[Any]):
    """The point's DataLoader, whose length is the probe's (`loop_length`)."""

    def __len__(self) -> int:
        return int(self._harness_length)  # type: ignore[attr-defined]


class _AnnouncedBatches(BatchSampler):
    """The batch sampler of `probe.loader`'s loader: its batches as they are, with the script's
    record, and a len() of the batches the probe yields to each rank's loop times the ranks.

    Why: a library may re-make the loader around its batch sampler, in a shard of it whose
    len() is this one's divided by the ranks (this one itself on one rank): so `len()` of the
    prepared loader, which such scripts read after prepare to size their schedule and their
    `max_train_steps`, is the probe's number; and `measure` finds the record through it
    (probe_record) and measures the point as probe.loader's."""

    def __init__(self, inner: Iterable[list[int]], length: int, recorded: Recorded) -> None:
        # BatchSampler.__init__ would check a sampler and a batch size: this one delegates.
        self.inner = inner
        self.length = length
        self.sampler = getattr(inner, "sampler", None)  # type: ignore[assignment]
        self.batch_size = getattr(inner, "batch_size", None)  # type: ignore[assignment]  # a shard reads it
        self.drop_last = bool(getattr(inner, "drop_last", False))
        setattr(self, _PROBE, recorded)

    def __iter__(self) -> Iterator[list[int]]:
        return iter(self.inner)

    def __len__(self) -> int:
        return self.length


def probe_record(source: Any) -> Recorded | None:
    """What the script gave `probe.loader`, found on its loader, or on a loader a library
    re-made around that loader's batch sampler (its batch sampler a shard whose
    `batch_sampler` is ours); None for any other loader."""
    found = getattr(source, _PROBE, None)
    batches = getattr(source, "batch_sampler", None)
    for _ in range(3):  # the loader's batch sampler, and the one a shard of it wraps
        if found is not None or batches is None:
            break
        found = getattr(batches, _PROBE, None)
        batches = getattr(batches, "batch_sampler", None)
    return found if isinstance(found, Recorded) else None


def sharded_as_prepared(recorded: Recorded, source: Any) -> Recorded:
    """probe.loader's record, its own sampler or batch sampler sharded as the prepared loader
    shards it: each rung reads this rank's share of the batches.

    Why: a library that prepares a loader for several ranks may wrap its batch sampler in a
    shard of its own (each rank its own batches) whatever sampler the script gave, and a
    trainer built on it may give a sampler of its own and rely on that. The rungs rebuild the
    loader from the record, and a sampler of the script's is used as it is (LoaderParts: it
    shards itself), so every rank read the whole data set. Without a sampler of the script's,
    the rungs' own sampler is a DistributedSampler already: the record is left as it is, as on
    one rank. How the library shards is its adapter's (`sharding`)."""
    parts = recorded.parts
    if parts.sampler is None and parts.batch_sampler is None:
        return recorded
    shard = adapters.first(lambda adapter: adapter.sharding(source))
    if shard is None:
        return recorded
    sampler, batch_sampler = parts.sampler, parts.batch_sampler

    def sharded(dataset: Any, where: dataloader.Placement, batch_size: int, drop_last: bool) -> Any:
        if batch_sampler is not None:
            return shard(batch_sampler(dataset, where, batch_size, drop_last))
        assert sampler is not None
        return shard(BatchSampler(sampler(dataset, where), batch_size, drop_last))

    return replace(recorded, parts=replace(parts, sampler=None, batch_sampler=sharded))


def say_length(length: int | None, announced: int) -> None:
    """Where the loader's own len() is less than the batches the probe yields, say so: a
    schedule sized by it would step past its end (a len() of more is the contract, loop_length)."""
    if length is None:
        log.warning(
            "harness.probe: the loader has no len() (a stream); the probe yields %d batches to this "
            "loop, whatever number of batches the script expects an epoch to hold",
            announced,
        )
    elif length < announced:
        log.warning(
            "harness.probe: len(loader) says %d batches where the probe yields %d to this loop; "
            "build the loader with probe.loader(...) for len() to say so",
            length,
            announced,
        )


def given(source: Any, job: ProbeJob) -> given_loader.GivenLoader | None:
    """The script's loader measured as it is given (None for a plain DataLoader, whose parts the
    rungs rebuild with the point's settings): a DataLoader subclass (its constructor is its own,
    so the point's settings cannot be swapped in), a loader of threads or any iterable of
    batches, a holder of loaders an adapter opens (a DataModule's train_dataloader(), on several
    ranks with the sampler its trainer would give it)."""
    if type(source) is DataLoader:
        return None
    loader = train_loader(source, rank=job.env.rank, world_size=job.env.world_size)
    return given_loader.GivenLoader(
        loader=loader,
        name=type_name(loader),
        recorded=given_loader.own_settings(loader, LoaderSettings()),
    )


def effective_point(job: ProbeJob, recorded: Recorded, non_blocking: bool | None = None) -> Point:
    """The point as it runs: the batch size the spec gives, else the script's; the loader
    settings the spec names, and the script's own for the others (Point.script_keeps), with
    PyTorch's rules applied again. non_blocking, when the spec names none: `measure`'s
    argument, else whether the loader pins memory (as alone)."""
    point = job.point
    if point.workload.batch_size is None and recorded.batch_size is not None:
        # the script's own; where it says none (a batch sampler of its own without a
        # batch_size), None: the rows leave the cell empty as the log line says None
        point = replace(point, workload=replace(point.workload, batch_size=recorded.batch_size))
    keeps = [name for name in point.script_keeps if name in recorded.own.known or name == "non_blocking"]
    if not keeps:
        return point
    ran = overlay(recorded.own, point.loader, [name for name in LOADER_COLUMNS if name not in keeps])
    if "non_blocking" in keeps:
        ran = replace(ran, non_blocking=non_blocking if non_blocking is not None else ran.pin_memory)
    loader, adjustments = resolve_loader(values(ran.loader_settings()))
    return replace(point, loader=loader, adjustments=(*point.adjustments, *adjustments))


def batch_size_of(point: Any, recorded: Recorded) -> int:
    return int(point.workload.batch_size or recorded.batch_size or 1)
