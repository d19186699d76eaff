from __future__ import annotations

import dataclasses
import pickle
import textwrap
import time
import types
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.utils.data import DataLoader, DistributedSampler

from analysis.ladder.verdict import Verdict, ladder_verdicts
from analysis.load import load_results
from harness.config.plan import LoaderSettings, expand
from harness.config.spec import parse_spec
from harness.execution import ladder
from harness.execution.loop import timed_loop
from harness.execution.runner import run_point
from harness.workloads.fake_cifar import FakeCIFAR
from harness.workloads.image_folder import ImageFolderDataset
from harness.workloads.make_data import make_image_folder
from harness_schema import rows as results
from tests.fixtures import pipelines
from tests.fixtures.pipelines import FreeDetection, keep_samples
from tests.fixtures.workloads import AddOne, Sleep, StagedDataset, ToTensor, plain_dataset

CPU = ladder.Placement(device=torch.device("cpu"))
P = "tests.fixtures.pipelines"
PAD = ladder.LoaderParts(collate_fn=pipelines.pad_collate())
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


def test_a_subset_is_cut_as_the_data_set_it_selects_from() -> None:
    # random_split's Subset, what Lightning's DataModules train on: raw_sample and transform:<k>
    # were skipped ("torch.utils.data.dataset.Subset has not" load_raw).
    ds = Counting()
    train, _ = torch.utils.data.random_split(ds, [6, 2], generator=torch.Generator().manual_seed(0))
    cached = ladder.sample_dataset("raw_sample", train)
    assert len(cached) == 6
    for i in range(6):
        cached[i]
    assert ds.raw_loads == 1
    assert len(ladder.sample_dataset("transform:1", torch.utils.data.Subset(train, [0, 1]))) == 2


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


# --- the user's collate, sampler and batch sampler (LoaderParts) ------------------------------


def _parts(**kwargs: Any) -> ladder.LoaderParts:
    return ladder.LoaderParts(**kwargs)


def test_the_users_collate_makes_the_batches() -> None:
    loader = ladder.make_loader(
        pipelines.tokens(8), NO_WORKERS, 4, CPU, _parts(collate_fn=pipelines.pad_collate(pad=-1))
    )
    batch = next(iter(loader))
    assert set(batch) == {"input_ids", "attention_mask", "labels"}
    assert batch["input_ids"].shape[0] == 4 and (batch["input_ids"] == -1).any()


def test_under_ddp_a_map_style_dataset_gets_a_distributed_sampler_by_default() -> None:
    rank1 = ladder.Placement(device=torch.device("cpu"), rank=1, world_size=2)
    loader = ladder.make_loader(plain_dataset(8), NO_WORKERS, 2, rank1)
    assert isinstance(loader.sampler, DistributedSampler) and loader.sampler.rank == 1
    assert len(loader.sampler) == 4


def test_a_users_sampler_replaces_it_and_gets_the_rank_and_world_size() -> None:
    rank1 = ladder.Placement(device=torch.device("cpu"), rank=1, world_size=2)

    def factory(dataset: Any, where: ladder.Placement) -> Any:
        return pipelines.every_other(dataset, rank=where.rank, world_size=where.world_size, seed=0)

    loader = ladder.make_loader(plain_dataset(8), NO_WORKERS, 2, rank1, _parts(sampler=factory))
    assert [t.tolist() for _, t in loader] == [[1, 3], [5, 7]]  # its own order, its own share


def test_a_users_batch_sampler_gets_batch_size_and_drop_last_and_hears_of_each_epoch() -> None:
    made: list[Any] = []

    def factory(dataset: Any, where: ladder.Placement, batch_size: int, drop_last: bool) -> Any:
        made.append(
            pipelines.buckets(
                dataset, batch_size=batch_size, drop_last=drop_last, rank=0, world_size=1, seed=0
            )
        )
        return made[-1]

    settings = dataclasses.replace(NO_WORKERS, drop_last=True)
    parts = _parts(collate_fn=pipelines.pad_collate(), batch_sampler=factory)
    stream = ladder.LoaderStream(ladder.make_loader(pipelines.tokens(32), settings, 3, CPU, parts))
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
    loader = ladder.make_loader(plain_dataset(8), NO_WORKERS, 4, CPU, extra)
    assert loader.num_workers == 0  # the point's setting wins
    # and without workers no timeout, which torch's single-process iterator refuses (it asserts)
    assert loader.timeout == 0 and len(next(iter(loader))[0]) == 4
    workers = dataclasses.replace(NO_WORKERS, num_workers=1, prefetch_factor=2)
    assert (
        ladder.make_loader(plain_dataset(8), workers, 4, CPU, extra, timeout_s=300).timeout == 7
    )  # the user's
    assert ladder.make_loader(plain_dataset(8), workers, 4, CPU, timeout_s=300).timeout == 300  # the spec's


# --- streams (IterableDataset) and the whole-sample form ---------------------------------------


def test_a_stream_runs_epoch_after_epoch_without_a_length() -> None:
    stream = ladder.build_stream("full", pipelines.plain_stream(8), NO_WORKERS, 4, CPU, PAD)
    assert isinstance(stream, ladder.LoaderStream) and stream.epoch_steps is None
    seen = [stream.next()["input_ids"].shape[0] for _ in range(5)]
    assert seen == [4] * 5 and stream.epoch == 2  # 8 samples: an epoch every 2 batches
    stream.close()


def test_a_stream_that_yields_no_batch_says_so() -> None:
    settings = dataclasses.replace(NO_WORKERS, drop_last=True)
    stream = ladder.build_stream("full", pipelines.plain_stream(3), settings, 4, CPU, PAD)
    with pytest.raises(
        RuntimeError,
        match=r"the stream yields no batch: tests\.fixtures\.pipelines\.PlainStream ended before a first batch \(batch_size 4, "
        r"drop_last True\) on this rank",
    ):
        stream.next()


def test_a_users_stream_gets_no_sampler() -> None:
    with pytest.raises(
        ValueError, match=r"tests\.fixtures\.pipelines\.PlainStream is an IterableDataset .* takes no sampler"
    ):
        ladder.make_loader(pipelines.plain_stream(8), NO_WORKERS, 4, CPU, _parts(sampler=lambda d, w: None))


def test_the_batch_rungs_and_processed_sample_work_on_any_stream() -> None:
    for rung in ("device_batch", "host_batch"):
        stream = ladder.build_stream(rung, pipelines.plain_stream(8), NO_WORKERS, 4, CPU, PAD)
        assert isinstance(stream, ladder.RepeatStream) and stream.next()["input_ids"].shape[0] == 4
    cached = ladder.build_stream("processed_sample", pipelines.plain_stream(8), NO_WORKERS, 4, CPU, PAD)
    assert cached.epoch_steps is None
    batches = [cached.next() for _ in range(5)]  # endless: past the stream's 2 batches
    assert all(torch.equal(b["input_ids"], batches[0]["input_ids"]) for b in batches)
    assert cached.epoch == 0
    cached.close()


def test_a_stream_with_the_split_serves_raw_sample_and_one_without_is_skipped_with_why() -> None:
    calls: list[str] = []
    stream = pipelines.token_stream(8)
    raw_iter, transform = stream.iter_raw, stream.transform_sample
    stream.iter_raw = lambda: (calls.append("raw") or x for x in raw_iter())  # type: ignore[method-assign]
    stream.transform_sample = lambda raw: calls.append("transform") or transform(raw)  # type: ignore[method-assign]
    cached = iter(ladder.sample_dataset("raw_sample", stream))
    samples = [next(cached) for _ in range(5)]
    assert calls.count("raw") == 1 and calls.count("transform") == 5
    assert all(torch.equal(s["input_ids"], samples[0]["input_ids"]) for s in samples)
    with pytest.raises(
        ladder.RungUnavailable,
        match=r"rung raw_sample needs a stream with iter_raw\(\) and transform_sample\(raw\) .*; "
        r"tests\.fixtures\.pipelines\.PlainStream has not",
    ):
        ladder.sample_dataset("raw_sample", pipelines.plain_stream())
    with pytest.raises(
        ladder.RungUnavailable, match=r"rung raw_bytes needs a file-backed dataset .*TokenStream"
    ):
        ladder.sample_dataset("raw_bytes", pipelines.token_stream())


def test_the_whole_sample_form_serves_raw_sample_and_the_transform_cuts() -> None:
    ds = pipelines.paired(8)
    cached = ladder.sample_dataset("raw_sample", ds)
    samples = [cached[i] for i in range(4)]
    assert ds.raw_loads == 1 and set(samples[0]) == {"image", "mask"}
    assert all(torch.equal(s["image"], samples[0]["image"]) for s in samples)
    tail: list[int] = []
    ds.transform_sample.transforms.append(lambda sample: tail.append(1) or sample)
    cut = ladder.sample_dataset("transform:1", ds)  # ToTensors cached, the rest every time
    assert isinstance(cut[0]["image"], torch.Tensor) and isinstance(cut[1]["mask"], torch.Tensor)
    assert ds.raw_loads == 2 and len(tail) == 2
    assert ladder.transform_names(ds) == "ToTensors,SleepSample,function"


def test_the_stock_rule_holds_for_a_stream() -> None:
    """loop.py's rule on a real stream with 2 workers: each makes a batch in 4 × 20 ms (one
    every 40 ms together) against a 20 ms step, and fills its stock (2 × 4 batches) during a
    slow first step; the warmup goes on until no batch is left ready."""
    loader = dataclasses.replace(NO_WORKERS, num_workers=2, prefetch_factor=4)
    stream = ladder.build_stream("full", pipelines.token_stream(4096, read_delay=0.02), loader, 4, CPU, PAD)
    ready_at_start: list[int | None] = []
    calls = [0]

    def step(batch: Any) -> None:
        calls[0] += 1
        time.sleep(0.4 if calls[0] == 1 else 0.02)

    try:
        times = timed_loop(
            stream,
            step,
            warmup_steps=1,
            steps=10,
            stock=stream.stock,
            sync=lambda: None,
            mark=lambda region: ready_at_start.append(stream.ready()) if region == "measure" else None,
        )
    finally:
        stream.close()
    assert stream.stock == 8 and ready_at_start == [0]
    assert times.warmup_steps >= 8 and times.samples == 10 * 4


# --- a user's pipeline measured end to end (run_point, inline) and the ladder's verdict ---------
# Known costs are injected as sleeps: a slow padding collate (per batch), a slow stream read
# (per sample). The verdict must name the stage the cost was injected in, and nothing else.


def run_user_pipeline(
    tmp_path: Path, workload: str, rungs: str, *, repeats: int = 3
) -> tuple[Verdict, list[dict[str, str]]]:
    spec = parse_spec(
        f"""\
name: user
workload:
  loss: {P}:output_loss
  batch_size: 2
  device: cpu
{textwrap.indent(textwrap.dedent(workload), "  ")}
measure: {{warmup_steps: 1, steps: 4, repeats: {repeats}}}
rungs: {rungs}
"""
    )
    (point,) = expand(spec).points
    outcome = run_point(point, tmp_path)
    rows = results.read_rows(tmp_path / "points" / point.id / "rank0.csv")
    assert outcome.failed == 0 and outcome.skipped == 0, [r["error"] for r in rows]
    (verdict,) = ladder_verdicts(load_results([tmp_path]).rows)
    return verdict, rows


@pytest.mark.serial
def test_a_slow_collate_of_dict_batches_is_named_collation(tmp_path: Path) -> None:
    """Padding costs 100 ms a batch against a 20 ms step: caching the processed sample keeps
    the collate, so it is the drop from host_batch; reading is free and is not named."""
    verdict, rows = run_user_pipeline(
        tmp_path,
        f"""\
        dataset: {P}:tokens
        collate: {P}:pad_collate
        collate_args: {{delay: 0.1}}
        model: {P}:tiny_lm
        model_args: {{delay: 0.02}}
        """,
        "[host_batch, processed_sample, full]",
    )
    assert verdict.stages == ["collation and worker IPC"], verdict.sentence
    assert {int(r["samples"]) for r in rows} == {4 * 2}  # counted from the dict batch
    assert {r["collate"] for r in rows} == {f"{P}:pad_collate"}


@pytest.mark.serial
def test_a_slow_stream_read_is_named_raw_data_loading(tmp_path: Path) -> None:
    """A stream whose read costs 50 ms a sample (100 ms a batch of 2), transformed for free,
    against a 20 ms step: the drop from raw_sample (the raw sample cached, via iter_raw) to
    full is the read; the cheap collate is not named."""
    verdict, rows = run_user_pipeline(
        tmp_path,
        f"""\
        dataset: {P}:token_stream
        dataset_args: {{size: 4096, read_delay: 0.05}}
        collate: {P}:pad_collate
        model: {P}:tiny_lm
        model_args: {{delay: 0.02}}
        """,
        "[host_batch, processed_sample, raw_sample, full]",
    )
    assert verdict.stages == ["raw data loading"], verdict.sentence
    assert {r["epoch_steps"] for r in rows} == {""}  # a stream does not say its length


@pytest.mark.serial
def test_a_slow_paired_transform_is_named_transforms(tmp_path: Path) -> None:
    """The whole-sample form (load_raw, transform_sample: image and mask together), whose
    transform costs 50 ms a sample (100 ms a batch of 2) against a 20 ms step: the drop from
    processed_sample to raw_sample is the transforms; reading is free and is not named."""
    verdict, rows = run_user_pipeline(
        tmp_path,
        f"""\
        dataset: {P}:paired
        dataset_args: {{size: 64, transform_delay: 0.05}}
        model: {P}:tiny_segmenter
        model_args: {{delay: 0.02}}
        """,
        "[host_batch, processed_sample, raw_sample, full]",
    )
    assert verdict.stages == ["transforms"], verdict.sentence
    assert {r["transform_names"] for r in rows} == {"ToTensors,SleepSample"}


def test_a_cheap_user_pipeline_names_nothing(tmp_path: Path) -> None:
    """The same stream and collate with nothing injected, against a 150 ms step."""
    verdict, _ = run_user_pipeline(
        tmp_path,
        f"""\
        dataset: {P}:token_stream
        dataset_args: {{size: 4096}}
        collate: {P}:pad_collate
        model: {P}:tiny_lm
        model_args: {{delay: 0.15}}
        """,
        "[host_batch, processed_sample, raw_sample, full]",
        repeats=2,
    )
    # Whether full is called within the noise of the bound depends on the machine's load
    # (the step shares its cores here); that no stage is named does not.
    assert verdict.stages == [] and verdict.costliest is None, verdict.sentence


def test_a_runtime_mistake_is_a_failed_row_that_says_what_to_change(tmp_path: Path) -> None:
    """A loss left per sample fails each rung with what to change; the Hugging Face-shaped model
    with no loss given trains on its own output's loss (it failed with 'give workload.loss'
    before the model's own loss became the default)."""
    text = (
        f"name: user\nworkload: {{dataset: '{P}:tokens', model: '{P}:tiny_lm', collate: '{P}:pad_collate', "
        "LOSS batch_size: 2, device: cpu}\nmeasure: {warmup_steps: 1, steps: 2}\nrungs: [host_batch, full]\n"
    )
    (mistaken,) = expand(parse_spec(text.replace("LOSS", f"loss: '{P}:per_sample_loss',"))).points
    outcome = run_point(mistaken, tmp_path / "mistaken")
    assert (outcome.ok, outcome.failed) == (0, 2)  # and the sweep goes on: each rung has its row
    assert all(
        row.error
        == f"StepError: loss '{P}:per_sample_loss' returned a tensor of shape (2,), not a scalar tensor: "
        "reduce it in loss_fn(output, batch) (e.g. .mean())"
        for row in outcome.rows
    )
    (own,) = expand(parse_spec(text.replace("LOSS", ""))).points
    assert (run_point(own, tmp_path / "own").ok, len(own.rungs)) == (2, 2)


def test_a_cached_rungs_sampler_is_built_on_the_users_dataset() -> None:
    """A bucketing sampler reads the user's dataset (its lengths, its load_raw): on a cached
    rung it still gets that dataset, not the cache that stands in for it."""
    built_on: list[str] = []

    def factory(dataset: Any, where: ladder.Placement, batch_size: int, drop_last: bool) -> Any:
        built_on.append(type(dataset).__name__)
        return [[i, i + 1] for i in range(0, len(dataset), 2)]

    parts = ladder.LoaderParts(batch_sampler=factory)
    for rung in ("processed_sample", "raw_sample", "transform:1", "full"):
        stream = ladder.build_stream(rung, pipelines.paired(8), NO_WORKERS, 2, CPU, parts)
        assert stream.next()["image"].shape == (2, 4, 4)
        stream.close()
    assert built_on == ["Paired"] * 4


def test_the_cached_value_of_a_sample_rung_is_sized_where_it_is_made() -> None:
    """By the reader that produced it (a worker, or the rank without workers), so that the
    rank's own process never reads the dataset to size it: with a worker, this process loads
    no raw sample at all."""
    workers = dataclasses.replace(NO_WORKERS, num_workers=1, prefetch_factor=2)
    value = 3 * 4 * 4 * 4 + 8  # load_raw: a 3×4×4 float32 array and an int label; then a tensor
    for settings in (NO_WORKERS, workers):
        dataset = Counting()
        sizes = {}
        for rung in ("host_batch", "processed_sample", "raw_sample", "full"):
            stream = ladder.build_stream(rung, dataset, settings, 4, CPU)
            stream.next()
            sizes[rung] = ladder.cached_value_bytes(stream)
            stream.close()
        assert sizes == {"host_batch": None, "processed_sample": value, "raw_sample": value, "full": None}
        assert (dataset.raw_loads > 0) == (settings.num_workers == 0)
    # A stream's cached value too, by the worker that made it (the first sample: input_ids of
    # 3 int64 and a label); whether the cache is sized is the stream's length's question.
    stream = ladder.build_stream("processed_sample", pipelines.plain_stream(8), workers, 4, CPU, PAD)
    stream.next()
    assert ladder.cached_value_bytes(stream) == 3 * 8 + 8
    stream.close()


def test_idle_workers_are_counted_by_the_loaders_own_collate() -> None:
    """Each worker's batches are counted where they are made: a map-style dataset keeps both
    workers busy, a stream of 1 shard leaves the second idle; without workers nothing is
    counted. The user's collate still makes the batch."""
    workers = dataclasses.replace(NO_WORKERS, num_workers=2, prefetch_factor=2)
    cases = {
        "map-style": (plain_dataset(32), workers, ladder.LoaderParts()),
        "1 shard": (pipelines.sharded_stream(1, 16), workers, PAD),
        "no workers": (pipelines.sharded_stream(1, 16), NO_WORKERS, PAD),
    }
    idle = {}
    for name, (dataset, settings, parts) in cases.items():
        stream = ladder.LoaderStream(ladder.make_loader(dataset, settings, 4, CPU, parts))
        batches = [stream.next() for _ in range(4)]
        idle[name] = stream.idle_workers()
        stream.close()
        assert all(len(b[1] if isinstance(b, list) else b["labels"]) == 4 for b in batches)
    assert idle == {"map-style": 0, "1 shard": 1, "no workers": None}


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
            stage = ladder.sample_dataset(rung, dataset)
        except ladder.RungUnavailable:
            continue  # a stage this dataset has not: the other tests say why
        copy = pickle.loads(pickle.dumps(stage))
        if isinstance(stage, torch.utils.data.IterableDataset):
            original, copied = next(iter(stage)), next(iter(copy))
        else:
            original, copied = stage[0], copy[0]
        assert type(copied) is type(original)
        pickled += 1
    assert pickled >= 1  # every rung here has a dataset that serves it


@pytest.mark.serial
@pytest.mark.parametrize(("delay", "named"), [(0.05, ["transforms"]), (0.0, [])], ids=["slow", "nothing"])
def test_a_slow_cifar10_transform_is_named_and_nothing_where_none_is(
    tmp_path: Path, delay: float, named: list[str]
) -> None:
    """50 ms of sleep in CIFAR10's Compose a sample (100 ms a batch of 2) against a 50 ms
    emulated step: the drop from processed_sample to raw_sample is the transforms, and the
    in-memory read is not named; with nothing injected, nothing is (the real transforms of two
    32×32 images take under 1 ms: under 2 % of the step even on a machine three times busier)."""
    spec = parse_spec(
        f"name: cifar\nworkload: {{dataset: {P}:cifar10, dataset_args: {{size: 64, transform_delay: {delay}}}, "
        "model: emulated, model_args: {step_ms: 50}, batch_size: 2, device: cpu}\n"
        "measure: {warmup_steps: 1, steps: 6, repeats: 2}\n"
        "rungs: [host_batch, processed_sample, raw_sample, full]\n"
    )
    (point,) = expand(spec).points
    outcome = run_point(point, tmp_path)
    assert outcome.failed == 0 and outcome.skipped == 0, [r.error for r in outcome.rows]
    (verdict,) = ladder_verdicts(load_results([tmp_path]).rows)
    assert verdict.stages == named, verdict.sentence


def test_a_cached_stage_serves_its_value_as_distinct_objects_in_turn() -> None:
    """A batch of a cached rung holds distinct samples, as a real read makes them: served as one
    object, a per-sample collate sent it between processes once a batch (issue 41)."""
    stage = ladder.sample_dataset("processed_sample", FreeDetection(size=10), distinct=4)
    served = [stage[i] for i in range(5)]
    assert len({id(image) for image, _ in served[:4]}) == 4
    assert served[4] is served[0]  # in turn: the copies are made once, not per item
    assert all(torch.equal(image, served[0][0]) for image, _ in served)
    # Through a DataLoader with torchvision's detection collate: 4 distinct images a batch.
    (images, targets) = next(iter(DataLoader(stage, batch_size=4, collate_fn=keep_samples())))
    assert len({image.data_ptr() for image in images}) == 4
    assert len({id(target["boxes"]) for target in targets}) == 4


@pytest.mark.serial
@pytest.mark.parametrize("collate", ["keep_samples", "stack_images"])
def test_when_worker_ipc_is_the_only_cost_the_ladder_names_it(tmp_path: Path, collate: str) -> None:
    """Issue 41's known answer: a detection-shaped data set whose read and transform are free
    (a deep copy of a premade sample, the identity), one worker, 16 samples a batch: what the
    loader pays is collation and moving 16 images and 32 target tensors between processes. The
    costliest stage is collation and worker IPC, and caching a sample-level stage (which keeps
    that cost) promises nothing above the processed_sample rung's capacity."""
    spec = parse_spec(
        f"name: ipc\nworkload: {{dataset: {P}:free_detection, dataset_args: {{size: 256}}, "
        f"collate: {P}:{collate}, model: emulated, model_args: {{step_ms: 5}}, batch_size: 16, device: cpu}}\n"
        "measure: {warmup_steps: 2, steps: 12, repeats: 3}\n"
        "rungs: [host_batch, processed_sample, raw_sample, full]\nloader: {num_workers: 1}\n"
    )
    (point,) = expand(spec).points
    outcome = run_point(point, tmp_path)
    assert outcome.failed == 0 and outcome.skipped == 0, [r.error for r in outcome.rows]
    (verdict,) = ladder_verdicts(load_results([tmp_path]).rows)
    assert verdict.stages[:1] == ["collation and worker IPC"], verdict.sentence
    # Every sample-level rung pays the IPC, so caching one gives about what full does: the
    # one-object cache promised 8 times full's capacity (174 batches/s against 21).
    capacity = verdict.table.set_index("rung")["capacity"]
    assert verdict.what_if is None or verdict.what_if.capacity < 2 * float(capacity["full"]), verdict.what_if
