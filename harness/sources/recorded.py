"""A loader a script handed to `probe.loader` (or built itself), recorded as the point's rungs
rebuild it (`Recorded`): its dataset, its collate_fn, sampler or batch sampler and other
arguments, and its own values of the settings and batch size (a LoaderRecord); its source is a
BuiltSource with the point's settings in place of the script's (those the spec names)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from torch.utils.data import DataLoader, IterableDataset, RandomSampler, SequentialSampler

from harness.config.plan import Point
from harness.execution import dataloader, given_loader
from harness.execution.loader_record import LoaderRecord, of_attributes, of_values
from harness.naming import type_name
from harness.sources.built import BuiltSource
from harness.workloads.loader_factory import LOADER_SETTINGS

_PARTS_ARGUMENTS = ("collate_fn", "sampler", "batch_sampler")


@dataclass(frozen=True, kw_only=True, slots=True)
class Recorded:
    """What the script handed to `probe.loader`, as the point's rungs rebuild it."""

    dataset: Any
    parts: dataloader.LoaderParts
    own: LoaderRecord
    """The script's own values of the DataLoader's settings (those it gave, or its DataLoader
    has) and its batch size: the point replaces those its spec names and keeps the others
    (Point.script_keeps); its batch size is the point's where the spec gives none."""

    @property
    def batch_size(self) -> int | None:
        """The script's batch size (None where a batch sampler of its own says none)."""
        return self.own.batch_size

    def source(self, point: Point, where: dataloader.Placement) -> BuiltSource:
        """The recorded loader rebuilt for each rung with the point's settings and batch size."""
        return BuiltSource(
            dataset=self.dataset,
            settings=point.loader,
            batch_size=point.workload.batch_size,
            where=where,
            parts=self.parts,
            timeout_s=point.limits.batch_timeout_s,
        )


def from_given(given: given_loader.GivenLoader) -> Recorded:
    """A given loader as the probe records it: its own batch size (None where it does not say),
    none of its settings (they are measured as given, not replaced: GivenLoader.recorded)."""
    return Recorded(
        dataset=given.dataset,
        parts=dataloader.LoaderParts(),
        own=of_values({"batch_size": given.recorded.batch_size}),
    )


def record(dataset: Any, batch_size: int | None, kwargs: dict[str, Any]) -> Recorded:
    """The script's DataLoader arguments split into LoaderParts and the settings the point
    replaces (DataLoader's own rule: a batch_sampler comes without batch_size)."""
    sampler, batch_sampler = kwargs.get("sampler"), kwargs.get("batch_sampler")
    if kwargs.get("shuffle") and (sampler is not None or batch_sampler is not None):
        raise ValueError("DataLoader: shuffle=True cannot go with a sampler or a batch_sampler")
    parts = dataloader.LoaderParts(
        collate_fn=kwargs.get("collate_fn"),
        sampler=(lambda _dataset, _where: sampler) if sampler is not None else None,
        batch_sampler=(lambda _d, _w, _b, _l: batch_sampler) if batch_sampler is not None else None,
        extra={k: v for k, v in kwargs.items() if k not in (*_PARTS_ARGUMENTS, *LOADER_SETTINGS, "shuffle")},
    )
    said = given_loader.said_batch_size(batch_sampler) if batch_sampler is not None else batch_size
    return Recorded(
        dataset=dataset,
        parts=parts,
        own=of_values({**{k: kwargs[k] for k in LOADER_SETTINGS if k in kwargs}, "batch_size": said}),
    )


def from_dataloader(source: Any) -> Recorded:
    """A DataLoader the script built itself: its dataset, batch size, collate_fn, worker_init_fn
    and its own sampler (not the default one that shuffle made) are what the rungs rebuild."""
    if not isinstance(source, DataLoader):
        raise TypeError(
            f"harness.probe.measure needs the script's DataLoader (made by probe.loader or "
            f"torch's DataLoader) under the harness; got {type_name(source)}"
        )
    # A stream (IterableDataset) takes no sampler: the one DataLoader gives it is PyTorch's
    # internal _InfiniteConstantSampler, not the script's.
    own_sampler = not isinstance(source.dataset, IterableDataset) and not isinstance(
        source.sampler, (RandomSampler, SequentialSampler)
    )
    kwargs: dict[str, Any] = {"collate_fn": source.collate_fn, "worker_init_fn": source.worker_init_fn}
    kwargs.update(of_attributes(source, LOADER_SETTINGS).values())
    if own_sampler and source.batch_size is not None:
        kwargs["sampler"] = source.sampler
    if source.batch_size is None:
        kwargs["batch_sampler"] = source.batch_sampler
    return record(source.dataset, source.batch_size, kwargs)
