"""The Accelerate adapter: a prepared loader's BatchSamplerShard is how it shards, and the
probe's rungs shard alike (the probe's own tests, tests/harness/probe/test_recording.py, run the
prepared loaders end to end)."""

from __future__ import annotations

import pytest
from torch.utils.data import BatchSampler, DataLoader, SequentialSampler

from harness.adapters.accelerate import Accelerate


def test_a_loader_not_prepared_has_no_sharding() -> None:
    assert Accelerate().sharding(DataLoader(list(range(8)), batch_size=2)) is None
    assert Accelerate().sharding(object()) is None


def test_a_shard_over_two_processes_is_rebuilt_around_another_batch_sampler() -> None:
    pytest.importorskip("accelerate", reason="the optional extra `libs` (accelerate) is not installed")
    from accelerate.data_loader import BatchSamplerShard

    inner = BatchSampler(SequentialSampler(range(8)), 2, False)
    loader = DataLoader(range(8), batch_sampler=BatchSamplerShard(inner, num_processes=2, process_index=1))
    shard = Accelerate().sharding(loader)
    assert shard is not None
    other = BatchSampler(SequentialSampler(range(12)), 3, False)
    sharded = shard(other)
    assert isinstance(sharded, BatchSamplerShard) and sharded.process_index == 1
    assert list(sharded) == [[3, 4, 5], [9, 10, 11]]
    alone = DataLoader(range(8), batch_sampler=BatchSamplerShard(inner, num_processes=1, process_index=0))
    assert Accelerate().sharding(alone) is None  # one process: nothing to shard
