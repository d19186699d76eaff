"""Turn a point's workload settings into a dataset, a model and the parts of a user's pipeline
(collate, sampler or batch sampler, loss or step, sample count), each built from its factory
as registry.PIPELINE_CALLS says it is called. The point's workload is assembled from them in
harness/execution/workload.py (`loss: model`, the output's own loss, is the train step's)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

from torch import nn
from torch.utils.data import Dataset, IterableDataset

from harness.naming import type_name
from harness.workloads import loader_factory, registry
from harness.workloads.registry import WorkloadError
from harness_schema.settings import WorkloadSettings


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
    the harness calls it with what registry.PIPELINE_CALLS lists. (`loss: model` names no
    factory: harness/execution/workload.py gives the train step the output's own loss.)"""
    name = getattr(settings, field)
    if name is None:
        return None
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
