from __future__ import annotations

import dataclasses
import time
import types
from pathlib import Path

import pytest
import torch

from harness.config.plan import LoaderSettings
from harness.execution import ladder
from harness.workloads.fake_cifar import FakeCIFAR
from harness.workloads.image_folder import ImageFolderDataset
from harness.workloads.make_data import make_image_folder
from tests.fixtures.workloads import AddOne, Sleep, StagedDataset, ToTensor, plain_dataset

CPU = ladder.Placement(device=torch.device("cpu"))
NO_WORKERS = LoaderSettings(
    num_workers=0,
    persistent_workers=False,
    pin_memory=False,
    non_blocking=False,
    prefetch_factor=None,
    drop_last=False,
)


class Counting(StagedDataset):
    def __init__(self) -> None:
        super().__init__(8, 4, 0.0, [ToTensor(), AddOne(), Sleep(0.0)])
        self.raw_loads = 0

    def load_raw(self, index: int):
        self.raw_loads += 1
        return super().load_raw(index)


def test_processed_sample_is_computed_once_and_served_everywhere() -> None:
    ds = Counting()
    cached = ladder.sample_dataset("processed_sample", ds)
    items = [cached[i] for i in range(len(ds))]
    assert ds.raw_loads == 1
    assert all(torch.equal(x, items[0][0]) for x, _ in items)


def test_raw_sample_loads_once_and_transforms_every_time() -> None:
    ds = Counting()
    calls: list[int] = []
    ds.transform.transforms.append(lambda x: calls.append(1) or x)
    cached = ladder.sample_dataset("raw_sample", ds)
    for i in range(5):
        cached[i]
    assert ds.raw_loads == 1 and len(calls) == 5


def test_transform_cut_runs_the_head_once_and_the_tail_every_time() -> None:
    ds = Counting()  # ToTensor, AddOne, Sleep
    heads: list[int] = []
    tails: list[int] = []
    ds.transform.transforms.insert(1, lambda x: heads.append(1) or x)
    ds.transform.transforms.append(lambda x: tails.append(1) or x)
    cached = ladder.sample_dataset("transform:2", ds)  # ToTensor and the head marker cached
    for i in range(4):
        cached[i]
    assert ds.raw_loads == 1 and len(heads) == 1 and len(tails) == 4


def test_transform_cut_out_of_range_names_the_valid_range() -> None:
    with pytest.raises(ladder.RungUnavailable, match=r"the Compose has 3 transforms, so k must be in 1\.\.2"):
        ladder.sample_dataset("transform:3", Counting())


def test_a_dataset_without_the_split_cannot_serve_sample_rungs() -> None:
    with pytest.raises(
        ladder.RungUnavailable, match=r"rung raw_sample needs a dataset with load_raw\(index\) and transform"
    ):
        ladder.sample_dataset("raw_sample", plain_dataset())
    # processed_sample needs only __getitem__:
    assert len(ladder.sample_dataset("processed_sample", plain_dataset(size=3))) == 3


def test_raw_bytes_needs_a_file_backed_dataset(tmp_path: Path) -> None:
    with pytest.raises(ladder.RungUnavailable, match="rung raw_bytes needs a file-backed dataset"):
        ladder.sample_dataset("raw_bytes", FakeCIFAR(size=2, image_size=8))
    make_image_folder(tmp_path, images=3, classes=1, size=16)
    ds = ImageFolderDataset(root=str(tmp_path), image_size=8, augment=False)
    cached = ladder.sample_dataset("raw_bytes", ds)
    assert torch.equal(cached[0][0], cached[2][0])  # bytes of sample 0, decoded each time
    assert torch.equal(cached[0][0], ds[0][0])


def test_batch_rungs_repeat_one_batch_and_device_batch_is_on_the_device() -> None:
    ds = FakeCIFAR(size=8, image_size=8, resize=None)
    for rung in ("device_batch", "host_batch"):
        stream = ladder.build_stream(rung, ds, NO_WORKERS, 4, CPU)
        assert isinstance(stream, ladder.RepeatStream)
        assert stream.next() is stream.next()
        assert stream.next()[0].shape == (4, 3, 8, 8)


def test_the_loader_stream_runs_epoch_after_epoch() -> None:
    stream = ladder.build_stream("full", FakeCIFAR(size=8, image_size=4, resize=None), NO_WORKERS, 4, CPU)
    assert isinstance(stream, ladder.LoaderStream)
    for _ in range(5):
        stream.next()
    assert stream.epoch == 2
    stream.close()


def test_a_loader_without_a_single_batch_says_why() -> None:
    settings = dataclasses.replace(NO_WORKERS, drop_last=True)
    stream = ladder.build_stream("full", FakeCIFAR(size=3, image_size=4, resize=None), settings, 4, CPU)
    with pytest.raises(
        RuntimeError, match="the loader yields no batch: 3 samples per rank, batch_size 4, drop_last True"
    ):
        stream.next()


def test_transform_names() -> None:
    assert ladder.transform_names(Counting()) == "ToTensor,AddOne,Sleep"
    assert ladder.transform_names(plain_dataset()) == ""


def test_ready_counts_the_batches_the_workers_stocked_and_none_without_workers() -> None:
    """What the warmup drains before the window (loop.py): a real iterator's stock."""
    loader = ladder.make_loader(
        plain_dataset(32),
        dataclasses.replace(NO_WORKERS, num_workers=2, prefetch_factor=2),
        batch_size=4,
        where=CPU,
    )
    stream = ladder.LoaderStream(loader)
    stream.next()  # starts the workers; each batch taken is replaced by a new request
    deadline = time.time() + 60
    while stream.ready() != stream.stock and time.time() < deadline:
        time.sleep(0.05)
    assert stream.ready() == stream.stock == 4  # 2 workers x prefetch_factor 2, all made and waiting
    time.sleep(0.5)
    assert stream.ready() == 4  # and no more: the stock is the bound
    stream.close()
    no_workers = ladder.LoaderStream(
        ladder.make_loader(plain_dataset(8), NO_WORKERS, batch_size=4, where=CPU)
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
    stream = ladder.LoaderStream(ladder.make_loader(plain_dataset(8), NO_WORKERS, batch_size=4, where=CPU))
    stream.iterator = types.SimpleNamespace(
        _data_queue=_Queue(2), _worker_result_queue=_Queue(3), _task_info={7: (0, "batch"), 8: (1,)}
    )
    assert stream.ready() == 2 + 3 + 1  # and one received out of order; task 8 is still out
    shared = _Queue(2)
    stream.iterator = types.SimpleNamespace(_data_queue=shared, _worker_result_queue=shared, _task_info={})
    assert stream.ready() == 2  # unpinned, the two names are one queue
