"""A sharded streaming pipeline, as its users write it (an example of a user's pipeline).

- **Data**: JPEG images with their labels in WebDataset tar shards (`shard-00000.tar`, ...;
  sample i is the members `<i>.jpg` and `<i>.cls`), the format of LAION, DataComp and most
  web-scale image sets. Write some with
  `harness make-data data/wds --images 2000 --size 256 --shards 8 --webdataset`.
- **Reading** is a stream (`torch.utils.data.IterableDataset`) built with `webdataset`: the
  shard list, shuffled the same way on every rank for the epoch (`set_epoch`); split by rank
  (`wds.split_by_node`) then by DataLoader worker (`wds.split_by_worker`), so that every
  sample is read once per epoch across ranks and workers; each tar read in sequence; a
  shuffle buffer; JPEG decoding (`wds.decode("torchrgb8")`, PIL's decoder) in the loop.
- **Samples** are `(image, label)`: `iter_raw()` yields them decoded (`tv_tensors.Image`,
  uint8), `transform_sample(raw)` augments and normalises the image with
  `torchvision.transforms.v2`. `__iter__` is one then the other, so the caching ladder can
  cache a decoded sample (`raw_sample`: what the augmentations cost; reading and decoding is
  the drop from it to `full`) or a transformed one (`processed_sample`).

Sharding is by whole shards, webdataset's unit: with fewer shards than ranks x workers some
workers read nothing (webdataset then warns, and those workers end at once); with a number of
shards that ranks x workers does not divide, ranks get unequal shares and an epoch ends sooner
on some. Write at least ranks x workers shards, a multiple of it for equal shares.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
import webdataset as wds
from torch.utils.data import IterableDataset
from torchvision import tv_tensors
from torchvision.transforms import v2

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
"""ImageNet's statistics, what most image models normalise with."""


class ShardStream(IterableDataset[tuple[torch.Tensor, int]]):
    """The samples of the tar shards under `root`, this rank's and this worker's share."""

    def __init__(
        self,
        *,
        root: str,
        crop: int = 224,
        shuffle_buffer: int = 256,
        num_classes: int = 10,
        seed: int = 0,
    ) -> None:
        folder = Path(root).expanduser()
        self.urls = sorted(str(p) for p in folder.glob("*.tar"))
        if not self.urls:
            raise FileNotFoundError(
                f"no .tar shard under {folder} (write some with: harness make-data {root} "
                "--images 2000 --shards 8 --webdataset)"
            )
        if crop < 8 or shuffle_buffer < 0:
            raise ValueError(f"need crop >= 8 and shuffle_buffer >= 0 (got {crop}, {shuffle_buffer})")
        self.shuffle_buffer, self.seed, self.epoch = shuffle_buffer, seed, 0
        self.num_classes = num_classes
        self.transform = v2.Compose(
            [
                v2.RandomResizedCrop(crop, antialias=True),
                v2.RandomHorizontalFlip(),
                v2.ToDtype(torch.float32, scale=True),
                v2.Normalize(MEAN, STD),
            ]
        )

    @property
    def n_shards(self) -> int:
        """The tar shards, named as Hugging Face's IterableDataset names its own: a row whose
        workers outnumber them says so with this count (runner.idle_text, through
        stream_shards.declared_shards_of)."""
        return len(self.urls)

    def set_epoch(self, epoch: int) -> None:
        """The shard order of the next epoch (as Hugging Face's IterableDataset.set_epoch)."""
        self.epoch = epoch

    def shards(self) -> list[str]:
        """This epoch's shard order, the same on every rank (split_by_node then takes every
        world_size-th one): a seeded shuffle of the sorted list."""
        urls = list(self.urls)
        random.Random(self.seed * 1_000_003 + self.epoch).shuffle(urls)
        return urls

    def iter_raw(self) -> Iterator[tuple[tv_tensors.Image, int]]:
        """Decoded samples of this rank's and this worker's shards, through a shuffle buffer."""
        pipeline = wds.DataPipeline(
            wds.SimpleShardList(self.shards()),
            wds.split_by_node,
            wds.split_by_worker,
            wds.tarfile_to_samples(),
            # A buffer per worker, seeded per epoch: the stream's only sample-level shuffle.
            wds.shuffle(self.shuffle_buffer, initial=self.shuffle_buffer, rng=random.Random(self.epoch)),
            wds.decode("torchrgb8"),
            wds.to_tuple("jpg;png", "cls"),
        )
        for image, label in pipeline:
            yield tv_tensors.Image(image), int(label)

    def transform_sample(self, raw: tuple[tv_tensors.Image, int]) -> tuple[torch.Tensor, int]:
        image, label = raw
        return self.transform(image), label

    def __iter__(self) -> Iterator[tuple[torch.Tensor, int]]:
        return map(self.transform_sample, self.iter_raw())


def make_dataset(**kwargs: Any) -> ShardStream:
    """The spec's `dataset: harness.examples.shards_stream:make_dataset`; arguments as
    ShardStream (`root`: the folder of the .tar shards)."""
    return ShardStream(**kwargs)
