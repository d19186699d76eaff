"""The adapters, in the order the core asks them: the first answer that is not None is taken
(base.py says why). Adding a library is one file in this package and one line here."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from harness.adapters import (
    accelerate,
    hf_datasets,
    lightning,
    litdata,
    mosaic,
    timm,
    torchdata_nodes,
    torchvision,
    transformers,
    webdataset,
)
from harness.adapters.base import Adapter

T = TypeVar("T")

ADAPTERS: list[Adapter] = [
    timm.Timm(),
    webdataset.WebDataset(),
    lightning.Lightning(),
    accelerate.Accelerate(),
    transformers.Transformers(),
    torchvision.TorchVision(),
    hf_datasets.HFDatasets(),
    litdata.LitData(),
    mosaic.Mosaic(),
    torchdata_nodes.TorchdataNodes(),
]


def first(ask: Callable[[Adapter], T | None]) -> T | None:
    """The first adapter's answer to `ask` that is not None; None where none answers."""
    for adapter in ADAPTERS:
        answer = ask(adapter)
        if answer is not None:
            return answer
    return None


def every(ask: Callable[[Adapter], T | None]) -> list[T]:
    """Every adapter's answer to `ask` that is not None, in the registry's order."""
    return [answer for adapter in ADAPTERS if (answer := ask(adapter)) is not None]


def owner(thing: Any) -> Adapter | None:
    """The adapter that recognises `thing` (a loader, a data set), else None."""
    return next((adapter for adapter in ADAPTERS if adapter.recognises(thing)), None)
