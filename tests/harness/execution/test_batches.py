from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import pytest
import torch

from harness.execution.batches import BatchError, count_samples, leaves, nbytes, to_device

META = torch.device("meta")  # a second device on a CPU-only machine: moves are visible


class Pair(NamedTuple):
    images: torch.Tensor
    labels: torch.Tensor


@dataclass
class Segment:
    image: torch.Tensor
    mask: torch.Tensor
    name: str = "tile"


class OwnBatch:
    """A user batch type with its own to(), as a Hugging Face BatchEncoding has."""

    def __init__(self, x: torch.Tensor) -> None:
        self.x = x
        self.moved_with: dict[str, Any] = {}

    def to(self, device: torch.device, non_blocking: bool = False) -> OwnBatch:
        moved = OwnBatch(self.x.to(device))
        moved.moved_with = {"device": device, "non_blocking": non_blocking}
        return moved


def test_every_tensor_of_a_nested_batch_moves_and_the_structure_is_kept() -> None:
    batch = {
        "text": {"input_ids": torch.zeros(4, 7, dtype=torch.long), "lengths": [7, 5, 3, 2]},
        "pair": Pair(torch.zeros(4, 3), torch.ones(4)),
        "segment": Segment(torch.zeros(4, 3, 8, 8), torch.zeros(4, 8, 8)),
        "ids": ("a", "b", "c", "d"),
    }
    moved = to_device(batch, META)
    assert moved["text"]["input_ids"].device == META
    assert moved["text"]["lengths"] == [7, 5, 3, 2]  # non-tensor leaves untouched
    assert isinstance(moved["pair"], Pair) and moved["pair"].labels.device == META
    assert isinstance(moved["segment"], Segment) and moved["segment"].mask.device == META
    assert moved["segment"].name == "tile" and moved["ids"] == ("a", "b", "c", "d")
    assert batch["pair"].images.device.type == "cpu"  # the original is left as it was


def test_a_user_batch_type_moves_itself_with_the_points_non_blocking() -> None:
    moved = to_device(OwnBatch(torch.zeros(2)), META, non_blocking=True)
    assert moved.x.device == META and moved.moved_with == {"device": META, "non_blocking": True}


def test_samples_are_the_leading_dimension_the_tensors_share() -> None:
    padded = {
        "input_ids": torch.zeros(6, 31),
        "attention_mask": torch.zeros(6, 31),
        "labels": torch.zeros(6, 31),
    }
    assert count_samples(padded) == 6  # sequences, not tokens
    assert count_samples((torch.zeros(3, 3, 4, 4), torch.zeros(3))) == 3  # a partial last batch
    assert count_samples(Segment(torch.zeros(5, 3, 2, 2), torch.zeros(5, 2, 2))) == 5
    assert count_samples({"x": torch.zeros(2, 4), "scale": torch.tensor(0.5)}) == 2  # scalars ignored


def test_an_ambiguous_count_names_the_tensors_and_the_hook() -> None:
    stacked = (torch.zeros(2, 3, 8, 8), torch.zeros(5, 4))
    with pytest.raises(BatchError, match=r"disagree .*batch\[0\]: 2, batch\[1\]: 5.*workload.batch_samples"):
        count_samples(stacked)
    with pytest.raises(BatchError, match="no tensor of at least one dimension"):
        count_samples({"name": "x"})


def detection_batch(boxes: list[int]) -> tuple[tuple[torch.Tensor, ...], tuple[dict[str, torch.Tensor], ...]]:
    """torchvision's detection reference collate, `tuple(zip(*batch))`: a tuple of per-sample
    images and a tuple of per-sample target dicts."""
    samples = [(torch.zeros(3, 8, 8), {"boxes": torch.zeros(n, 4), "labels": torch.zeros(n)}) for n in boxes]
    return tuple(zip(*samples, strict=True))  # type: ignore[return-value]


def test_a_detection_batch_counts_its_samples_not_their_boxes_or_channels() -> None:
    # Every image holding 3 boxes: every tensor's first dimension is 3 (channels, boxes,
    # labels), and 3 was counted for a batch of 8 (issue 27).
    assert count_samples(detection_batch([3] * 8)) == 8
    assert count_samples(detection_batch([2, 5, 1, 3])) == 4
    # Stacked images beside the per-sample targets (the old test's batch): 2 samples.
    assert (
        count_samples((torch.zeros(2, 3, 8, 8), [{"boxes": torch.zeros(5, 4)}, {"boxes": torch.zeros(1, 4)}]))
        == 2
    )
    # A plain list of per-sample dicts (collate_fn=lambda samples: samples).
    assert count_samples([{"x": torch.zeros(4)} for _ in range(5)]) == 5
    # Lists of per-sample dicts of different lengths: refused, naming them.
    with pytest.raises(
        BatchError, match=r"lists of per-sample dicts disagree .*batch\[0\]: 2, batch\[1\]: 3.*batch_samples"
    ):
        count_samples(([{"a": 1}, {"a": 2}], [{"b": 1}, {"b": 2}, {"b": 3}]))


def test_leaves_are_named_by_their_path() -> None:
    assert [path for path, _ in leaves({"a": [torch.zeros(1), torch.zeros(1)]})] == [
        "batch['a'][0]",
        "batch['a'][1]",
    ]


def test_nbytes_sizes_a_sample_as_memory_holds_it() -> None:
    import numpy as np
    from PIL import Image

    @dataclass
    class Pair:
        image: torch.Tensor
        label: int

    image = torch.zeros(3, 32, 32, dtype=torch.uint8)
    assert nbytes(image) == 3 * 32 * 32
    assert nbytes(torch.zeros(4, dtype=torch.float32)) == 16
    assert nbytes((np.zeros((8, 8), dtype=np.float64), 3)) == 8 * 8 * 8 + 8
    assert nbytes({"jpeg": b"\xff\xd8" * 50, "text": "cat"}) == 100 + 3
    assert nbytes(Image.new("RGB", (20, 10))) == 20 * 10 * 3  # decoded pixels, not the file
    assert nbytes(Pair(image, 1)) == 3 * 32 * 32 + 8
    assert nbytes([image, object()]) is None  # a part whose size cannot be told: no figure
