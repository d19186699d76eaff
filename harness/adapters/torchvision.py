"""torchvision: its data sets read in the (input, target) form as they are, and the recipes'
presets whose Compose sits one level down.

- A stock `DatasetFolder` (`ImageFolder`, `ImageNet`: their `__getitem__` is `loader(path)`
  over `samples`, then `transform` and `target_transform`, all public), with the stored bytes
  too where its loader is torchvision's PIL one: the user adds nothing.
- Its data sets held in memory (IN_MEMORY: `CIFAR10`, the MNIST family, SVHN, STL10), whose raw
  sample is the PIL image their `__getitem__` makes of the array.
- The reference recipes' `presets.ClassificationPresetTrain` (and its siblings: vision's
  references/classification, detection, segmentation, video), copied beside each training
  script as `presets.py`: a callable whose `__call__` is `self.transforms(x)`, a Compose. Its
  steps are that Compose's, so the `transform:<k>` rungs cut it as they cut a Compose.

A subclass with its own `__getitem__` or `load_raw` is not read this way: its own pipeline,
which only it can say how to cut.
"""

from __future__ import annotations

import copy
import io
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from harness.adapters.base import NoAnswer, module_of

if TYPE_CHECKING:
    from harness.workloads.contract import SplitDataset

IN_MEMORY = ("CIFAR10", "CIFAR100", "MNIST", "FashionMNIST", "KMNIST", "QMNIST", "EMNIST", "SVHN", "STL10")
"""torchvision's data sets held in memory as arrays: their `__getitem__` makes a PIL image of
the sample's array, then applies `transform` to it and `target_transform` to the target (the
datasets' own code, torchvision 0.29: cifar.py, mnist.py, svhn.py, stl10.py)."""

PRESETS_MODULE = "presets"
"""The module the recipes' presets live in (vision's references/*/presets.py, copied as is)."""


class TorchVision(NoAnswer):
    name = "torchvision"

    def recognises(self, thing: Any) -> bool:
        return module_of(thing) == "torchvision" or _preset_compose(thing) is not None

    def samples(self, dataset: Any) -> SplitDataset | None:
        return folder_split(dataset) or memory_split(dataset)

    def steps(self, transform: Any) -> list[Callable[[Any], Any]] | None:
        compose = _preset_compose(transform)
        return None if compose is None else compose.transforms


def _preset_compose(transform: Any) -> Any | None:
    """The Compose of a recipe's preset (its `.transforms`, whose own `.transforms` is the list
    of steps), else None."""
    if type(transform).__module__.rpartition(".")[2] != PRESETS_MODULE:
        return None
    compose = getattr(transform, "transforms", None)
    return compose if isinstance(getattr(compose, "transforms", None), list) else None


def folder_split(dataset: Any) -> SplitDataset | None:
    """A stock torchvision DatasetFolder (ImageFolder, ImageNet...) in the (input, target) form;
    None for any other dataset, and for a subclass with its own `__getitem__` or `load_raw`."""
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


def memory_split(dataset: Any) -> SplitDataset | None:
    """A stock torchvision data set held in memory (IN_MEMORY: CIFAR10, the course labs' and the
    tutorials' data set) in the (input, target) form: its raw sample is what its own
    `__getitem__` gives without `transform` (the PIL image, the target mapped), and `transform`
    is its own. None for any other data set, and for a subclass with its own `__getitem__` or
    `load_raw`."""
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
        from harness.workloads.contract import sample_read

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
        from harness.workloads.contract import sample_read

        path, target = self._target(index)

        def read() -> bytes:
            with open(path, "rb") as f:
                return f.read()

        return sample_read(index, lambda: str(path), read), target

    def decode(self, data: bytes) -> Any:
        from PIL import Image

        return Image.open(io.BytesIO(data)).convert("RGB")
