"""Sharding a stream (an IterableDataset) between the ranks of a point and the workers of each.

A map-style dataset is split between ranks by the harness's DistributedSampler; a stream
cannot be: every rank and every DataLoader worker gets its own copy of the dataset and reads it
from the start, so without sharding each of them yields the same samples (PyTorch's
documentation of IterableDataset says the same). Sharding is the dataset's job. Libraries do it
their own way (a `split_by_node`/`split_by_worker` stage, a `split_dataset_by_node` call);
`shard` is the plain way for a dataset that has none: apply it to the
list of files or shards the stream reads, so that each reader opens only its own.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterable, Iterator
from typing import TypeVar

import torch.distributed as dist
from torch.utils.data import get_worker_info

T = TypeVar("T")


def rank_and_world() -> tuple[int, int]:
    """This process's rank and the number of ranks: torch.distributed's when it is initialised
    (the harness initialises it under DDP before any loader starts; forked workers inherit it),
    else the RANK and WORLD_SIZE of the environment (torchrun's, and the harness's jobs'), else
    one rank."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))


def shard(iterable: Iterable[T]) -> Iterator[T]:
    """This rank's and this worker's share of `iterable`: every (world_size × num_workers)-th
    item from its own offset, so that all readers together see each item exactly once.

    Call it inside `__iter__` (the worker is known only there, from get_worker_info()). With
    fewer items than readers some readers get none: a rank whose stream is empty fails with
    "the stream yields no batch"; give at least one shard per reader."""
    rank, world = rank_and_world()
    info = get_worker_info()
    worker, workers = (info.id, info.num_workers) if info is not None else (0, 1)
    return itertools.islice(iterable, rank * workers + worker, None, world * workers)
