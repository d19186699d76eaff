"""A LitData pipeline, as its users write it (an example of a user's pipeline).

- **Writing** (`write_dataset`, or `python -m harness.examples.litdata_images ROOT`):
  `litdata.optimize` turns samples into LitData's chunked binary format in a local folder
  (`chunk-*.bin` and `index.json`): each sample a dict `{"image": JPEG bytes, "label": int}`
  of synthetic images, seeded. LitData reads the same format from a local folder or from
  object storage (`s3://...`, cached to local disk); a local folder is what the tests use.
- **Reading** is a `litdata.StreamingDataset` subclass (an `IterableDataset` with a length,
  as LitData's users write one): LitData splits the chunks between ranks (from
  torch.distributed) and DataLoader workers itself, and shuffles chunks and the samples within
  them (`shuffle`, reseeded by `set_epoch`). `__getitem__` reads one sample from its chunk and
  decodes the JPEG (PIL), then applies `torchvision.transforms.v2` augmentations.
- **The stream contract** of the harness: `iter_raw()` yields the decoded samples
  `(tv_tensors.Image uint8, label)` (the same iteration without the transforms),
  `transform_sample` augments one. So the caching ladder can cache a decoded sample
  (`raw_sample`: what the augmentations cost; reading the chunk and decoding is the drop from it
  to `full`) or a transformed one (`processed_sample`).

LitData recommends its `StreamingDataLoader` (a DataLoader subclass that also saves the
position in the stream for resuming); a dataset factory gets the harness's plain DataLoader,
which reads the same samples at the same speed (the subclass adds no reading of its own).

`read_ms` and `transform_ms` add a known cost (a sleep) to each sample's read or transform:
the tests inject them and expect the ladder's verdict to name the stage they were put in.
"""

from __future__ import annotations

import argparse
import copy
import functools
import io
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import litdata
import numpy as np
import torch
from PIL import Image
from torchvision import tv_tensors
from torchvision.transforms import v2

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
"""ImageNet's statistics, what most image models normalise with."""


def _sample(index: int, *, size: int, classes: int, seed: int) -> dict[str, Any]:
    """Sample `index`: a smooth random image (JPEG bytes) and its label, the same for a seed."""
    rng = np.random.default_rng([seed, index])
    coarse = rng.integers(0, 256, (size // 8, size // 8, 3), dtype=np.uint8)
    image = Image.fromarray(coarse).resize((size, size), Image.Resampling.BILINEAR)
    stored = io.BytesIO()
    image.save(stored, format="JPEG", quality=90)
    return {"image": stored.getvalue(), "label": index % classes}


def write_dataset(
    root: str | Path,
    *,
    images: int = 512,
    size: int = 128,
    classes: int = 10,
    chunk_bytes: str = "4MB",
    workers: int = 1,
    seed: int = 0,
) -> Path:
    """`images` samples in LitData's format under `root` (made by litdata.optimize)."""
    if images < 1 or size < 8 or classes < 1:
        raise ValueError(f"need images >= 1, size >= 8 and classes >= 1 (got {images}, {size}, {classes})")
    litdata.optimize(
        fn=functools.partial(_sample, size=size, classes=classes, seed=seed),
        inputs=list(range(images)),
        output_dir=str(root),
        chunk_bytes=chunk_bytes,
        num_workers=workers,
        # fork, not LitData's default spawn: a spawned worker imports torch and this module
        # afresh (seconds on a busy 2-core machine); optimize's fn is pure (no thread, no GPU).
        start_method="fork",
    )
    return Path(root)


class LitImages(litdata.StreamingDataset):
    """The samples under `root` (written by write_dataset), decoded and augmented."""

    def __init__(
        self,
        *,
        root: str,
        crop: int = 112,
        shuffle: bool = True,
        read_ms: float = 0,
        transform_ms: float = 0,
        seed: int = 0,
    ) -> None:
        folder = Path(root).expanduser()
        if not (folder / "index.json").is_file():
            raise FileNotFoundError(
                f"no LitData index.json under {folder} (write a data set with: "
                f"python -m harness.examples.litdata_images {root})"
            )
        if crop < 8:
            raise ValueError(f"crop must be >= 8 pixels (got {crop})")
        for name, value in (("read_ms", read_ms), ("transform_ms", transform_ms)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise ValueError(f"{name} must be a number of milliseconds >= 0 (got {value!r})")
        super().__init__(input_dir=str(folder), shuffle=shuffle, seed=seed)
        self.read_s, self.transform_s = read_ms / 1000, transform_ms / 1000
        self.transforms = v2.Compose(
            [
                v2.RandomResizedCrop(crop, antialias=True),
                v2.RandomHorizontalFlip(),
                v2.ToDtype(torch.float32, scale=True),
                v2.Normalize(MEAN, STD),
            ]
        )
        self.raw_only = False
        """Set on the copy iter_raw() iterates: its samples stop before the transforms."""

    def __getitem__(self, index: Any) -> Any:
        """LitData calls this for every sample of the iteration (and for `dataset[i]`)."""
        item = super().__getitem__(index)
        if self.read_s:
            time.sleep(self.read_s)
        with Image.open(io.BytesIO(item["image"])) as stored:
            image = tv_tensors.Image(v2.functional.pil_to_tensor(stored.convert("RGB")))
        raw = (image, int(item["label"]))
        return raw if self.raw_only else self.transform_sample(raw)

    def transform_sample(self, raw: tuple[torch.Tensor, int]) -> tuple[torch.Tensor, int]:
        if self.transform_s:
            time.sleep(self.transform_s)
        image, label = raw
        return self.transforms(image), label

    def iter_raw(self) -> Iterator[tuple[torch.Tensor, int]]:
        """This reader's decoded samples, in the stream's order: a shallow copy of the dataset
        iterated with raw_only set (LitData iterates through __getitem__; the copy keeps the
        original's iteration state apart)."""
        raw = copy.copy(self)
        raw.raw_only = True
        return iter(raw)


def make_dataset(**kwargs: Any) -> LitImages:
    """The spec's `dataset: harness.examples.litdata_images:make_dataset`; arguments as LitImages."""
    return LitImages(**kwargs)


def main(argv: list[str] | None = None) -> None:
    """Write a data set: `python -m harness.examples.litdata_images ROOT [--images N] [--size PX]`."""
    parser = argparse.ArgumentParser(description=write_dataset.__doc__)
    parser.add_argument("root")
    parser.add_argument("--images", type=int, default=512)
    parser.add_argument("--size", type=int, default=128)
    parser.add_argument("--classes", type=int, default=10)
    args = parser.parse_args(argv)
    write_dataset(args.root, images=args.images, size=args.size, classes=args.classes)


if __name__ == "__main__":
    main()
