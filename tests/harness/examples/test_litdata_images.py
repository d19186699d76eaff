"""The LitData pipeline: a data set written with litdata.optimize to a local folder, read back
by a StreamingDataset subclass (every sample once, whatever the workers), with the stream
contract; the ladder names a cost put in its read, and nothing where nothing is put."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
import torch
from torch.utils.data import DataLoader, IterableDataset
from torchvision import tv_tensors

from analysis.load import load_results

pytest.importorskip("litdata", reason="the optional extra `libs` (litdata) is not installed")

from harness.examples.litdata_images import LitImages, make_dataset, write_dataset
from tests.fixtures.ladder_runs import JOBS, ladder_verdict

IMAGES = 48


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """48 small images, each its own class (a label names its sample), in 2 chunks or more."""
    return write_dataset(
        tmp_path_factory.mktemp("litdata"), images=IMAGES, size=32, classes=IMAGES, chunk_bytes="32KB"
    )


def test_the_written_folder_reads_back_as_a_stream_with_a_length(root: Path) -> None:
    assert (root / "index.json").is_file() and len(list(root.glob("chunk-*.bin"))) >= 2
    dataset = make_dataset(root=str(root), crop=16)
    assert isinstance(dataset, IterableDataset) and len(dataset) == IMAGES
    image, label = next(dataset.iter_raw())
    assert isinstance(image, tv_tensors.Image) and image.shape == (3, 32, 32) and image.dtype == torch.uint8
    assert 0 <= label < IMAGES
    out, same = dataset.transform_sample((image, label))
    assert out.shape == (3, 16, 16) and out.dtype == torch.float32 and same == label
    assert all(sample[0].shape == (3, 16, 16) for sample in dataset)


@pytest.mark.parametrize("workers", [0, 2])
def test_every_sample_is_read_once_an_epoch_whatever_the_workers(root: Path, workers: int) -> None:
    loader = DataLoader(make_dataset(root=str(root), crop=16), batch_size=5, num_workers=workers)
    assert Counter(int(label) for _, labels in loader for label in labels) == Counter(range(IMAGES))


def test_raw_iteration_leaves_the_datasets_own_iteration_alone(root: Path) -> None:
    dataset = make_dataset(root=str(root), crop=16, shuffle=False)
    raw = next(dataset.iter_raw())
    assert raw[0].dtype == torch.uint8 and not dataset.raw_only
    assert [label for _, label in dataset] == list(range(IMAGES))


def test_a_folder_without_an_index_says_how_to_write_one(tmp_path: Path) -> None:
    with pytest.raises(
        FileNotFoundError,
        match=r"no LitData index.json under .* \(write a data set with: python -m harness.examples.litdata_images ",
    ):
        LitImages(root=str(tmp_path))


@pytest.mark.serial
@pytest.mark.parametrize(
    ("injected", "named"),
    [("read_ms: 50", ["raw data loading"]), ("read_ms: 0", [])],
    ids=["slow-read", "nothing"],
)
def test_a_cost_injected_is_named_by_the_ladder(
    root: Path, tmp_path: Path, injected: str, named: list[str]
) -> None:
    verdict = ladder_verdict(
        "litdata-cpu.yaml",
        tmp_path,
        f"workload.dataset_args={{root: '{root}', crop: 16, {injected}}}",
        "workload.batch_size=4",
        rungs="[host_batch, raw_sample, full]",  # the read's drop is between raw_sample and full
    )
    assert verdict.stages == named, verdict.sentence


def test_two_local_ranks_each_read_their_own_share_of_the_chunks(tmp_path: Path) -> None:
    """The spec on 2 ranks (`--backend local`, slurm.tasks_per_node 2) with 2 workers each:
    LitData splits the chunks between ranks (from torch.distributed, which the harness
    initialises before it builds the dataset) and workers, so each rank's first epoch is half
    the samples, the halves disjoint and together every sample once."""
    from harness.backends.local import run_local
    from harness.config.plan import expand
    from harness.config.spec import load_spec
    from harness.storage.sweep import create_sweep

    data = write_dataset(tmp_path / "data", images=IMAGES, size=32, classes=IMAGES, chunk_bytes="12KB")
    assert len(list(data.glob("chunk-*.bin"))) >= 4  # a chunk or more for each of the 4 readers
    record = tmp_path / "record"
    record.mkdir()
    spec = load_spec(
        JOBS / "litdata-cpu.yaml",
        overrides=[
            "workload.dataset=tests.fixtures.litdata_record:make_dataset",
            f"workload.dataset_args={{root: '{data}', crop: 16, record: '{record}'}}",
            "workload.batch_size=4",
            "workload.model_args.step_ms=5",
            "loader.num_workers=2",
            "rungs=[full]",
            "measure={warmup_steps: 1, steps: 6}",  # 7 batches: more than a rank's epoch of 6
            "slurm.tasks_per_node=2",
        ],
    )
    plan = expand(spec)
    sweep = create_sweep(plan, tmp_path / "results", backend="local", world_size=2)
    assert run_local(plan.points, sweep, plan.spec.slurm) == []
    rows = load_results([sweep]).rows
    assert list(rows["status"]) == ["ok", "ok"], list(rows["error"])
    assert sorted(rows["rank"]) == [0, 1] and set(rows["epoch_steps"]) == {6}  # 24 samples, 4 a batch
    read: dict[tuple[int, int], list[int]] = {}  # (epoch, rank): the labels read
    for file in record.glob("*.txt"):
        for line in file.read_text().splitlines():
            harness_rank, litdata_rank, epoch, label = line.split()
            assert harness_rank == litdata_rank  # LitData sees the harness's rank
            read.setdefault((int(epoch), int(litdata_rank)), []).append(int(label))
    # The full rung reads several epochs (its warmup waits for the workers' stock): each one
    # told its own number (LitData's count starts at 1, and the second epoch was told 1 too:
    # the first epoch's order read twice, 48 samples a rank under epoch 1).
    epochs = sorted({epoch for epoch, _ in read})
    assert epochs[:2] == [0, 1], sorted(read)
    for epoch in epochs[:-1]:  # the last may be cut short by the end of the window
        mine, theirs = read[epoch, 0], read.get((epoch, 1), [])
        assert len(mine) == len(theirs) == IMAGES // 2, (epoch, mine, theirs)
        assert Counter(mine + theirs) == Counter(range(IMAGES)), epoch  # disjoint, none missing


@pytest.mark.serial
def test_the_caching_what_if_of_a_litdata_stream_is_sized_from_its_length(root: Path, tmp_path: Path) -> None:
    """LitData's StreamingDataset has a length: the what-if sizes the cache of decoded samples
    (48 samples × the bytes the worker that decoded one measured), never reading the stream in
    the rank's process, where a stream without one is "not sized"."""
    from analysis.ladder.caching import size_text
    from tests.fixtures.ladder_runs import ladder_run

    verdict, rows = ladder_run(
        "litdata-cpu.yaml",
        tmp_path,
        f"workload.dataset_args={{root: '{root}', crop: 16, read_ms: 50}}",
        "workload.batch_size=4",
        rungs="[host_batch, raw_sample, full]",
    )
    assert set(rows["dataset_samples"]) == {IMAGES} and set(rows["dataset_stream"]) == {True}
    raw = rows[rows["rung"] == "raw_sample"]["cached_sample_bytes"]
    assert set(raw) == {3 * 32 * 32 + 8}  # a decoded uint8 image and its label
    assert verdict.what_if is not None and verdict.what_if.samples == IMAGES
    assert size_text(verdict.what_if).startswith(f"{IMAGES} samples × 3.1 kB = 147.8 kB; fits in ")
