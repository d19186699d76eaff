"""What a dataset offers so the caching ladder can cut its pipeline.

A dataset is map-style (`__getitem__`, `__len__`) or a `torch.utils.data.IterableDataset` (a
stream). Any of them, with samples of any structure, gets device_batch, host_batch (its first
batch), processed_sample (its first sample) and full. A dataset that splits loading from
transforming lets the ladder cache a raw sample (and time the transforms), in one of two forms:

- the (input, target) form, `SplitDataset`: `load_raw(i) -> (raw, target)` and `transform` on
  the input only; with `read_bytes`/`decode` (`BytesDataset`) the stored bytes too;
- the whole-sample form, for paired transforms (an image and its mask) and dict samples:
  `load_raw(i) -> raw sample` and `transform_sample(raw sample) -> sample`
  (`WholeSampleDataset`); with `read_bytes(i) -> bytes` and `decode(bytes) -> raw sample`, the
  stored bytes too. A stream offers it as `iter_raw()` and `transform_sample` (`SplitStream`).

Where `transform` or `transform_sample` is a Compose (`.transforms`, a list), the
`transform:<k>` rungs cut it after its k-th step.

A library's own data set is read in one of these forms as it is, by its adapter (the
`samples` answer of harness/adapters/): the user adds nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Protocol, TypeVar, runtime_checkable

import torch
from torch.utils.data import Dataset

T = TypeVar("T")


@runtime_checkable
class SplitDataset(Protocol):
    """`self[i] == (transform(load_raw(i)[0]), load_raw(i)[1])`, up to randomness."""

    transform: Callable[[Any], Any] | None

    def __len__(self) -> int: ...

    def load_raw(self, index: int) -> tuple[Any, int]: ...


@runtime_checkable
class BytesDataset(SplitDataset, Protocol):
    """File-backed: `load_raw(i) == (decode(read_bytes(i)[0]), read_bytes(i)[1])`."""

    def read_bytes(self, index: int) -> tuple[bytes, int]: ...

    def decode(self, data: bytes) -> Any: ...


@runtime_checkable
class WholeSampleDataset(Protocol):
    """`self[i] == transform_sample(load_raw(i))`, up to randomness."""

    def __len__(self) -> int: ...

    def load_raw(self, index: int) -> Any: ...

    def transform_sample(self, raw: Any) -> Any: ...


@runtime_checkable
class SplitStream(Protocol):
    """A stream whose `iter(self)` yields `transform_sample(raw)` for each raw of `iter_raw()`."""

    def iter_raw(self) -> Iterator[Any]: ...

    def transform_sample(self, raw: Any) -> Any: ...


class UnreadableSample(Exception):
    """A sample of a file-backed data set that could not be read or decoded, naming its file:
    PIL's own words name a stream of bytes (`cannot identify image file <_io.BytesIO ...>`)."""


def sample_read(index: int, where: Callable[[], str], read: Callable[[], T]) -> T:
    """`read()`, whose failure is raised again as UnreadableSample naming `where()`, the data
    set's file for sample `index`."""
    try:
        return read()
    except Exception as e:
        raise UnreadableSample(f"cannot read sample {index} ({where()}): {type(e).__name__}: {e}") from e


class PipelineDataset(Dataset[tuple[Any, int]]):
    """Base for the built-in datasets: `__getitem__` is load_raw then transform."""

    transform: Callable[[Any], Any] | None = None
    num_classes: int = 10

    def load_raw(self, index: int) -> tuple[Any, int]:
        raise NotImplementedError

    def __getitem__(self, index: int) -> tuple[Any, int]:
        raw, target = self.load_raw(index)
        if self.transform is not None:
            raw = self.transform(raw)
        return raw, target


class Normalization:
    """uint8 images -> float, scaled to [0, 1] and normalised per channel, on the device."""

    def __init__(self, mean: tuple[float, ...], std: tuple[float, ...]) -> None:
        if len(mean) != len(std) or not all(s > 0 for s in std):
            raise ValueError(f"mean and std must have the same length and std > 0 (got {mean}, {std})")
        self.mean = torch.tensor(mean).view(1, -1, 1, 1)
        self.std = torch.tensor(std).view(1, -1, 1, 1)

    def on(self, device: torch.device) -> Normalization:
        moved = Normalization.__new__(Normalization)
        moved.mean, moved.std = self.mean.to(device), self.std.to(device)
        return moved

    def __call__(self, images: torch.Tensor) -> torch.Tensor:
        if images.dtype != torch.uint8:
            raise TypeError(f"gpu_normalize expects uint8 batches from the loader, got {images.dtype}")
        return (images.float().div_(255) - self.mean) / self.std
