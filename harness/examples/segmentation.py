"""A semantic-segmentation pipeline, as its users write it (an example of a user's pipeline).

- **Data**: synthetic scenes, seeded: a background and a few ellipses and rectangles, each
  shape of one of `classes - 1` object classes, with its class's colour, shading and noise.
  Each scene is stored as a JPEG image and a PNG mask (the layout of Pascal VOC and
  Cityscapes: lossy pictures, lossless label maps), in memory, encoded once at construction.
- **Samples** are `(image, mask)` pairs of `tv_tensors`: `load_raw(i)` decodes the two files
  with PIL (`tv_tensors.Image`, uint8 `[3, H, W]`; `tv_tensors.Mask`, `[H, W]`);
  `transform_sample(raw)` applies one `torchvision.transforms.v2` pipeline to the pair. v2
  transforms a pair together: the same random crop and flip for both, bilinear resampling
  for the image and nearest for the mask, colour jitter and normalisation on the image only.
  `self[i]` is one then the other, so the caching ladder caches the decoded pair
  (`raw_sample`: what the augmentations cost) or the transformed one (`processed_sample`).
- **Model** (`make_model`): a small encoder-decoder (two strided convolutions down, two
  transposed convolutions up, a skip connection), logits `[B, classes, H, W]`.
- **Loss** (`make_loss`): per-pixel cross-entropy, pixels labelled `ignore_index` (255, VOC's
  "void" border) left out. The harness calls `model(images)` on a `[images, masks]` batch,
  then `loss(logits, batch)`.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image, ImageDraw
from torch import nn
from torch.utils.data import Dataset
from torchvision import tv_tensors
from torchvision.transforms import v2

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
"""ImageNet's statistics, what segmentation models normalise with (torchvision's references)."""
VOID = 255
"""The label of pixels without a class (Pascal VOC's object borders): not a target."""


def scene(rng: np.random.Generator, size: int, classes: int, border: int) -> tuple[Image.Image, Image.Image]:
    """One picture and its label map: 2 to 6 shapes on a background (class 0). With
    `border` > 0, each shape's outline is VOID, `border` pixels wide, as in VOC."""
    palette = rng.integers(0, 256, size=(classes, 3))
    image = Image.new("RGB", (size, size), tuple(int(c) for c in palette[0]))
    mask = Image.new("L", (size, size), 0)
    draw_image, draw_mask = ImageDraw.Draw(image), ImageDraw.Draw(mask)
    for _ in range(int(rng.integers(2, 7))):
        label = int(rng.integers(1, classes))
        x0, y0 = rng.integers(0, size - size // 8, size=2)
        w, h = rng.integers(size // 8, size // 2, size=2)
        box = (int(x0), int(y0), int(min(size - 1, x0 + w)), int(min(size - 1, y0 + h)))
        shape = draw_image.ellipse if rng.random() < 0.5 else draw_image.rectangle
        mask_shape = draw_mask.ellipse if shape == draw_image.ellipse else draw_mask.rectangle
        shape(box, fill=tuple(int(c) for c in palette[label]))
        mask_shape(box, fill=label, outline=VOID if border else None, width=border)
    # Texture and lighting, so that the JPEG has a realistic size and the jitter work to do.
    shade = np.linspace(0.7, 1.0, size)[None, :, None] * rng.normal(1.0, 0.08, size=(size, size, 1))
    pixels = np.clip(np.asarray(image, dtype=np.float32) * shade, 0, 255).astype(np.uint8)
    return Image.fromarray(pixels), mask


def file_bytes(picture: Image.Image, image_format: str) -> bytes:
    buffer = io.BytesIO()
    picture.save(buffer, format=image_format, quality=90)
    return buffer.getvalue()


class SyntheticScenes(Dataset[tuple[torch.Tensor, torch.Tensor]]):
    """`size` scenes of `image_size`² pixels, `classes` classes (background included), each
    a JPEG image and a PNG mask; samples are cropped to `crop`² by the transforms."""

    def __init__(
        self,
        *,
        size: int = 512,
        image_size: int = 256,
        crop: int = 192,
        classes: int = 6,
        border: int = 2,
        seed: int = 0,
    ) -> None:
        if size < 1 or image_size < 16 or classes < 2 or border < 0:
            raise ValueError(
                f"need size >= 1, image_size >= 16, classes >= 2, border >= 0 "
                f"(got {size}, {image_size}, {classes}, {border})"
            )
        if not 8 <= crop <= image_size:
            raise ValueError(f"crop must be in 8..image_size ({image_size}) (got {crop})")
        rng = np.random.default_rng(seed)
        self.files: list[tuple[bytes, bytes]] = []
        for _ in range(size):
            image, mask = scene(rng, image_size, classes, border)
            self.files.append((file_bytes(image, "JPEG"), file_bytes(mask, "PNG")))
        self.num_classes = classes
        self.transform_sample = v2.Compose(
            [
                v2.RandomResizedCrop(crop, scale=(0.35, 1.0), antialias=True),
                v2.RandomHorizontalFlip(),
                v2.ColorJitter(brightness=0.3, contrast=0.3, saturation=0.3),
                # Images to float in [0, 1]; masks to the int64 targets cross_entropy takes.
                v2.ToDtype({tv_tensors.Image: torch.float32, tv_tensors.Mask: torch.int64}, scale=True),
                v2.Normalize(MEAN, STD),
            ]
        )
        """The paired transforms, `(Image, Mask) -> (Image, Mask)`: a v2 Compose, so the
        ladder's `transform:<k>` rungs can cut it."""

    def __len__(self) -> int:
        return len(self.files)

    def load_raw(self, index: int) -> tuple[tv_tensors.Image, tv_tensors.Mask]:
        jpeg, png = self.files[index]
        # PIL decodes, as torchvision's datasets do (torchvision.io's decoders are deprecated
        # since 0.29 in favour of TorchCodec, which few installs have).
        image = v2.functional.pil_to_tensor(Image.open(io.BytesIO(jpeg)).convert("RGB"))
        mask = torch.from_numpy(np.array(Image.open(io.BytesIO(png))))
        return tv_tensors.Image(image), tv_tensors.Mask(mask)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.transform_sample(self.load_raw(index))


def make_dataset(**kwargs: Any) -> SyntheticScenes:
    """The spec's `dataset: harness.examples.segmentation:make_dataset`; arguments as
    SyntheticScenes."""
    return SyntheticScenes(**kwargs)


def block(into: int, out: int, stride: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(into, out, 3, stride=stride, padding=1, bias=False),
        nn.BatchNorm2d(out),
        nn.ReLU(inplace=True),
    )


class TinySegNet(nn.Module):
    """Full resolution -> 1/2 -> 1/4 and back, with the 1/2 features added on the way up
    (U-Net's skip connection, summed instead of concatenated)."""

    def __init__(self, classes: int, width: int) -> None:
        super().__init__()
        self.stem = block(3, width, 1)
        self.down1 = block(width, 2 * width, 2)
        self.down2 = block(2 * width, 4 * width, 2)
        self.up2 = nn.ConvTranspose2d(4 * width, 2 * width, 2, stride=2)
        self.up1 = nn.ConvTranspose2d(2 * width, width, 2, stride=2)
        self.head = nn.Conv2d(width, classes, 1)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        full = self.stem(images)
        half = self.down1(full)
        x = F.relu(self.up2(self.down2(half))) + half
        return self.head(F.relu(self.up1(x)) + full)


def make_model(*, num_classes: int, width: int = 16) -> TinySegNet:
    """The spec's `model: harness.examples.segmentation:make_model`; `num_classes` comes from
    the dataset's `num_classes`."""
    if width < 1:
        raise ValueError(f"width must be >= 1 (got {width})")
    return TinySegNet(num_classes, width)


def make_loss(
    *, ignore_index: int = VOID, class_weights: Sequence[float] | None = None
) -> Callable[[torch.Tensor, Any], torch.Tensor]:
    """The spec's `loss: harness.examples.segmentation:make_loss`: per-pixel cross-entropy
    of the logits `[B, C, H, W]` against the batch's masks `[B, H, W]`."""
    weights = None if class_weights is None else torch.tensor(class_weights, dtype=torch.float32)

    def loss(logits: torch.Tensor, batch: Any) -> torch.Tensor:
        masks = batch[1]
        weight = None if weights is None else weights.to(logits.device)
        return F.cross_entropy(logits, masks, weight=weight, ignore_index=ignore_index)

    return loss
