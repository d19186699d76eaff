"""The torchvision detection pipeline: (image, target dict) samples with varying box counts,
the reference collate tuple(zip(*batch)), counted by its images; the emulated model and the
reference's step train on its batches; the ladder names a cost put in its read or transforms."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch.utils.data import DataLoader
from torchvision import tv_tensors

from harness.examples.detection import SyntheticDetection, collate_fn, make_dataset, make_model, make_step
from harness.execution.batches import count_samples
from harness.execution.train_step import TrainStep
from harness.workloads.emulated import emulated
from tests.fixtures.ladder_runs import ladder_run

SMALL = {"size": 16, "image_size": 64}


def test_raw_samples_are_a_decoded_image_and_its_boxes_of_varying_count() -> None:
    dataset = make_dataset(**SMALL, max_boxes=6)
    image, target = dataset.load_raw(0)
    assert isinstance(image, tv_tensors.Image) and image.shape == (3, 64, 64) and image.dtype == torch.uint8
    assert isinstance(target["boxes"], tv_tensors.BoundingBoxes) and target["boxes"].canvas_size == (64, 64)
    assert len(target["labels"]) == len(target["boxes"]) and target["image_id"] == 0
    assert len({len(dataset.load_raw(i)[1]["boxes"]) for i in range(len(dataset))}) > 1


def test_transformed_samples_are_float_images_with_boxes_inside_them() -> None:
    dataset = make_dataset(**SMALL)
    for i in range(len(dataset)):
        image, target = dataset[i]
        assert image.dtype == torch.float32 and float(image.min()) >= 0 and float(image.max()) <= 1
        boxes = target["boxes"]
        assert len(boxes) == len(target["labels"]) >= 1
        assert bool((boxes[:, 2] > boxes[:, 0]).all() and (boxes[:, 3] > boxes[:, 1]).all())
        assert float(boxes.min()) >= 0 and float(boxes.max()) <= 64


def test_a_batch_of_three_boxes_each_counts_its_eight_images() -> None:
    """Issue 27's case: every image holds 3 boxes and 3 channels; the batch is 8 samples."""
    dataset = make_dataset(**SMALL, min_boxes=3, max_boxes=3)
    batch = next(iter(DataLoader(dataset, batch_size=8, collate_fn=collate_fn)))
    images, targets = batch
    assert len(images) == len(targets) == 8 and all(len(t["boxes"]) == 3 for t in targets)
    assert count_samples(batch) == 8


def test_the_emulated_model_trains_on_detection_batches() -> None:
    dataset = make_dataset(**SMALL)
    batch = next(iter(DataLoader(dataset, batch_size=4, collate_fn=collate_fn)))
    step = TrainStep(emulated(num_classes=5, step_ms=1), torch.device("cpu"), non_blocking=False)
    before = step.model.head.weight.detach().clone()  # type: ignore[union-attr]
    step(batch)
    assert not torch.equal(before, step.model.head.weight)  # type: ignore[union-attr]


def test_the_references_step_trains_the_detector() -> None:
    torch.manual_seed(0)
    dataset = make_dataset(**SMALL)
    images, targets = next(iter(DataLoader(dataset, batch_size=2, collate_fn=collate_fn)))
    model = make_model(num_classes=5, min_size=64, max_size=64)
    head = model.roi_heads.box_predictor.cls_score.weight
    before = head.detach().clone()
    make_step(model, device=torch.device("cpu"))((images, targets))
    assert not torch.equal(before, head)


def test_bad_arguments_are_refused_with_the_values() -> None:
    with pytest.raises(ValueError, match=r"1 <= min_boxes <= max_boxes .* \(got 4, 64, 3, 2, 5\)"):
        SyntheticDetection(size=4, image_size=64, min_boxes=3, max_boxes=2)
    with pytest.raises(ValueError, match=r"transform_ms must be a number of milliseconds >= 0 \(got 'x'\)"):
        SyntheticDetection(size=4, image_size=64, transform_ms="x")  # type: ignore[arg-type]


# 4 images a batch, 50 ms a sample where a cost is put: 200 ms a batch against a 100 ms step.
# Small images (64 px) keep the real decode and transforms at a few % of the step.
@pytest.mark.serial
@pytest.mark.parametrize(
    ("injected", "named"),
    [("transform_ms: 50", ["transforms"]), ("read_ms: 0", [])],
    ids=["slow-transforms", "nothing"],
)
def test_a_cost_injected_is_named_by_the_ladder_and_batches_count_their_images(
    tmp_path: Path, injected: str, named: list[str]
) -> None:
    verdict, rows = ladder_run(
        "detection-cpu.yaml",
        tmp_path,
        f"workload.dataset_args={{size: 64, image_size: 64, {injected}}}",
        "workload.batch_size=4",
    )
    assert verdict.stages == named, verdict.sentence
    assert (rows["samples"] == 4 * rows["steps"]).all()
