from __future__ import annotations

import pytest
import torch
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

from harness.workloads import streams


class Indices(IterableDataset[tuple[int, int]]):
    """Yields (the worker that read it, item) for this rank's and worker's share of range(size)."""

    def __init__(self, size: int) -> None:
        self.size = size

    def __iter__(self):  # type: ignore[no-untyped-def]
        info = get_worker_info()
        worker = info.id if info is not None else 0
        return ((worker, item) for item in streams.shard(range(self.size)))


def read(size: int, workers: int) -> list[int]:
    return [item for _, item in read_by_worker(size, workers)]


def read_by_worker(size: int, workers: int) -> list[tuple[int, int]]:
    loader = DataLoader(Indices(size), batch_size=None, num_workers=workers)
    return [(int(worker), int(item)) for worker, item in loader]


def test_the_workers_of_a_rank_read_each_item_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RANK", raising=False)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert read(10, workers=0) == list(range(10))
    together = read_by_worker(10, workers=2)
    assert sorted(item for _, item in together) == list(range(10))
    assert {item for worker, item in together if worker == 1} == {1, 3, 5, 7, 9}


def test_the_ranks_split_the_stream_between_them(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rank and world size from the environment where torch.distributed is not initialised
    (torchrun's RANK and WORLD_SIZE); each rank's workers then split that rank's share."""
    assert not torch.distributed.is_initialized()
    shares = []
    for rank in (0, 1):
        monkeypatch.setenv("RANK", str(rank))
        monkeypatch.setenv("WORLD_SIZE", "2")
        assert streams.rank_and_world() == (rank, 2)
        shares.append(sorted(read(12, workers=2)))
    assert shares[0] == [0, 1, 4, 5, 8, 9] and shares[1] == [2, 3, 6, 7, 10, 11]
