"""The segmentation example: decoded pairs, image and mask transformed together by v2, the
per-pixel loss, and the model trained on the pipeline's batches through a plain DataLoader."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader
from torchvision import tv_tensors

from harness.examples.segmentation import (
    MEAN,
    STD,
    VOID,
    SyntheticScenes,
    make_dataset,
    make_loss,
    make_model,
)


@pytest.fixture(scope="module")
def scenes() -> SyntheticScenes:
    return make_dataset(size=24, image_size=64, crop=48, classes=4, seed=1)


def test_raw_samples_are_a_decoded_image_and_its_mask(scenes: SyntheticScenes) -> None:
    image, mask = scenes.load_raw(5)
    assert isinstance(image, tv_tensors.Image) and isinstance(mask, tv_tensors.Mask)
    assert image.shape == (3, 64, 64) and image.dtype == torch.uint8
    assert mask.shape == (64, 64)
    labels = set(mask.unique().tolist())
    assert 0 in labels and VOID in labels and labels <= {0, 1, 2, 3, VOID}


def test_samples_are_cropped_normalised_and_typed_for_the_loss(scenes: SyntheticScenes) -> None:
    image, mask = scenes[5]
    assert image.shape == (3, 48, 48) and image.dtype == torch.float32
    assert mask.shape == (48, 48) and mask.dtype == torch.int64
    assert set(mask.unique().tolist()) <= {0, 1, 2, 3, VOID}  # nearest resampling: no new labels
    # Normalised with the ImageNet statistics: undone, every value lies in [0, 1] (the float
    # conversion's range), while the normalised image itself leaves it. The crop, flip and jitter
    # are random, so the check holds for any draw rather than for one crop's extremes.
    mean = torch.tensor(MEAN).view(3, 1, 1)
    std = torch.tensor(STD).view(3, 1, 1)
    restored = image * std + mean
    assert float(restored.min()) >= -1e-5 and float(restored.max()) <= 1 + 1e-5
    assert float(image.min()) < 0 or float(image.max()) > 1


def halves() -> tuple[tv_tensors.Image, tv_tensors.Mask]:
    """A white left half labelled 1, a black right half labelled 0."""
    image = torch.zeros(3, 64, 64, dtype=torch.uint8)
    image[:, :, :32] = 255
    mask = torch.zeros(64, 64, dtype=torch.uint8)
    mask[:, :32] = 1
    return tv_tensors.Image(image), tv_tensors.Mask(mask)


def test_image_and_mask_get_the_same_crop_and_flip(scenes: SyntheticScenes) -> None:
    torch.manual_seed(0)
    left_labelled = set()
    for _ in range(30):
        image, mask = scenes.transform_sample(halves())
        # Jitter and normalisation keep white above black: the bright pixels are the labelled ones.
        bright = image[0] > image[0].mean() if image[0].std() > 0 else image[0] > 0
        agree = (bright == (mask == 1)).float().mean()
        assert agree > 0.95, f"image and mask disagree on {1 - agree:.0%} of the pixels"
        if mask.any() and not mask.all():
            left_labelled.add(bool(mask[:, 0].any()))
    assert left_labelled == {True, False}, "the flip never happened, or never left the image alone"


def test_the_loss_is_per_pixel_and_leaves_void_pixels_out() -> None:
    torch.manual_seed(0)
    logits = torch.randn(2, 3, 4, 4)
    masks = torch.randint(0, 3, (2, 4, 4))
    voided = masks.clone()
    voided[:, :2] = VOID
    expected = F.cross_entropy(logits[:, :, 2:].permute(0, 2, 3, 1).reshape(-1, 3), masks[:, 2:].reshape(-1))
    assert torch.allclose(make_loss()(logits, [None, voided]), expected)
    weighted = make_loss(class_weights=[1.0, 0.0, 0.0])(logits, [None, masks])
    only_zero = masks == 0
    assert torch.allclose(weighted, F.cross_entropy(logits, masks, reduction="none")[only_zero].mean())


def test_the_model_trains_on_the_pipelines_batches(scenes: SyntheticScenes) -> None:
    torch.manual_seed(0)
    loader = DataLoader(scenes, batch_size=4, shuffle=True, num_workers=2)
    images, masks = batch = next(iter(loader))
    assert images.shape == (4, 3, 48, 48) and masks.shape == (4, 48, 48) and masks.dtype == torch.int64
    model = make_model(num_classes=scenes.num_classes, width=8)
    logits = model(images)
    assert logits.shape == (4, 4, 48, 48)
    loss_fn = make_loss()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(8):  # the same batch: the loss must fall
        loss = loss_fn(model(images), batch)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    assert losses[-1] < 0.8 * losses[0]


def test_bad_arguments_are_refused_with_the_values() -> None:
    with pytest.raises(ValueError, match=r"crop must be in 8..image_size \(64\) \(got 96\)"):
        SyntheticScenes(size=1, image_size=64, crop=96)
    with pytest.raises(
        ValueError, match=r"need size >= 1, image_size >= 16, classes >= 2, border >= 0 \(got 1, 64, 1, 2\)"
    ):
        SyntheticScenes(size=1, image_size=64, crop=32, classes=1)
