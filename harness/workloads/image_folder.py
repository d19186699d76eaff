"""Image files on disk, one folder per class, read and decoded with PIL at every access, so that
storage is really in the loop. `harness make-data DIR` writes such a data set.
"""

from __future__ import annotations

import io
import os
from pathlib import Path

import torchvision.transforms as T
from PIL import Image

from harness.workloads import shared_store
from harness.workloads.contract import Normalization, PipelineDataset, sample_read
from harness.workloads.shared_store import bucket_path

EXTENSIONS = (".jpg", ".jpeg", ".png", ".webp", ".bmp")
MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)  # ImageNet's, as torchvision's references


def expand_root(root: str) -> Path:
    """`~` and `$VARS` expanded, so one spec serves every user ($SCRATCH, $TMPDIR...)."""
    return Path(os.path.expandvars(os.path.expanduser(root)))


class EncodedImages(PipelineDataset):
    """What the file-backed datasets share: bytes -> PIL decode -> crop -> tensor."""

    def __init__(self, *, image_size: int, augment: bool, page_cache: str) -> None:
        if page_cache not in ("warm", "cold"):
            raise ValueError(f"page_cache must be warm or cold (got {page_cache!r})")
        self.cold = page_cache == "cold"
        self.crop = (
            T.RandomResizedCrop(image_size)
            if augment
            else T.Compose([T.Resize(image_size), T.CenterCrop(image_size)])
        )
        self.transform = T.Compose([self.crop, T.ToTensor(), T.Normalize(MEAN, STD)])

    def to_uint8(self) -> Normalization:
        """Yield uint8 tensors; the returned normalisation is applied on the device."""
        self.transform = T.Compose([self.crop, T.PILToTensor()])
        return Normalization(MEAN, STD)

    def read_bytes(self, index: int) -> tuple[bytes, int]:
        raise NotImplementedError

    def decode(self, data: bytes) -> Image.Image:
        with Image.open(io.BytesIO(data)) as img:
            return img.convert("RGB")

    def load_raw(self, index: int) -> tuple[Image.Image, int]:
        data, label = sample_read(index, lambda: self.sample_path(index), lambda: self.read_bytes(index))
        return sample_read(index, lambda: self.sample_path(index), lambda: self.decode(data)), label

    def sample_path(self, index: int) -> str:
        """The file that holds sample `index` (a failed read names it)."""
        raise NotImplementedError

    def drop_from_page_cache(self, fd: int, offset: int = 0, length: int = 0) -> None:
        """With page_cache: cold, ask the kernel to forget what was just read, so the next read
        comes from storage again: a cold cache without root (posix_fadvise on one's files)."""
        if self.cold:
            os.posix_fadvise(fd, offset, length, os.POSIX_FADV_DONTNEED)


class ImageFolderDataset(EncodedImages):
    """`store_rate`: read every file through a shared store of that many reads a second, all
    ranks of all nodes of this machine together, or `unlimited` (the same store, no ceiling):
    the test instrument whose known answer the scaling report must find
    (harness/workloads/shared_store.py)."""

    def __init__(
        self,
        *,
        root: str,
        image_size: int = 224,
        augment: bool = True,
        page_cache: str = "warm",
        store_rate: float | str | None = None,
    ) -> None:
        super().__init__(image_size=image_size, augment=augment, page_cache=page_cache)
        base = expand_root(root)
        if not base.is_dir():
            raise FileNotFoundError(
                f"image_folder root {str(base)!r} is not a directory; "
                f"write one with: harness make-data {root}"
            )
        # A folder without images is not a class (make-data's shards/ may sit beside them).
        found = {
            d.name: sorted(f for f in d.iterdir() if f.suffix.lower() in EXTENSIONS)
            for d in base.iterdir()
            if d.is_dir()
        }
        classes = sorted(name for name, files in found.items() if files)
        self.files: list[tuple[Path, int]] = [
            (f, label) for label, name in enumerate(classes) for f in found[name]
        ]
        if not self.files:
            raise FileNotFoundError(
                f"no images ({', '.join(EXTENSIONS)}) in class folders under {str(base)!r}"
            )
        self.root, self.num_classes = base, max(1, len(classes))
        self.store = None if store_rate is None else shared_store.of_rate(bucket_path(base), store_rate)

    def __len__(self) -> int:
        return len(self.files)

    def sample_path(self, index: int) -> str:
        return str(self.files[index][0])

    def read_bytes(self, index: int) -> tuple[bytes, int]:
        path, label = self.files[index]
        if self.store is not None:
            self.store.take()
        with path.open("rb") as f:
            data = f.read()
            self.drop_from_page_cache(f.fileno())
        return data, label
