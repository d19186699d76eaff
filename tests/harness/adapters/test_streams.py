"""The LitData and Mosaic adapters: a streaming data set's len() is this rank's share, so its
samples are that times the ranks (the figure runner.dataset_samples gave them before the
adapters: the same, asked of the library's adapter first)."""

from __future__ import annotations

from typing import Any

import pytest
from torch.utils.data import IterableDataset

from harness.adapters.litdata import LitData
from harness.adapters.mosaic import Mosaic
from harness.execution.runner import dataset_samples


def stream_of(module: str, length: int | None) -> Any:
    class Stream(IterableDataset[int]):
        def __iter__(self) -> Any:
            return iter(range(length or 0))

        def __len__(self) -> int:
            if length is None:
                raise TypeError("no length")
            return length

    Stream.__module__ = module
    return Stream()


@pytest.mark.parametrize(
    ("adapter", "module"), [(LitData(), "litdata.streaming.dataset"), (Mosaic(), "streaming.base.dataset")]
)
def test_a_streaming_datasets_samples_are_its_share_times_the_ranks(adapter: Any, module: str) -> None:
    mine = stream_of(module, 5)
    assert adapter.recognises(mine)
    assert adapter.length(mine, 4) == 20 == dataset_samples(mine, 4)
    assert adapter.length(stream_of(module, None), 4) is None
    assert adapter.length(stream_of("elsewhere", 5), 4) is None
    assert dataset_samples(stream_of("elsewhere", 5), 4) == 20  # any stream with a length: the same rule
