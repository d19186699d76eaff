"""A MosaicML Streaming pipeline, as its users write it (an example of a user's pipeline).

mosaicml-streaming cannot be installed beside the `libs` extra (it pins numpy<2.2, and through
transformers<5 huggingface-hub<1.0, which breaks Hugging Face `datasets` 5): it runs in an
environment of its own, made by `scripts/mosaic_env.sh` (.venv-mosaic), where
tests/harness/examples/test_mosaic.py runs the harness on it. So `streaming` is imported in
the functions, never when this module is: the harness's own environment imports it for its
layout and its documentation.

- **Writing** (`write_dataset`, or `python -m harness.examples.mosaic_mds ROOT`): Mosaic's
  `MDSWriter` writes samples into MDS shards (`shard.*.mds` and `index.json`) in a local
  folder; each sample `{"image": raw uint8 bytes (3, size, size), "label": int}`, seeded.
- **Reading** (`make_dataset`) is a `streaming.StreamingDataset` subclass, as Mosaic's docs
  write one: `__getitem__` takes the sample from its shard and turns it into a float tensor.
  The StreamingDataset takes the point's `batch_size` itself (it partitions the samples across
  ranks, workers and batches with it): the factory names `batch_size`, so the harness gives it.
  Only `local` is given (the shards already on local disk, no `remote`).

`make_loader` is the same data set under Mosaic's own `StreamingDataLoader`, for a
`workload.loader` spec.

`read_ms` adds a known cost (a sleep) to each sample's read: the tests inject it and expect the
ladder's verdict to name it, and nothing where it is 0.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch


def write_dataset(
    root: str | Path, *, samples: int = 256, size: int = 32, size_limit: int = 1 << 16, seed: int = 0
) -> Path:
    """`samples` samples in MDS shards of at most `size_limit` bytes under `root` (MDSWriter)."""
    from streaming import MDSWriter

    rng = np.random.default_rng(seed)
    with MDSWriter(out=str(root), columns={"image": "bytes", "label": "int"}, size_limit=size_limit) as out:
        for index in range(samples):
            image = rng.integers(0, 256, (3, size, size), dtype=np.uint8)
            out.write({"image": image.tobytes(), "label": index})
    return Path(root)


def dataset_class() -> type:
    """The StreamingDataset subclass, made when first asked (streaming imported then)."""
    from streaming import StreamingDataset

    class MosaicImages(StreamingDataset):
        """Samples from MDS shards as (float image, label), each read `read_ms` slower."""

        def __init__(self, *, size: int, read_ms: float, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.side, self.read_ms = size, read_ms  # not `size`: a StreamingDataset property

        def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
            sample = super().__getitem__(index)
            if self.read_ms:
                time.sleep(self.read_ms / 1000)  # the injected cost: a slower read
            image = np.frombuffer(sample["image"], dtype=np.uint8).reshape(3, self.side, self.side)
            return torch.from_numpy(image.astype(np.float32) / 255), int(sample["label"])

    # Named as if at module level (harness.examples.mosaic_mds.MosaicImages), as messages show it.
    MosaicImages.__qualname__ = "MosaicImages"
    return MosaicImages


def make_dataset(
    *,
    local: str,
    batch_size: int,
    remote: str | None = None,
    size: int = 32,
    read_ms: float = 0.0,
    shuffle: bool = True,
) -> Any:
    """A StreamingDataset over the MDS shards under `local` (copied there from `remote` first,
    where one is given), for batches of `batch_size`."""
    return dataset_class()(
        remote=remote, local=local, batch_size=batch_size, shuffle=shuffle, size=size, read_ms=read_ms
    )


def make_loader(
    *,
    batch_size: int,
    local: str,
    num_workers: int = 0,
    prefetch_factor: int | None = 2,
    pin_memory: bool = False,
    drop_last: bool = False,
    remote: str | None = None,
    size: int = 32,
    read_ms: float = 0.0,
    shuffle: bool = True,
) -> Any:
    """Mosaic's own `StreamingDataLoader` (a DataLoader subclass that can save and resume its
    position in the stream) over `make_dataset`'s data set: a loader factory
    (`workload.loader`), measured as given."""
    from streaming import StreamingDataLoader

    dataset = make_dataset(
        local=local, remote=remote, batch_size=batch_size, size=size, read_ms=read_ms, shuffle=shuffle
    )
    return StreamingDataLoader(
        dataset,
        batch_size=batch_size,
        num_workers=num_workers,
        prefetch_factor=prefetch_factor if num_workers else None,  # PyTorch refuses one without workers
        pin_memory=pin_memory,
        drop_last=drop_last,
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="write a small MDS data set (Mosaic's MDSWriter)")
    parser.add_argument("root")
    parser.add_argument("--samples", type=int, default=256)
    parser.add_argument("--size", type=int, default=32)
    parser.add_argument("--size-limit", type=int, default=1 << 16, help="a shard's most bytes")
    args = parser.parse_args(argv)
    write_dataset(args.root, samples=args.samples, size=args.size, size_limit=args.size_limit)


if __name__ == "__main__":
    main()
