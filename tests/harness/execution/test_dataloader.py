from __future__ import annotations

import dataclasses
from typing import Any

import pytest
import torch
from torch.utils.data import DistributedSampler

from harness.execution import dataloader, loader_stream
from tests.fixtures import pipelines
from tests.fixtures.workloads import plain_dataset
from tests.harness.execution.loaders import CPU, NO_WORKERS, PAD


def _parts(**kwargs: Any) -> dataloader.LoaderParts:
    return dataloader.LoaderParts(**kwargs)


def test_the_users_collate_makes_the_batches() -> None:
    loader = dataloader.make_loader(
        pipelines.tokens(8), NO_WORKERS, 4, CPU, _parts(collate_fn=pipelines.pad_collate(pad=-1))
    )
    batch = next(iter(loader))
    assert set(batch) == {"input_ids", "attention_mask", "labels"}
    assert batch["input_ids"].shape[0] == 4 and (batch["input_ids"] == -1).any()


def test_under_ddp_a_map_style_dataset_gets_a_distributed_sampler_by_default() -> None:
    rank1 = dataloader.Placement(device=torch.device("cpu"), rank=1, world_size=2)
    loader = dataloader.make_loader(plain_dataset(8), NO_WORKERS, 2, rank1)
    assert isinstance(loader.sampler, DistributedSampler) and loader.sampler.rank == 1
    assert len(loader.sampler) == 4


def test_a_users_sampler_replaces_it_and_gets_the_rank_and_world_size() -> None:
    rank1 = dataloader.Placement(device=torch.device("cpu"), rank=1, world_size=2)

    def factory(dataset: Any, where: dataloader.Placement) -> Any:
        return pipelines.every_other(dataset, rank=where.rank, world_size=where.world_size, seed=0)

    loader = dataloader.make_loader(plain_dataset(8), NO_WORKERS, 2, rank1, _parts(sampler=factory))
    assert [t.tolist() for _, t in loader] == [[1, 3], [5, 7]]  # its own order, its own share


def test_a_users_batch_sampler_gets_batch_size_and_drop_last_and_hears_of_each_epoch() -> None:
    made: list[Any] = []

    def factory(dataset: Any, where: dataloader.Placement, batch_size: int, drop_last: bool) -> Any:
        made.append(
            pipelines.buckets(
                dataset, batch_size=batch_size, drop_last=drop_last, rank=0, world_size=1, seed=0
            )
        )
        return made[-1]

    settings = dataclasses.replace(NO_WORKERS, drop_last=True)
    parts = _parts(collate_fn=pipelines.pad_collate(), batch_sampler=factory)
    stream = loader_stream.LoaderStream(dataloader.make_loader(pipelines.tokens(32), settings, 3, CPU, parts))
    assert stream.epoch_steps == 8  # 8 lengths x 4 indices: one full batch of 3 each
    for _ in range(stream.epoch_steps * 2 + 1):
        batch = stream.next()
        assert batch["attention_mask"].all()  # one length per batch: no padding
    assert made[0].epochs == [0, 1, 2]  # each epoch, the first too, as a training loop tells it


def test_loader_parts_refuse_what_they_cannot_honour() -> None:
    with pytest.raises(ValueError, match="give a sampler or a batch_sampler, not both"):
        _parts(sampler=lambda d, w: None, batch_sampler=lambda d, w, b, last: None)
    with pytest.raises(ValueError, match=r"LoaderParts\.extra may not set batch_size, sampler"):
        _parts(extra={"sampler": None, "batch_size": 3, "timeout": 5})
    extra = _parts(extra={"timeout": 7, "num_workers": 5})
    loader = dataloader.make_loader(plain_dataset(8), NO_WORKERS, 4, CPU, extra)
    assert loader.num_workers == 0  # the point's setting wins
    # and without workers no timeout, which torch's single-process iterator refuses (it asserts)
    assert loader.timeout == 0 and len(next(iter(loader))[0]) == 4
    workers = dataclasses.replace(NO_WORKERS, num_workers=1, prefetch_factor=2)
    assert (
        dataloader.make_loader(plain_dataset(8), workers, 4, CPU, extra, timeout_s=300).timeout == 7
    )  # the user's
    assert (
        dataloader.make_loader(plain_dataset(8), workers, 4, CPU, timeout_s=300).timeout == 300
    )  # the spec's


def test_a_users_stream_gets_no_sampler() -> None:
    with pytest.raises(
        ValueError, match=r"tests\.fixtures\.pipelines\.PlainStream is an IterableDataset .* takes no sampler"
    ):
        dataloader.make_loader(
            pipelines.plain_stream(8), NO_WORKERS, 4, CPU, _parts(sampler=lambda d, w: None)
        )


def test_idle_workers_are_counted_by_the_loaders_own_collate() -> None:
    """Each worker's batches are counted where they are made: a map-style dataset keeps both
    workers busy, a stream of 1 shard leaves the second idle; without workers nothing is
    counted. The user's collate still makes the batch."""
    workers = dataclasses.replace(NO_WORKERS, num_workers=2, prefetch_factor=2)
    cases = {
        "map-style": (plain_dataset(32), workers, dataloader.LoaderParts()),
        "1 shard": (pipelines.sharded_stream(1, 16), workers, PAD),
        "no workers": (pipelines.sharded_stream(1, 16), NO_WORKERS, PAD),
    }
    idle = {}
    for name, (dataset, settings, parts) in cases.items():
        stream = loader_stream.LoaderStream(dataloader.make_loader(dataset, settings, 4, CPU, parts))
        batches = [stream.next() for _ in range(4)]
        idle[name] = stream.idle_workers()
        stream.close()
        assert all(len(b[1] if isinstance(b, list) else b["labels"]) == 4 for b in batches)
    assert idle == {"map-style": 0, "1 shard": 1, "no workers": None}
