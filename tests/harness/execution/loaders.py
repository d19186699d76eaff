"""What the tests of the ladder's loaders share (test_ladder, test_dataloader, test_loader_stream,
test_sample_cache): the CPU placement, a loader without workers, padded batches, and a staged data
set that counts its raw reads."""

from __future__ import annotations

from typing import Any

import torch

from harness.config.plan import LoaderSettings
from harness.execution import dataloader
from tests.fixtures import pipelines
from tests.fixtures.workloads import AddOne, Sleep, StagedDataset, ToTensor

CPU = dataloader.Placement(device=torch.device("cpu"))
NO_WORKERS = LoaderSettings(
    num_workers=0,
    persistent_workers=False,
    pin_memory=False,
    non_blocking=False,
    prefetch_factor=None,
    drop_last=False,
)
PAD = dataloader.LoaderParts(collate_fn=pipelines.pad_collate())


class Counting(StagedDataset):
    """8 samples of 4 values through ToTensor, AddOne and a sleep of 0: its raw reads counted."""

    def __init__(self) -> None:
        super().__init__(8, 4, 0.0, [ToTensor(), AddOne(), Sleep(0.0)])
        self.raw_loads = 0

    def load_raw(self, index: int) -> Any:
        self.raw_loads += 1
        return super().load_raw(index)
