"""Write image data sets of random pictures: one file per image (image_folder), packed in
shards (image_shards), or in WebDataset tar shards (the stream of harness.examples.shards_stream),
from the same images for the same seed, so that the layouts can be compared on equal bytes."""

from __future__ import annotations

import contextlib
import io
import json
import logging
from collections.abc import Iterator
from pathlib import Path

import numpy as np
from PIL import Image

from harness.workloads.image_shards import INDEX
from harness_schema.atomic import atomic_write_text, named

log = logging.getLogger(__name__)


def encoded_images(images: int, *, size: int, image_format: str, quality: int, seed: int) -> Iterator[bytes]:
    """Smooth random fields (noise upsampled), so that JPEG files have a realistic size and
    decoding a realistic cost; pure noise would compress badly and decode slowly."""
    rng = np.random.default_rng(seed)
    for _ in range(images):
        coarse = rng.integers(0, 256, size=(max(1, size // 8), max(1, size // 8), 3), dtype=np.uint8)
        img = Image.fromarray(coarse).resize((size, size), Image.Resampling.BILINEAR)
        buffer = io.BytesIO()
        img.save(buffer, format="JPEG" if image_format == "jpg" else "PNG", quality=quality)
        yield buffer.getvalue()


@contextlib.contextmanager
def _writing(path: Path) -> Iterator[Path]:
    """The temporary file to write `path` through, renamed into place at the end: a reader
    never sees a torn image or shard. Where the write fails the temporary file is removed,
    and a fault of the file system (a full disk, a read-only or forbidden folder) is a
    CannotWrite naming `path`, which the CLI says in one line, not a traceback."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        yield tmp
        tmp.replace(path)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        fault = named(path, e)
        if fault is e:
            raise
        raise fault from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _check(images: int, classes: int, size: int, image_format: str, shards: int = 1) -> None:
    if images < 1 or classes < 1 or size < 8 or shards < 1:
        raise ValueError(
            f"need images >= 1, classes >= 1, size >= 8, shards >= 1 "
            f"(got {images}, {classes}, {size}, {shards})"
        )
    if image_format not in ("jpg", "png"):
        raise ValueError(f"format must be jpg or png (got {image_format!r})")


def make_image_folder(
    root: Path,
    *,
    images: int,
    classes: int = 10,
    size: int = 256,
    image_format: str = "jpg",
    quality: int = 90,
    seed: int = 0,
) -> int:
    """`images` files in `classes` folders under root; returns the bytes written."""
    _check(images, classes, size, image_format)
    for c in range(classes):
        (root / f"class{c:03d}").mkdir(parents=True, exist_ok=True)
    total = 0
    stream = encoded_images(images, size=size, image_format=image_format, quality=quality, seed=seed)
    for i, data in enumerate(stream):
        path = root / f"class{i % classes:03d}" / f"img{i:07d}.{image_format}"
        with _writing(path) as tmp:
            tmp.write_bytes(data)
        total += len(data)
    log.info("wrote %d images (%.1f MB) under %s", images, total / 1e6, root)
    return total


def make_image_shards(
    root: Path,
    *,
    images: int,
    shards: int,
    classes: int = 10,
    size: int = 256,
    image_format: str = "jpg",
    quality: int = 90,
    seed: int = 0,
) -> int:
    """The same images packed into `shards` files plus index.json; returns the bytes written."""
    entries: list[dict[str, int]] = []
    total = 0
    for k, members in _shards(root, images, shards, classes, size, image_format, quality, seed):
        offset = 0
        with _writing(root / f"shard-{k:05d}.bin") as tmp, tmp.open("wb") as f:
            for i, data in members:
                f.write(data)
                entries.append({"shard": k, "offset": offset, "length": len(data), "label": i % classes})
                offset += len(data)
        total += offset
    atomic_write_text(root / INDEX, json.dumps(entries))
    log.info("wrote %d images (%.1f MB) in %d shard(s) under %s", images, total / 1e6, shards, root)
    return total


def make_webdataset_shards(
    root: Path,
    *,
    images: int,
    shards: int,
    classes: int = 10,
    size: int = 256,
    image_format: str = "jpg",
    quality: int = 90,
    seed: int = 0,
) -> int:
    """The same images as WebDataset tar shards, `shard-00000.tar`...: sample i is the
    members `<i>.jpg` (or `.png`) and `<i>.cls` (its label, as text), the layout webdataset
    reads (`harness.examples.shards_stream`); returns the image bytes written."""
    import webdataset as wds  # the `run` extra: only this layout needs it

    total = 0
    for k, members in _shards(root, images, shards, classes, size, image_format, quality, seed):
        with _writing(root / f"shard-{k:05d}.tar") as tmp, wds.TarWriter(str(tmp)) as writer:
            for i, data in members:
                writer.write({"__key__": f"{i:07d}", image_format: data, "cls": i % classes})
                total += len(data)
    log.info("wrote %d images (%.1f MB) in %d tar shard(s) under %s", images, total / 1e6, shards, root)
    return total


def _shards(
    root: Path,
    images: int,
    shards: int,
    classes: int,
    size: int,
    image_format: str,
    quality: int,
    seed: int,
) -> Iterator[tuple[int, Iterator[tuple[int, bytes]]]]:
    """Check the arguments, make root, then each shard's number with its members, (image
    index, encoded image), in order: shard k holds images k*n .. (k+1)*n-1, n = images/shards
    rounded up. Each shard's members are to be consumed before the next shard's."""
    _check(images, classes, size, image_format, shards)
    root.mkdir(parents=True, exist_ok=True)
    per_shard = -(-images // shards)
    stream = encoded_images(images, size=size, image_format=image_format, quality=quality, seed=seed)
    for k in range(shards):
        yield k, ((i, next(stream)) for i in range(k * per_shard, min(images, (k + 1) * per_shard)))
