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

A stock torchvision `DatasetFolder` (`ImageFolder`, `ImageNet`: their `__getitem__` is
`loader(path)` over `samples`, then `transform` and `target_transform`, all public) is read in
the (input, target) form as it is (`folder_split`), with the stored bytes too where its loader
is torchvision's PIL one: the user adds nothing. So are torchvision's data sets held in memory
(`CIFAR10`, the MNIST family, SVHN, STL10: `memory_split`), whose raw sample is the PIL image
their `__getitem__` makes of the array. So is a Hugging Face `datasets.Dataset` whose
format is a transform of the user's (`with_transform`/`set_transform`, on every column:
`hf_split`): its row as Python values (the Arrow read and the features' decoding: an `Image`
column's PIL image) is the raw sample, and the transform, on that row as a batch of one, is
`transform_sample`, as the formatter calls it.
"""

from __future__ import annotations

import copy
import io
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


def folder_split(dataset: Any) -> SplitDataset | None:
    """A stock torchvision DatasetFolder (ImageFolder, ImageNet...) in the (input, target) form;
    None for any other dataset, and for a subclass with its own `__getitem__` or `load_raw`
    (its own pipeline, which only it can say how to cut)."""
    try:
        from torchvision.datasets import folder
    except ImportError:  # no torchvision: no torchvision dataset either
        return None
    stock = folder.DatasetFolder
    if not isinstance(dataset, stock) or hasattr(dataset, "load_raw"):
        return None
    if type(dataset).__getitem__ is not stock.__getitem__:
        return None
    if dataset.loader in (folder.default_loader, folder.pil_loader) and _pil_backend():
        return _PilFolder(dataset)
    return _Folder(dataset)


IN_MEMORY = ("CIFAR10", "CIFAR100", "MNIST", "FashionMNIST", "KMNIST", "QMNIST", "EMNIST", "SVHN", "STL10")
"""torchvision's data sets held in memory as arrays: their `__getitem__` makes a PIL image of
the sample's array, then applies `transform` to it and `target_transform` to the target (the
datasets' own code, torchvision 0.29: cifar.py, mnist.py, svhn.py, stl10.py)."""


def memory_split(dataset: Any) -> SplitDataset | None:
    """A stock torchvision data set held in memory (IN_MEMORY: CIFAR10, the course labs' and the
    tutorials' data set) in the (input, target) form: its raw sample is what its own
    `__getitem__` gives without `transform` (the PIL image, the target mapped), and `transform`
    is its own. None for any other data set, and for a subclass with its own `__getitem__` or
    `load_raw` (only it can say how to cut its pipeline)."""
    try:
        from torchvision import datasets
    except ImportError:  # no torchvision: no torchvision data set either
        return None
    stock: tuple[type, ...] = tuple(getattr(datasets, name) for name in IN_MEMORY if hasattr(datasets, name))
    if hasattr(dataset, "load_raw") or not isinstance(dataset, stock):
        return None
    own = getattr(type(dataset), "__getitem__", None)
    if own not in {getattr(kind, "__getitem__", None) for kind in stock}:
        return None
    return _InMemory(dataset)


def hf_split(dataset: Any) -> WholeSampleDataset | None:
    """A Hugging Face `datasets.Dataset` formatted by a transform of the user's
    (`with_transform(f)`, `set_transform(f)`), in the whole-sample form; None for any other
    dataset, and where the transform is given columns (the format then mixes formatted and
    plain columns). Told without importing `datasets`: by the format it carries."""
    if hasattr(dataset, "load_raw") or not callable(getattr(dataset, "with_format", None)):
        return None
    if (
        getattr(dataset, "_format_type", None) != "custom"
        or getattr(dataset, "_format_columns", 0) is not None
    ):
        return None
    transform = getattr(dataset, "_format_kwargs", {}).get("transform")
    return _HFTransformed(dataset, transform) if callable(transform) else None


class _HFTransformed:
    """`Dataset.__getitem__` under a custom format, split: the row the Python formatter gives
    (`with_format(None)`), then the transform on it as a batch of one, its first row taken
    (datasets' CustomFormatter.format_row)."""

    def __init__(self, dataset: Any, transform: Callable[[dict[str, list[Any]]], Any]) -> None:
        self.plain = dataset.with_format(None)
        self.transform = transform

    def __len__(self) -> int:
        return len(self.plain)

    def load_raw(self, index: int) -> Any:
        return self.plain[index]

    def transform_sample(self, raw: dict[str, Any]) -> dict[str, Any]:
        batch = self.transform({key: [value] for key, value in raw.items()})
        return {key: values[0] for key, values in batch.items()}


def _pil_backend() -> bool:
    from torchvision import get_image_backend

    return bool(get_image_backend() == "PIL")


class _Folder:
    """DatasetFolder.__getitem__, split: `load_raw` reads with the folder's own loader (and
    maps the target), `transform` is the folder's."""

    def __init__(self, folder: Any) -> None:
        self.folder = folder
        self.transform: Callable[[Any], Any] | None = folder.transform

    def __len__(self) -> int:
        return len(self.folder)

    def _target(self, index: int) -> tuple[Any, Any]:
        path, target = self.folder.samples[index]
        if self.folder.target_transform is not None:
            target = self.folder.target_transform(target)
        return path, target

    def load_raw(self, index: int) -> tuple[Any, Any]:
        path, target = self._target(index)
        return sample_read(index, lambda: str(path), lambda: self.folder.loader(path)), target


class _InMemory:
    """An IN_MEMORY data set's `__getitem__`, split: `load_raw` is its own `__getitem__` on a
    shallow copy without `transform` (the arrays shared, not copied), `transform` is its own."""

    def __init__(self, dataset: Any) -> None:
        self.raw = copy.copy(dataset)
        self.raw.transform = None
        self.transform: Callable[[Any], Any] | None = dataset.transform

    def __len__(self) -> int:
        return len(self.raw)

    def load_raw(self, index: int) -> tuple[Any, Any]:
        image, target = self.raw[index]
        return image, target


class _PilFolder(_Folder):
    """With torchvision's PIL loader (ImageFolder's default): the file's bytes, then the decode
    `pil_loader` does (Image.open, convert("RGB"))."""

    def read_bytes(self, index: int) -> tuple[bytes, Any]:
        path, target = self._target(index)

        def read() -> bytes:
            with open(path, "rb") as f:
                return f.read()

        return sample_read(index, lambda: str(path), read), target

    def decode(self, data: bytes) -> Any:
        from PIL import Image

        return Image.open(io.BytesIO(data)).convert("RGB")


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
