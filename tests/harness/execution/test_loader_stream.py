from __future__ import annotations

import dataclasses
import time
import types

from harness.execution import dataloader, loader_stream
from tests.fixtures.workloads import plain_dataset
from tests.harness.execution.loaders import CPU, NO_WORKERS


def test_ready_counts_the_batches_the_workers_stocked_and_none_without_workers() -> None:
    """What the warmup drains before the window (loop.py): a real iterator's stock."""
    loader = dataloader.make_loader(
        plain_dataset(32),
        dataclasses.replace(NO_WORKERS, num_workers=2, prefetch_factor=2),
        batch_size=4,
        where=CPU,
    )
    stream = loader_stream.LoaderStream(loader)
    stream.next()  # starts the workers; each batch taken is replaced by a new request
    deadline = time.time() + 60
    while stream.ready() != stream.stock and time.time() < deadline:
        time.sleep(0.05)
    assert stream.ready() == stream.stock == 4  # 2 workers x prefetch_factor 2, all made and waiting
    time.sleep(0.5)
    assert stream.ready() == 4  # and no more: the stock is the bound
    stream.close()
    no_workers = loader_stream.LoaderStream(
        dataloader.make_loader(plain_dataset(8), NO_WORKERS, batch_size=4, where=CPU)
    )
    no_workers.next()
    assert no_workers.ready() is None  # no queue: loop.py then judges by the wait for data


class _Queue:
    def __init__(self, size: int) -> None:
        self.size = size

    def qsize(self) -> int:
        return self.size


def test_ready_counts_both_queues_when_batches_are_pinned() -> None:
    """With pin_memory (a GPU), batches sit in the workers' queue and in the pin thread's; the
    shape of PyTorch's iterator is imitated, as no pin thread runs without an accelerator."""
    stream = loader_stream.LoaderStream(
        dataloader.make_loader(plain_dataset(8), NO_WORKERS, batch_size=4, where=CPU)
    )
    stream.iterator = types.SimpleNamespace(
        _data_queue=_Queue(2), _worker_result_queue=_Queue(3), _task_info={7: (0, "batch"), 8: (1,)}
    )
    assert stream.ready() == 2 + 3 + 1  # and one received out of order; task 8 is still out
    shared = _Queue(2)
    stream.iterator = types.SimpleNamespace(_data_queue=shared, _worker_result_queue=shared, _task_info={})
    assert stream.ready() == 2  # unpinned, the two names are one queue
