"""Image files on disk, one folder per class, decoded with PIL: storage is really in the loop.

`harness make-data DIR` writes such a data set (see `make_image_folder`).
"""

from __future__ import annotations

import io
import logging
import os
from pathlib import Path

import numpy as np
import torchvision.transforms as T
from PIL import Image

from harness.workloads.contract import Normalization, PipelineDataset

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)  # ImageNet's, as torchvision's references use

log = logging.getLogger(__name__)

EXTENSIONS = (".jpg", ".jpeg", ".png", ".webp", ".bmp")


class ImageFolderDataset(PipelineDataset):
    def __init__(
        self, *, root: str, image_size: int = 224, augment: bool = True, page_cache: str = "warm"
    ) -> None:
        if page_cache not in ("warm", "cold"):
            raise ValueError(f"page_cache must be warm or cold (got {page_cache!r})")
        base = Path(root).expanduser()
        if not base.is_dir():
            raise FileNotFoundError(
                f"image_folder root {str(base)!r} is not a directory; "
                f"write one with: harness make-data {root}"
            )
        classes = sorted(d.name for d in base.iterdir() if d.is_dir())
        self.files: list[tuple[Path, int]] = [
            (f, label)
            for label, name in enumerate(classes)
            for f in sorted((base / name).iterdir())
            if f.suffix.lower() in EXTENSIONS
        ]
        if not self.files:
            raise FileNotFoundError(
                f"no images ({', '.join(EXTENSIONS)}) in class folders under {str(base)!r}"
            )
        self.root, self.num_classes = base, max(1, len(classes))
        self.crop = (
            T.RandomResizedCrop(image_size)
            if augment
            else T.Compose([T.Resize(image_size), T.CenterCrop(image_size)])
        )
        self.transform = T.Compose([self.crop, T.ToTensor(), T.Normalize(MEAN, STD)])
        self.cold = page_cache == "cold"

    def to_uint8(self) -> Normalization:
        """Yield uint8 tensors; the returned normalisation is applied on the device."""
        self.transform = T.Compose([self.crop, T.PILToTensor()])
        return Normalization(MEAN, STD)

    def __len__(self) -> int:
        return len(self.files)

    def read_bytes(self, index: int) -> tuple[bytes, int]:
        path, label = self.files[index]
        with path.open("rb") as f:
            data = f.read()
            if self.cold:
                # Ask the kernel to drop this file's pages, so the next read of it comes from
                # storage again: a cold cache without root (posix_fadvise works on one's files).
                os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
        return data, label

    def decode(self, data: bytes) -> Image.Image:
        with Image.open(io.BytesIO(data)) as img:
            return img.convert("RGB")

    def load_raw(self, index: int) -> tuple[Image.Image, int]:
        data, label = self.read_bytes(index)
        return self.decode(data), label


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
    """Write `images` random images of `size`² pixels into `classes` folders; return bytes written.

    The images are smooth random fields (noise upsampled), so that JPEG files have a realistic
    size and decoding a realistic cost; pure noise would compress badly and decode slowly.
    """
    if images < 1 or classes < 1 or size < 8:
        raise ValueError(f"need images >= 1, classes >= 1, size >= 8 (got {images}, {classes}, {size})")
    if image_format not in ("jpg", "png"):
        raise ValueError(f"format must be jpg or png (got {image_format!r})")
    rng = np.random.default_rng(seed)
    total = 0
    for c in range(classes):
        (root / f"class{c:03d}").mkdir(parents=True, exist_ok=True)
    for i in range(images):
        coarse = rng.integers(0, 256, size=(size // 8, size // 8, 3), dtype=np.uint8)
        img = Image.fromarray(coarse).resize((size, size), Image.Resampling.BILINEAR)
        path = root / f"class{i % classes:03d}" / f"img{i:07d}.{image_format}"
        tmp = path.with_name(path.name + ".tmp")
        img.save(tmp, format="JPEG" if image_format == "jpg" else "PNG", quality=quality)
        tmp.replace(path)
        total += path.stat().st_size
    log.info("wrote %d images (%.1f MB) under %s", images, total / 1e6, root)
    return total
