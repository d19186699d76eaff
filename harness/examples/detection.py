"""A torchvision object-detection pipeline, as its users write it (an example of a user's
pipeline), after torchvision's detection reference scripts (references/detection).

- **Data**: synthetic scenes, seeded: each image holds `min_boxes` (1) to `max_boxes` filled rectangles of
  `num_classes` colours on a noisy background, JPEG-encoded in memory with PIL (the stored file); its
  target is the boxes (x1, y1, x2, y2, pixels) and their labels (1..num_classes; 0 is the
  background, as torchvision's detection models count). Box counts vary from image to image,
  as in COCO, so samples cannot be stacked into one tensor.
- **Samples** are `(image, target)`: `load_raw(i)` decodes the JPEG (with PIL, as the
  reference's COCO reader does) into a `tv_tensors.Image` and gives
  `{"boxes": tv_tensors.BoundingBoxes, "labels", "image_id"}`;
  `transform_sample` runs the reference's `torchvision.transforms.v2` training pipeline on the
  pair (the same random flip for the image and its boxes, a photometric distortion, float
  conversion, and `SanitizeBoundingBoxes`, which drops boxes a transform made degenerate).
- **Collate** (`make_collate`): the reference's `utils.collate_fn`, `tuple(zip(*batch))`: a
  tuple of the batch's images and a tuple of its target dicts, each image of its own size.
  The harness counts such a batch by its outer length (the images), never by a tensor's first
  dimension; the emulated model takes the tuple of images.
- **Model** (the GPU spec): torchvision's Faster R-CNN with a MobileNetV3 backbone at 320 px,
  untrained (no weights downloaded), trained by `make_step`: a detection model in training
  mode takes the images and the targets and returns its losses, which the harness's
  `model(batch[0])` convention cannot give it, so the step is the user's.

`read_ms` and `transform_ms` add a known cost (a sleep) to each sample's read or transform:
the tests inject them and expect the ladder's verdict to name the stage they were put in.
"""

from __future__ import annotations

import io
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch
from PIL import Image
from torch import nn
from torch.utils.data import Dataset
from torchvision import tv_tensors
from torchvision.transforms import v2

Target = dict[str, Any]
Sample = tuple[torch.Tensor, Target]


def scene(
    rng: torch.Generator, size: int, counts: tuple[int, int], num_classes: int
) -> tuple[torch.Tensor, Target]:
    """One uint8 image (3, size, size) with counts[0]..counts[1] rectangles, their boxes and labels."""
    image = torch.randint(0, 64, (3, size, size), generator=rng, dtype=torch.uint8)
    count = int(torch.randint(counts[0], counts[1] + 1, (1,), generator=rng))
    corners = torch.randint(0, size - 8, (count, 2), generator=rng)
    extents = torch.randint(8, max(9, size // 2), (count, 2), generator=rng)
    boxes = torch.cat([corners, (corners + extents).clamp(max=size)], dim=1)
    labels = torch.randint(1, num_classes + 1, (count,), generator=rng)
    for (x1, y1, x2, y2), label in zip(boxes.tolist(), labels.tolist(), strict=True):
        colour = torch.tensor([label * 37 % 256, label * 91 % 256, label * 53 % 256], dtype=torch.uint8)
        image[:, y1:y2, x1:x2] = colour[:, None, None]
    return image, {"boxes": boxes.float(), "labels": labels}


class SyntheticDetection(Dataset[Sample]):
    """`size` JPEG scenes in memory with their boxes; the whole-sample contract of the harness."""

    def __init__(
        self,
        *,
        size: int = 512,
        image_size: int = 160,
        min_boxes: int = 1,
        max_boxes: int = 6,
        num_classes: int = 5,
        read_ms: float = 0,
        transform_ms: float = 0,
        seed: int = 0,
    ) -> None:
        if size < 1 or image_size < 32 or not 1 <= min_boxes <= max_boxes or num_classes < 1:
            raise ValueError(
                "need size >= 1, image_size >= 32, 1 <= min_boxes <= max_boxes and num_classes >= 1 "
                f"(got {size}, {image_size}, {min_boxes}, {max_boxes}, {num_classes})"
            )
        for name, value in (("read_ms", read_ms), ("transform_ms", transform_ms)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise ValueError(f"{name} must be a number of milliseconds >= 0 (got {value!r})")
        self.read_s, self.transform_s = read_ms / 1000, transform_ms / 1000
        rng = torch.Generator().manual_seed(seed)
        self.files: list[bytes] = []
        self.targets: list[Target] = []
        for _ in range(size):
            image, target = scene(rng, image_size, (min_boxes, max_boxes), num_classes)
            stored = io.BytesIO()
            Image.fromarray(image.permute(1, 2, 0).numpy()).save(stored, format="JPEG", quality=90)
            self.files.append(stored.getvalue())
            self.targets.append(target)
        self.image_size = image_size
        # The reference's training transforms (references/detection/presets.py, "hflip"),
        # with the photometric distortion of its SSD preset.
        self.transform = v2.Compose(
            [
                v2.RandomPhotometricDistort(p=0.5),
                v2.RandomHorizontalFlip(p=0.5),
                v2.ToDtype(torch.float32, scale=True),
                v2.SanitizeBoundingBoxes(),
            ]
        )

    def __len__(self) -> int:
        return len(self.files)

    def load_raw(self, index: int) -> Sample:
        """The decoded image and its target, as stored."""
        if self.read_s:
            time.sleep(self.read_s)
        with Image.open(io.BytesIO(self.files[index])) as stored:
            image = tv_tensors.Image(v2.functional.pil_to_tensor(stored.convert("RGB")))
        kept = self.targets[index]
        canvas = (self.image_size, self.image_size)
        target = {
            "boxes": tv_tensors.BoundingBoxes(kept["boxes"], format="XYXY", canvas_size=canvas),
            "labels": kept["labels"].clone(),
            "image_id": index,
        }
        return image, target

    def transform_sample(self, raw: Sample) -> Sample:
        """The training transforms on the pair (boxes follow the image)."""
        if self.transform_s:
            time.sleep(self.transform_s)
        image, target = self.transform(*raw)
        return image, target

    def __getitem__(self, index: int) -> Sample:
        return self.transform_sample(self.load_raw(index))


def make_dataset(**kwargs: Any) -> SyntheticDetection:
    """The spec's `dataset: harness.examples.detection:make_dataset`; arguments as SyntheticDetection."""
    return SyntheticDetection(**kwargs)


def collate_fn(batch: Sequence[Sample]) -> tuple[tuple[torch.Tensor, ...], tuple[Target, ...]]:
    """torchvision's references/detection/utils.py collate_fn: images and targets, per sample."""
    return tuple(zip(*batch, strict=True))  # type: ignore[return-value]


def make_collate() -> Callable[[Sequence[Sample]], Any]:
    """The spec's `collate: harness.examples.detection:make_collate`."""
    return collate_fn


def make_model(*, num_classes: int = 5, min_size: int = 320, max_size: int = 320) -> nn.Module:
    """Faster R-CNN, MobileNetV3-Large FPN backbone at 320 px, untrained: `num_classes` object
    classes plus the background."""
    from torchvision.models.detection import fasterrcnn_mobilenet_v3_large_320_fpn

    return fasterrcnn_mobilenet_v3_large_320_fpn(
        weights=None, weights_backbone=None, num_classes=num_classes + 1, min_size=min_size, max_size=max_size
    )


def make_step(model: nn.Module, *, device: torch.device, lr: float = 0.01) -> Callable[[Any], None]:
    """The reference's train_one_epoch step: the model on (images, targets) returns its losses
    (classifier, box regression, objectness, RPN boxes), summed, back-propagated, stepped."""
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.SGD(params, lr=lr, momentum=0.9, weight_decay=1e-4)

    def step(batch: Any) -> None:
        images, targets = batch
        losses = model(list(images), [{k: v for k, v in t.items() if k != "image_id"} for t in targets])
        loss = sum(losses.values())
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    return step
