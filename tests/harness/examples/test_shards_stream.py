"""The streaming example: tar shards read with webdataset, split by rank and by worker, decoded
and transformed in the loop; the stream contract (iter_raw, transform_sample)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
import torch
from torch.utils.data import DataLoader, IterableDataset
from torchvision import tv_tensors

from harness.examples.shards_stream import ShardStream, make_dataset
from harness.workloads.make_data import make_webdataset_shards

IMAGES = 24


@pytest.fixture(scope="module")
def shards(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """24 images in 4 shards; each image its own class, so that a label names its sample."""
    root = tmp_path_factory.mktemp("wds")
    make_webdataset_shards(root, images=IMAGES, shards=4, classes=IMAGES, size=32)
    return root


def labels(stream: ShardStream, workers: int) -> list[int]:
    loader = DataLoader(stream, batch_size=5, num_workers=workers)
    return [int(label) for _, batch_labels in loader for label in batch_labels]


def test_the_stream_yields_decoded_then_transformed_samples(shards: Path) -> None:
    stream = make_dataset(root=str(shards), crop=24, shuffle_buffer=0)
    assert isinstance(stream, IterableDataset)
    image, label = next(stream.iter_raw())
    assert isinstance(image, tv_tensors.Image) and image.shape == (3, 32, 32) and image.dtype == torch.uint8
    assert 0 <= label < IMAGES
    out, same = stream.transform_sample((image, label))
    assert out.shape == (3, 24, 24) and out.dtype == torch.float32 and same == label
    samples = list(stream)
    assert len(samples) == IMAGES and all(s[0].shape == (3, 24, 24) for s in samples)


@pytest.mark.parametrize("workers", [0, 2])
def test_one_rank_reads_every_sample_once(shards: Path, workers: int) -> None:
    assert sorted(labels(make_dataset(root=str(shards), crop=24), workers)) == list(range(IMAGES))


def test_two_ranks_of_two_workers_read_every_sample_once(
    shards: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[list[int]] = []
    for rank in (0, 1):
        # webdataset's split_by_node reads RANK and WORLD_SIZE (or torch.distributed's group).
        monkeypatch.setenv("RANK", str(rank))
        monkeypatch.setenv("WORLD_SIZE", "2")
        seen.append(labels(make_dataset(root=str(shards), crop=24), workers=2))
    assert len(seen[0]) == len(seen[1]) == IMAGES // 2  # 4 shards of 6: two per rank
    assert Counter(seen[0] + seen[1]) == Counter(range(IMAGES))


def test_ranks_agree_on_each_epochs_shard_order(shards: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """set_epoch reshuffles the shards; every rank draws the same order, so the epoch is still
    read once across ranks, and rank 0 reads other shards from one epoch to the next."""
    monkeypatch.setenv("WORLD_SIZE", "2")
    first_rank: list[frozenset[int]] = []
    for epoch in range(4):
        seen = []
        for rank in (0, 1):
            monkeypatch.setenv("RANK", str(rank))
            stream = make_dataset(root=str(shards), crop=24, seed=7)
            stream.set_epoch(epoch)
            seen.append(labels(stream, workers=0))
        assert Counter(seen[0] + seen[1]) == Counter(range(IMAGES))
        first_rank.append(frozenset(seen[0]))
    assert len(set(first_rank)) > 1


def test_the_shuffle_buffer_mixes_samples_within_a_worker(shards: Path) -> None:
    in_order = labels(make_dataset(root=str(shards), crop=24, shuffle_buffer=0), workers=0)
    shuffled = labels(make_dataset(root=str(shards), crop=24, shuffle_buffer=12), workers=0)
    assert sorted(shuffled) == sorted(in_order) and shuffled != in_order


def test_a_folder_without_shards_says_how_to_write_them(tmp_path: Path) -> None:
    with pytest.raises(
        FileNotFoundError,
        match=r"no \.tar shard under .* \(write some with: harness make-data .* --webdataset\)",
    ):
        ShardStream(root=str(tmp_path))


def test_the_stream_says_its_shards_without_reading_them(shards: Path) -> None:
    """n_shards, as Hugging Face's IterableDataset says its own: the count a row's 'workers
    delivered no batch' line names (more workers than shards idle the rest)."""
    from harness.config.stream_shards import declared_shards_of

    assert declared_shards_of(make_dataset(root=str(shards))) == 4
