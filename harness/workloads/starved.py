"""The deliberately starved pipeline of C. Rand's caching article: random large images, a costly
mask dilation (https://towardsdatascience.com/author/chaimrand/).

Each raw sample is a fresh random `input_size`² RGB image (the article's 1024×1024); the
transforms are the article's: PILToTensor, RandomCrop, RandomMask (scipy 4-neighbour
dilation), ConvertColor (RGB -> YCbCr by matmul) and Scale.
"""

from __future__ import annotations

import numpy as np
import torch
import torchvision.transforms as T
from PIL import Image
from scipy.signal import convolve2d

from harness.workloads.contract import PipelineDataset

_CROSS = np.array([[0, 1, 0], [1, 1, 1], [0, 1, 0]])


class RandomMask(torch.nn.Module):
    """Zero a random `ratio` of pixels, dilated to their 4 neighbours (the article's RandomMask)."""

    def __init__(self, ratio: float = 0.25) -> None:
        super().__init__()
        self.ratio = ratio

    def forward(self, img: torch.Tensor) -> torch.Tensor:
        h, w = img.shape[-2:]
        mask = np.random.uniform(size=(h, w)) < self.ratio
        dilated = torch.from_numpy(convolve2d(mask, _CROSS, mode="same").astype(bool))
        img[dilated.unsqueeze(0).expand(img.shape[0], -1, -1)] = 0
        return img


class ConvertColor(torch.nn.Module):
    """RGB -> YCbCr as a 3×3 matmul over all pixels (the article's ConvertColor)."""

    def __init__(self) -> None:
        super().__init__()
        self.A = torch.tensor([[0.299, 0.587, 0.114], [-0.16874, -0.33126, 0.5], [0.5, -0.41869, -0.08131]])
        self.b = torch.tensor([0.0, 128.0, 128.0])

    def forward(self, img: torch.Tensor) -> torch.Tensor:
        img = img.to(dtype=torch.get_default_dtype())
        img = torch.matmul(self.A, img.view([3, -1])).view(img.shape)
        return img + self.b[:, None, None]


class Scale(torch.nn.Module):
    def forward(self, img: torch.Tensor) -> torch.Tensor:
        return img.to(dtype=torch.get_default_dtype()).div(255)


class StarvedDataset(PipelineDataset):
    def __init__(
        self,
        *,
        size: int = 10000,
        input_size: int = 1024,
        crop: int = 256,
        mask_ratio: float = 0.25,
        num_classes: int = 10,
    ) -> None:
        if crop > input_size:
            raise ValueError(f"crop ({crop}) must not exceed input_size ({input_size})")
        if size < 1 or crop < 1:
            raise ValueError(f"size and crop must be >= 1 (got {size}, {crop})")
        self.size, self.input_size, self.num_classes = size, input_size, num_classes
        self.transform = T.Compose(
            [T.PILToTensor(), T.RandomCrop(crop), RandomMask(mask_ratio), ConvertColor(), Scale()]
        )

    def __len__(self) -> int:
        return self.size

    def load_raw(self, index: int) -> tuple[Image.Image, int]:
        pixels = np.random.randint(0, 256, size=(self.input_size, self.input_size, 3), dtype=np.uint8)
        return Image.fromarray(pixels), int(np.random.randint(0, self.num_classes))
