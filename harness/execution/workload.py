"""A point's workload assembled in one place, from what harness/workloads/build.py builds:
`build_workload` (the dataset, or a `workload.loader` factory's loader, and the train step)
and `loader_parts` (the user's collate, sampler or batch sampler for every rung's DataLoader)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from harness.config.plan import Point, WorkloadSettings
from harness.execution import dataloader, given_loader
from harness.execution.train_step import StepParts, TrainStep, own_loss
from harness.workloads import registry
from harness.workloads.build import build_callable, build_dataset, build_model, pipeline_factory
from harness.workloads.registry import WorkloadError
from harness_schema.settings import MODEL_LOSS


def build_workload(
    point: Point,
    device: torch.device,
    *,
    distributed: bool = False,
    where: dataloader.Placement | None = None,
) -> tuple[Any, TrainStep]:
    """The point's dataset (with workload.loader: the factory's loader, a GivenLoader) and its
    train step (model, loss or the user's step, optimizer, precision, copy, sample count).
    `where` is this rank's place: a dataset or loader factory that asks for it gets it."""
    w = point.workload
    where = where or dataloader.Placement(device=device)
    place = {"batch_size": w.batch_size, "rank": where.rank, "world_size": where.world_size}
    dataset = None if w.dataset is None else build_dataset(w, place)
    source = dataset if w.loader is None else given_loader.from_factory(point, where, dataset)
    if isinstance(source, given_loader.GivenLoader):
        dataset = dataset if dataset is not None else source.dataset
    normalize = dataset.to_uint8() if w.gpu_normalize else None  # type: ignore[attr-defined]
    model = build_model(w, int(getattr(dataset, "num_classes", 10)))
    parts = StepParts(
        loss=own_loss if w.loss == MODEL_LOSS else build_callable(w, "loss", "loss_fn(output, batch)"),
        step=pipeline_factory(w, "step"),
        count=pipeline_factory(w, "batch_samples"),
        names={name: getattr(w, name) for name in registry.PIPELINE_FIELDS if getattr(w, name) is not None},
    )
    step = TrainStep(
        model,
        device,
        non_blocking=point.loader.non_blocking,
        amp=w.amp,
        compile=w.compile,
        distributed=distributed,
        channels_last=w.channels_last,
        set_to_none=w.zero_grad_set_to_none,
        normalize=normalize,
        parts=parts,
    )
    return source, step


def loader_parts(w: WorkloadSettings) -> dataloader.LoaderParts:
    """The user's collate, sampler or batch sampler of the point, for every rung's DataLoader.
    A sampler gets this rank's place (rank, world_size, seed) and must shard itself."""
    sampler, batch_sampler = _named(w, "sampler"), _named(w, "batch_sampler")
    return dataloader.LoaderParts(
        collate_fn=build_callable(w, "collate", "collate_fn(list of samples)"),
        sampler=None
        if sampler is None
        else lambda data, where: sampler(data, rank=where.rank, world_size=where.world_size, seed=where.seed),
        batch_sampler=None
        if batch_sampler is None
        else lambda data, where, size, drop: batch_sampler(
            data,
            batch_size=size,
            drop_last=drop,
            rank=where.rank,
            world_size=where.world_size,
            seed=where.seed,
        ),
    )


def _named(w: WorkloadSettings, field: str) -> Callable[..., Any] | None:
    """workload.<field>'s factory, whose failure names it (the rung's failed row says which)."""
    factory = pipeline_factory(w, field)
    if factory is None:
        return None
    made = factory

    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return made(*args, **kwargs)
        except Exception as e:
            raise WorkloadError(f"{field} {getattr(w, field)!r} failed: {type(e).__name__}: {e}") from e

    return call
