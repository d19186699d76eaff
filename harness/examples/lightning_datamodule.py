"""A Lightning `LightningDataModule`, measured through `workload.loader` (an example of a user's
pipeline, written as Lightning's documentation writes one).

- `ImagesDataModule` is a real `lightning.LightningDataModule`: `prepare_data()` (where a
  download would go: nothing here, the images are synthetic), `setup("fit")` builds the data set
  and splits off a validation share with `random_split` (so `train_dataloader()`'s dataset is a
  `torch.utils.data.Subset`, as in Lightning's MNIST example), `train_dataloader()` returns a
  torch DataLoader with the module's settings.
- `make_loader` is the loader factory: the harness calls it with the point's `batch_size` and
  loader settings; it returns the DataModule, and the harness calls `prepare_data()`,
  `setup("fit")` and `train_dataloader()` as Lightning's Trainer would.
- Ranks: `train_dataloader()` says `shuffle=True` and no sampler, as a DataModule for
  Lightning does: on several ranks the Trainer (`use_distributed_sampler=True`, its default)
  re-makes the loader with a `DistributedSampler`, and so does the harness
  (harness/adapters/lightning.py), each rank reading its share.
- The data are `size` seeded random images: `load_raw(i)` is the read (`read_ms` of sleep, a
  stand-in for storage), `transform` the augmentations (`transform_ms` of sleep, then to float).
  The data set offers the harness's split contract (`load_raw`, `transform`), so the ladder cuts
  between reading and transforming even through the `Subset`.

```yaml
workload:
  loader: harness.examples.lightning_datamodule:make_loader
  loader_args: {read_ms: [0, 20]}
  model: emulated
  model_args: {step_ms: 50}
  batch_size: 16
loader: {num_workers: [0, 2]}
```
"""

from __future__ import annotations

import time
from typing import Any

import lightning
import torch
from torch.utils.data import DataLoader, Dataset, random_split

__all__ = ["ImagesDataModule", "SlowImages", "make_loader"]


class SlowImages(Dataset[tuple[torch.Tensor, int]]):
    """`size` seeded uint8 images of `shape` (label: the index modulo `num_classes`), each read
    with `read_ms` of sleep and transformed with `transform_ms` of sleep."""

    def __init__(
        self,
        size: int,
        shape: tuple[int, ...],
        *,
        read_ms: float = 0.0,
        transform_ms: float = 0.0,
        num_classes: int = 10,
    ) -> None:
        if size < 1:
            raise ValueError(f"size must be >= 1 (got {size})")
        self.size, self.shape, self.num_classes = size, tuple(shape), num_classes
        self.read_s, self.transform_s = read_ms / 1000, transform_ms / 1000

    def __len__(self) -> int:
        return self.size

    def load_raw(self, index: int) -> tuple[torch.Tensor, int]:
        """The stored sample: what reading gives, before any transform."""
        if self.read_s:
            time.sleep(self.read_s)
        generator = torch.Generator().manual_seed(index)
        image = torch.randint(0, 256, self.shape, generator=generator, dtype=torch.uint8)
        return image, index % self.num_classes

    def transform(self, image: torch.Tensor) -> torch.Tensor:
        """The augmentations: a flip and a conversion to float in [0, 1]."""
        if self.transform_s:
            time.sleep(self.transform_s)
        return image.flip(-1).float().div_(255)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        image, label = self.load_raw(index)
        return self.transform(image), label


class ImagesDataModule(lightning.LightningDataModule):
    """Train and validation splits of SlowImages, with the DataLoader settings it is given."""

    def __init__(
        self,
        *,
        batch_size: int = 32,
        num_workers: int = 0,
        pin_memory: bool = False,
        persistent_workers: bool = False,
        prefetch_factor: int | None = None,
        drop_last: bool = False,
        seed: int = 0,
        size: int = 320,
        shape: tuple[int, ...] | list[int] = (3, 16, 16),
        val_fraction: float = 0.2,
        read_ms: float = 0.0,
        transform_ms: float = 0.0,
    ) -> None:
        super().__init__()
        self.save_hyperparameters()  # Lightning's way: the arguments kept in self.hparams
        self.train_set: Dataset[Any] | None = None
        self.val_set: Dataset[Any] | None = None
        self.prepared = False

    def prepare_data(self) -> None:
        # Where a download would go (Lightning calls it once per node). Safe to call on every rank.
        self.prepared = True

    def setup(self, stage: str | None = None) -> None:
        h: Any = self.hparams  # an AttributeDict (typed as a mapping)
        if stage in ("fit", None) and self.train_set is None:
            full = SlowImages(h.size, tuple(h.shape), read_ms=h.read_ms, transform_ms=h.transform_ms)
            val = int(len(full) * h.val_fraction)
            split = torch.Generator().manual_seed(h.seed)
            self.train_set, self.val_set = random_split(full, [len(full) - val, val], generator=split)

    def train_dataloader(self) -> DataLoader[Any]:
        h: Any = self.hparams  # an AttributeDict (typed as a mapping)
        assert self.train_set is not None, "setup('fit') first"
        # No sampler: on several ranks the Trainer (and the harness) puts a DistributedSampler in.
        return DataLoader(
            self.train_set,
            batch_size=h.batch_size,
            shuffle=True,
            num_workers=h.num_workers,
            pin_memory=h.pin_memory,
            persistent_workers=h.persistent_workers and h.num_workers > 0,
            prefetch_factor=h.prefetch_factor if h.num_workers > 0 else None,
            drop_last=h.drop_last,
        )

    def val_dataloader(self) -> DataLoader[Any]:
        assert self.val_set is not None, "setup('fit') first"
        return DataLoader(self.val_set, batch_size=self.hparams["batch_size"])


def make_loader(
    *,
    batch_size: int,
    num_workers: int = 0,
    pin_memory: bool = False,
    persistent_workers: bool = False,
    prefetch_factor: int | None = None,
    drop_last: bool = False,
    seed: int = 0,
    size: int = 320,
    shape: tuple[int, ...] | list[int] = (3, 16, 16),
    val_fraction: float = 0.2,
    read_ms: float = 0.0,
    transform_ms: float = 0.0,
) -> ImagesDataModule:
    """The DataModule for this point and rank; the harness calls its hooks and
    `train_dataloader()`. Its own arguments are named (not `**kwargs`), so a misspelt
    `loader_args` key is refused when the spec loads."""
    return ImagesDataModule(
        batch_size=batch_size,
        num_workers=num_workers,
        pin_memory=pin_memory,
        persistent_workers=persistent_workers,
        prefetch_factor=prefetch_factor,
        drop_last=drop_last,
        seed=seed,
        size=size,
        shape=shape,
        val_fraction=val_fraction,
        read_ms=read_ms,
        transform_ms=transform_ms,
    )
