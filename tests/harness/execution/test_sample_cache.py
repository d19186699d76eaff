from __future__ import annotations

import pickle
from pathlib import Path

import pytest
import torch
from torch.utils.data import DataLoader

from harness.execution import sample_cache
from harness.workloads.fake_cifar import FakeCIFAR
from harness.workloads.image_folder import ImageFolderDataset
from harness.workloads.make_data import make_image_folder
from tests.fixtures import pipelines
from tests.fixtures.pipelines import FreeDetection, keep_samples
from tests.fixtures.workloads import plain_dataset
from tests.harness.execution.loaders import Counting


def test_processed_sample_is_computed_once_and_served_everywhere() -> None:
    ds = Counting()
    cached = sample_cache.sample_dataset("processed_sample", ds)
    items = [cached[i] for i in range(len(ds))]
    assert ds.raw_loads == 1
    assert all(torch.equal(x, items[0][0]) for x, _ in items)


def test_raw_sample_loads_once_and_transforms_every_time() -> None:
    ds = Counting()
    calls: list[int] = []
    ds.transform.transforms.append(lambda x: calls.append(1) or x)
    cached = sample_cache.sample_dataset("raw_sample", ds)
    for i in range(5):
        cached[i]
    assert ds.raw_loads == 1 and len(calls) == 5


def test_a_subset_is_cut_as_the_data_set_it_selects_from() -> None:
    # random_split's Subset, what Lightning's DataModules train on: raw_sample and transform:<k>
    # were skipped ("torch.utils.data.dataset.Subset has not" load_raw).
    ds = Counting()
    train, _ = torch.utils.data.random_split(ds, [6, 2], generator=torch.Generator().manual_seed(0))
    cached = sample_cache.sample_dataset("raw_sample", train)
    assert len(cached) == 6
    for i in range(6):
        cached[i]
    assert ds.raw_loads == 1
    assert len(sample_cache.sample_dataset("transform:1", torch.utils.data.Subset(train, [0, 1]))) == 2


def test_transform_cut_runs_the_head_once_and_the_tail_every_time() -> None:
    ds = Counting()  # ToTensor, AddOne, Sleep
    heads: list[int] = []
    tails: list[int] = []
    ds.transform.transforms.insert(1, lambda x: heads.append(1) or x)
    ds.transform.transforms.append(lambda x: tails.append(1) or x)
    cached = sample_cache.sample_dataset("transform:2", ds)  # ToTensor and the head marker cached
    for i in range(4):
        cached[i]
    assert ds.raw_loads == 1 and len(heads) == 1 and len(tails) == 4


def test_transform_cut_out_of_range_names_the_valid_range() -> None:
    with pytest.raises(
        sample_cache.RungUnavailable, match=r"the Compose has 3 transforms, so k must be in 1\.\.2"
    ):
        sample_cache.sample_dataset("transform:3", Counting())


def test_a_dataset_without_the_split_cannot_serve_sample_rungs() -> None:
    with pytest.raises(
        sample_cache.RungUnavailable,
        match=r"rung raw_sample needs a dataset with load_raw\(index\) and transform",
    ):
        sample_cache.sample_dataset("raw_sample", plain_dataset())
    # processed_sample needs only __getitem__:
    assert len(sample_cache.sample_dataset("processed_sample", plain_dataset(size=3))) == 3


def test_raw_bytes_needs_a_file_backed_dataset(tmp_path: Path) -> None:
    with pytest.raises(sample_cache.RungUnavailable, match="rung raw_bytes needs a file-backed dataset"):
        sample_cache.sample_dataset("raw_bytes", FakeCIFAR(size=2, image_size=8))
    make_image_folder(tmp_path, images=3, classes=1, size=16)
    ds = ImageFolderDataset(root=str(tmp_path), image_size=8, augment=False)
    cached = sample_cache.sample_dataset("raw_bytes", ds)
    assert torch.equal(cached[0][0], cached[2][0])  # bytes of sample 0, decoded each time
    assert torch.equal(cached[0][0], ds[0][0])


def test_transform_names() -> None:
    assert sample_cache.transform_names(Counting()) == "ToTensor,AddOne,Sleep"
    assert sample_cache.transform_names(plain_dataset()) == ""


def test_a_stream_with_the_split_serves_raw_sample_and_one_without_is_skipped_with_why() -> None:
    calls: list[str] = []
    stream = pipelines.token_stream(8)
    raw_iter, transform = stream.iter_raw, stream.transform_sample
    stream.iter_raw = lambda: (calls.append("raw") or x for x in raw_iter())  # type: ignore[method-assign]
    stream.transform_sample = lambda raw: calls.append("transform") or transform(raw)  # type: ignore[method-assign]
    cached = iter(sample_cache.sample_dataset("raw_sample", stream))
    samples = [next(cached) for _ in range(5)]
    assert calls.count("raw") == 1 and calls.count("transform") == 5
    assert all(torch.equal(s["input_ids"], samples[0]["input_ids"]) for s in samples)
    with pytest.raises(
        sample_cache.RungUnavailable,
        match=r"rung raw_sample needs a stream with iter_raw\(\) and transform_sample\(raw\) .*; "
        r"tests\.fixtures\.pipelines\.PlainStream has not",
    ):
        sample_cache.sample_dataset("raw_sample", pipelines.plain_stream())
    with pytest.raises(
        sample_cache.RungUnavailable, match=r"rung raw_bytes needs a file-backed dataset .*TokenStream"
    ):
        sample_cache.sample_dataset("raw_bytes", pipelines.token_stream())


def test_the_whole_sample_form_serves_raw_sample_and_the_transform_cuts() -> None:
    ds = pipelines.paired(8)
    cached = sample_cache.sample_dataset("raw_sample", ds)
    samples = [cached[i] for i in range(4)]
    assert ds.raw_loads == 1 and set(samples[0]) == {"image", "mask"}
    assert all(torch.equal(s["image"], samples[0]["image"]) for s in samples)
    tail: list[int] = []
    ds.transform_sample.transforms.append(lambda sample: tail.append(1) or sample)
    cut = sample_cache.sample_dataset("transform:1", ds)  # ToTensors cached, the rest every time
    assert isinstance(cut[0]["image"], torch.Tensor) and isinstance(cut[1]["mask"], torch.Tensor)
    assert ds.raw_loads == 2 and len(tail) == 2
    assert sample_cache.transform_names(ds) == "ToTensors,SleepSample,function"


@pytest.mark.parametrize("rung", ["processed_sample", "transform:1", "raw_sample", "raw_bytes"])
def test_every_cached_stage_pickles_as_a_spawned_worker_receives_it(rung: str, tmp_path: Path) -> None:
    """A spawned (or forkserver) worker gets the rung's dataset pickled: the stages were closures
    (`Can't pickle local object 'sample_dataset.<locals>.<lambda>'`), so every sample rung
    failed where the workers are not forked (a script's multiprocessing_context="spawn";
    Python 3.14's default on Linux). The copy serves a sample of the stage's kind."""
    make_image_folder(tmp_path, images=4, size=32)
    pickled = 0
    for dataset in (
        FakeCIFAR(size=8),
        ImageFolderDataset(root=str(tmp_path)),
        pipelines.paired(8),
        pipelines.token_stream(8),
    ):
        try:
            stage = sample_cache.sample_dataset(rung, dataset)
        except sample_cache.RungUnavailable:
            continue  # a stage this dataset has not: the other tests say why
        copy = pickle.loads(pickle.dumps(stage))
        if isinstance(stage, torch.utils.data.IterableDataset):
            original, copied = next(iter(stage)), next(iter(copy))
        else:
            original, copied = stage[0], copy[0]
        assert type(copied) is type(original)
        pickled += 1
    assert pickled >= 1  # every rung here has a dataset that serves it


def test_a_cached_stage_serves_its_value_as_distinct_objects_in_turn() -> None:
    """A batch of a cached rung holds distinct samples, as a real read makes them: served as one
    object, a per-sample collate sent it between processes once a batch (issue 41)."""
    stage = sample_cache.sample_dataset("processed_sample", FreeDetection(size=10), distinct=4)
    served = [stage[i] for i in range(5)]
    assert len({id(image) for image, _ in served[:4]}) == 4
    assert served[4] is served[0]  # in turn: the copies are made once, not per item
    assert all(torch.equal(image, served[0][0]) for image, _ in served)
    # Through a DataLoader with torchvision's detection collate: 4 distinct images a batch.
    (images, targets) = next(iter(DataLoader(stage, batch_size=4, collate_fn=keep_samples())))
    assert len({image.data_ptr() for image in images}) == 4
    assert len({id(target["boxes"]) for target in targets}) == 4
