"""Turn a point's workload settings into a dataset and a model."""

from __future__ import annotations

from typing import Any

from torch import nn
from torch.utils.data import Dataset

from harness.config.plan import WorkloadSettings
from harness.workloads import registry


class WorkloadError(RuntimeError):
    """The dataset or model factory failed; the message names which and why."""


def build_dataset(settings: WorkloadSettings) -> Dataset[Any]:
    factory = registry.resolve(settings.dataset, registry.DATASETS, "dataset")
    try:
        dataset = factory(**settings.dataset_args)
    except Exception as e:
        raise WorkloadError(f"dataset {settings.dataset!r} failed to build: {type(e).__name__}: {e}") from e
    if not hasattr(dataset, "__getitem__") or not hasattr(dataset, "__len__"):
        raise WorkloadError(
            f"dataset {settings.dataset!r} returned {type(dataset).__name__}, "
            "not a map-style dataset (__getitem__ and __len__)"
        )
    if len(dataset) == 0:
        raise WorkloadError(f"dataset {settings.dataset!r} is empty")
    return dataset


def build_model(settings: WorkloadSettings, num_classes: int) -> nn.Module:
    factory = registry.resolve(settings.model, registry.MODELS, "model")
    args = {"num_classes": num_classes, **settings.model_args}
    try:
        model = factory(**args)
    except Exception as e:
        raise WorkloadError(f"model {settings.model!r} failed to build: {type(e).__name__}: {e}") from e
    if not isinstance(model, nn.Module):
        raise WorkloadError(
            f"model {settings.model!r} returned {type(model).__name__}, not a torch.nn.Module"
        )
    return model
