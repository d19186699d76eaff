"""FakeCIFAR (002_*): CIFAR-shaped uint8 images held in memory; Resize, ToTensor, Normalize."""

from __future__ import annotations

import numpy as np
import torchvision.transforms as T
from PIL import Image

from harness.workloads.contract import Normalization, PipelineDataset

MEAN = STD = (0.5, 0.5, 0.5)  # the article's normalisation constants (002_*)


class FakeCIFAR(PipelineDataset):
    def __init__(
        self,
        *,
        size: int = 10000,
        image_size: int = 32,
        resize: int | None = 224,
        num_classes: int = 10,
        seed: int = 0,
    ) -> None:
        if size < 1 or image_size < 1 or num_classes < 1:
            raise ValueError(
                f"size, image_size and num_classes must be >= 1 (got {size}, {image_size}, {num_classes})"
            )
        if resize is not None and resize < 1:
            raise ValueError(f"resize must be >= 1 or null (got {resize})")
        rng = np.random.default_rng(seed)
        self.data = rng.integers(0, 256, size=(size, image_size, image_size, 3), dtype=np.uint8)
        self.targets = rng.integers(0, num_classes, size=size).tolist()
        self.num_classes = num_classes
        self.resize = resize
        steps: list[object] = [T.Resize(resize)] if resize else []
        steps += [T.ToTensor(), T.Normalize(MEAN, STD)]
        self.transform = T.Compose(steps)

    def to_uint8(self) -> Normalization:
        """Yield uint8 tensors; the returned normalisation is applied on the device (002_*, #4)."""
        self.transform = T.Compose([*([T.Resize(self.resize)] if self.resize else []), T.PILToTensor()])
        return Normalization(MEAN, STD)

    def __len__(self) -> int:
        return len(self.data)

    def load_raw(self, index: int) -> tuple[Image.Image, int]:
        return Image.fromarray(self.data[index]), self.targets[index]
