"""A point's loader source on this rank: the loader a factory gave (GivenSource), else the
DataLoader built from the workload's dataset and parts (BuiltSource)."""

from __future__ import annotations

from typing import Any

from harness.config.plan import Point
from harness.execution import dataloader, given_loader
from harness.sources.base import LoaderSource
from harness.sources.built import BuiltSource
from harness.sources.given import GivenSource


def of_point(
    point: Point,
    where: dataloader.Placement,
    *,
    dataset: Any = None,
    parts: dataloader.LoaderParts | None = None,
    given: given_loader.GivenLoader | None = None,
) -> LoaderSource:
    """The source the runner reads each rung from, with the point's settings, batch size and
    batch timeout, at this rank's place."""
    batch_size, timeout_s = point.workload.batch_size, point.limits.batch_timeout_s
    if given is not None:
        return GivenSource(given=given, batch_size=batch_size, where=where, timeout_s=timeout_s)
    return BuiltSource(
        dataset=dataset,
        settings=point.loader,
        batch_size=batch_size,
        where=where,
        parts=parts or dataloader.LoaderParts(),
        timeout_s=timeout_s,
    )
