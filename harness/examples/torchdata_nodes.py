"""A torchdata.nodes pipeline, measured through `workload.loader` (an example of a user's loader).

torchdata.nodes (torchdata >= 0.10) replaces the DataLoader by a graph of nodes: a sampler, a
`ParallelMapper` that reads samples in worker *threads* (`method="thread"`, its default), a
`Batcher`, a collate `Mapper`, `PinMemory` and a `Prefetcher`, iterated through a `Loader`. There
is no DataLoader, so the harness cannot build it; this factory builds it with the point's
settings, one node per DataLoader setting:

    num_workers      -> ParallelMapper(num_workers=...) (0: a serial Mapper, as DataLoader's 0)
    prefetch_factor  -> Prefetcher(prefetch_factor=...) (batches held ready)
    pin_memory       -> PinMemory() (only where CUDA is there to pin for)
    drop_last        -> Batcher(drop_last=...)
    rank, world_size -> DistributedSampler(num_replicas=world_size, rank=rank)
    persistent_workers: not taken (torchdata's threads live as long as the Loader's iterator;
                        `harness plan` says so, and the rows record it empty)

The data are synthetic images, `size` samples of `shape`, each read with `read_ms` of sleep (a
stand-in for storage: a sleeping read releases the GIL, as a file read does, so threads overlap
it), decoded with `decode_ms` of CPU work (a busy loop: the CPU a decoder burns, which the
harness counts in `loader_cores` though it runs in threads of the rank's own process), and
collated with `collate_ms` of sleep per batch: the costs the ladder is meant to name.

```yaml
workload:
  loader: harness.examples.torchdata_nodes:make_loader
  loader_args: {read_ms: [0, 20]}          # its own arguments are axes like any other
  model: emulated
  model_args: {step_ms: 50}
  batch_size: 16
loader: {num_workers: [0, 4], prefetch_factor: 2}
rungs: [device_batch, host_batch, full]
```
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch
from torch.utils.data import Dataset, DistributedSampler, default_collate

__all__ = ["SlowImages", "make_loader"]


class SlowImages(Dataset[tuple[torch.Tensor, int]]):
    """`size` seeded random images of `shape`, each read with `read_ms` of sleep."""

    def __init__(
        self, size: int, shape: tuple[int, ...], read_ms: float, decode_ms: float = 0.0, num_classes: int = 10
    ) -> None:
        if size < 1:
            raise ValueError(f"size must be >= 1 (got {size})")
        self.size, self.shape, self.read_s, self.num_classes = size, tuple(shape), read_ms / 1000, num_classes
        self.decode_s = decode_ms / 1000

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        if self.read_s:
            time.sleep(self.read_s)
        if self.decode_s:
            end = time.thread_time() + self.decode_s  # CPU time of this thread: a decoder's work
            while time.thread_time() < end:
                pass
        generator = torch.Generator().manual_seed(index)
        return torch.rand(self.shape, generator=generator), index % self.num_classes


def make_loader(
    *,
    batch_size: int,
    num_workers: int = 0,
    prefetch_factor: int | None = 2,
    pin_memory: bool = False,
    drop_last: bool = False,
    rank: int = 0,
    world_size: int = 1,
    seed: int = 0,
    size: int = 256,
    shape: tuple[int, ...] | list[int] = (3, 16, 16),
    read_ms: float = 0.0,
    decode_ms: float = 0.0,
    collate_ms: float = 0.0,
) -> Any:
    """A torchdata.nodes `Loader` of (images, labels) batches for this rank (the module says how
    each setting maps to a node)."""
    import torchdata.nodes as tn  # the optional extra `libs`: imported when the loader is built

    dataset = SlowImages(size, tuple(shape), read_ms, decode_ms)
    sampler: DistributedSampler[Any] = DistributedSampler(
        dataset, num_replicas=world_size, rank=rank, shuffle=True, seed=seed
    )
    node: Any = tn.SamplerWrapper(sampler)
    read: Callable[[int], Any] = dataset.__getitem__
    if num_workers > 0:
        node = tn.ParallelMapper(node, map_fn=read, num_workers=num_workers, method="thread")
    else:
        node = tn.Mapper(node, map_fn=read)
    node = tn.Batcher(node, batch_size=batch_size, drop_last=drop_last)
    node = tn.Mapper(node, map_fn=_collate(collate_ms / 1000))
    if pin_memory and torch.cuda.is_available():
        node = tn.PinMemory(node)
    if prefetch_factor:
        node = tn.Prefetcher(node, prefetch_factor=prefetch_factor)
    return tn.Loader(node)


def _collate(delay_s: float) -> Callable[[list[Any]], Any]:
    def collate(samples: list[Any]) -> Any:
        if delay_s:
            time.sleep(delay_s)
        return default_collate(samples)

    return collate
