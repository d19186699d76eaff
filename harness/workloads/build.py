"""Turn a point's workload settings into a dataset, a model and the parts of a user's pipeline
(collate, sampler or batch sampler, loss or step, sample count), each built from its factory
as registry.PIPELINE_CALLS says it is called; and the point's workload assembled from them, in
one place (`build_workload`: the dataset and the train step; `loader_parts`: what every rung's
DataLoader gets)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import nn
from torch.utils.data import Dataset, IterableDataset

from harness.config.plan import Point, WorkloadSettings
from harness.execution import given_loader, ladder
from harness.execution.train_step import StepParts, TrainStep
from harness.naming import type_name
from harness.workloads import loader_factory, registry
from harness.workloads.registry import WorkloadError
from harness_schema.settings import MODEL_LOSS


def build_dataset(settings: WorkloadSettings, place: Mapping[str, Any] | None = None) -> Dataset[Any]:
    """The point's dataset. `place` (batch_size, rank, world_size: the point's and this rank's)
    goes to a factory whose signature names them (loader_factory.DATASET_PLACE): a streaming
    library's data set takes batch_size, a stream sharding by rank its rank and world size."""
    factory = registry.resolve(settings.dataset, registry.DATASETS, "dataset")
    asked = {k: v for k, v in (place or {}).items() if k in loader_factory.dataset_place(factory)}
    try:
        dataset = factory(**asked, **settings.dataset_args)
    except Exception as e:
        raise WorkloadError(f"dataset {settings.dataset!r} failed to build: {type(e).__name__}: {e}") from e
    if isinstance(dataset, IterableDataset):
        return dataset  # a stream: no length to check, its end is found by reading it
    if not hasattr(dataset, "__getitem__") or not hasattr(dataset, "__len__"):
        raise WorkloadError(
            f"dataset {settings.dataset!r} returned {type_name(dataset)}, which is neither "
            "map-style (__getitem__ and __len__) nor a torch.utils.data.IterableDataset (a stream: "
            "subclass it, with __iter__)"
        )
    if len(dataset) == 0:
        raise WorkloadError(f"dataset {settings.dataset!r} is empty")
    return dataset


def build_model(settings: WorkloadSettings, num_classes: int) -> nn.Module:
    """The model; `num_classes` (the dataset's, else 10) only if the factory accepts it."""
    factory = registry.resolve(settings.model, registry.MODELS, "model")
    args = dict(settings.model_args)
    if registry.accepts(factory, "num_classes"):
        args.setdefault("num_classes", num_classes)
    try:
        model = factory(**args)
    except Exception as e:
        raise WorkloadError(f"model {settings.model!r} failed to build: {type(e).__name__}: {e}") from e
    if not isinstance(model, nn.Module):
        raise WorkloadError(f"model {settings.model!r} returned {type_name(model)}, not a torch.nn.Module")
    return model


def pipeline_factory(settings: WorkloadSettings, field: str) -> Callable[..., Any] | None:
    """workload.<field>'s factory with the spec's `<field>_args` bound (None when not given):
    the harness calls it with what registry.PIPELINE_CALLS lists."""
    name = getattr(settings, field)
    if name is None:
        return None
    if field == "loss" and name == MODEL_LOSS:
        from harness.execution.train_step import own_loss

        return lambda: own_loss
    factory = registry.resolve(name, {}, field)
    args = {} if field == "batch_samples" else dict(getattr(settings, f"{field}_args"))
    return functools.partial(factory, **args) if args else factory


def build_callable(settings: WorkloadSettings, field: str, what: str, *args: Any, **kwargs: Any) -> Any:
    """Call workload.<field>'s factory; what it returns must be callable (`what` says as what)."""
    factory = pipeline_factory(settings, field)
    if factory is None:
        return None
    name = getattr(settings, field)
    try:
        made = factory(*args, **kwargs)
    except Exception as e:
        raise WorkloadError(f"{field} {name!r} failed to build: {type(e).__name__}: {e}") from e
    if not callable(made):
        raise WorkloadError(f"{field} {name!r} returned {type_name(made)}, not a callable {what}")
    return made


def build_workload(
    point: Point, device: torch.device, *, distributed: bool = False, where: ladder.Placement | None = None
) -> tuple[Any, TrainStep]:
    """The point's dataset (with workload.loader: the factory's loader, a GivenLoader) and its
    train step (model, loss or the user's step, optimizer, precision, copy, sample count).
    `where` is this rank's place: a dataset or loader factory that asks for it gets it."""
    w = point.workload
    where = where or ladder.Placement(device=device)
    place = {"batch_size": w.batch_size, "rank": where.rank, "world_size": where.world_size}
    dataset = None if w.dataset is None else build_dataset(w, place)
    source = dataset if w.loader is None else given_loader.from_factory(point, where, dataset)
    if isinstance(source, given_loader.GivenLoader):
        dataset = dataset if dataset is not None else source.dataset
    normalize = dataset.to_uint8() if w.gpu_normalize else None  # type: ignore[attr-defined]
    model = build_model(w, int(getattr(dataset, "num_classes", 10)))
    parts = StepParts(
        loss=build_callable(w, "loss", "loss_fn(output, batch)"),
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


def loader_parts(w: WorkloadSettings) -> ladder.LoaderParts:
    """The user's collate, sampler or batch sampler of the point, for every rung's DataLoader.
    A sampler gets this rank's place (rank, world_size, seed) and must shard itself."""
    sampler, batch_sampler = _named(w, "sampler"), _named(w, "batch_sampler")
    return ladder.LoaderParts(
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
