"""The Lightning example: a real lightning.LightningDataModule given through workload.loader,
its hooks called as Lightning's Trainer calls them, the point's settings in its DataLoader, each
rank its own share, and a cost injected in its data set named by the ladder (none where none)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from torch.utils.data import DataLoader, DistributedSampler, RandomSampler, Subset

lightning = pytest.importorskip("lightning", reason="the optional extra `libs` (lightning) is not installed")

from harness.examples.lightning_datamodule import ImagesDataModule, make_loader  # noqa: E402
from harness.workloads.loader_factory import train_loader  # noqa: E402
from tests.fixtures.ladder_runs import JOBS, ladder_run  # noqa: E402


def test_the_factory_makes_a_datamodule_whose_train_loader_has_the_points_settings() -> None:
    module = make_loader(batch_size=8, num_workers=2, persistent_workers=True, prefetch_factor=3, size=40)
    assert isinstance(module, lightning.LightningDataModule) and isinstance(module, ImagesDataModule)
    loader = train_loader(module)  # prepare_data(), setup("fit"), train_dataloader()
    assert module.prepared and isinstance(loader, DataLoader) and isinstance(loader.dataset, Subset)
    assert (loader.batch_size, loader.num_workers, loader.persistent_workers, loader.prefetch_factor) == (
        8,
        2,
        True,
        3,
    )
    assert len(loader.dataset) == 32  # 40 less the validation fifth


def test_each_rank_reads_its_own_share_of_the_training_split() -> None:
    """The example's loader says shuffle=True and no sampler, as a DataModule for Lightning
    does: on one rank it is kept; on 2, each rank's is re-made with a DistributedSampler, as
    Lightning's Trainer does, its settings kept."""
    alone = train_loader(make_loader(batch_size=4, size=40))
    assert isinstance(alone.sampler, RandomSampler)
    labels = []
    for rank in (0, 1):
        loader = train_loader(make_loader(batch_size=4, num_workers=1, size=40), rank=rank, world_size=2)
        assert isinstance(loader.sampler, DistributedSampler) and (loader.batch_size, loader.num_workers) == (
            4,
            1,
        )
        indices = list(loader.sampler)
        assert len(indices) == 16
        labels.append({loader.dataset.indices[i] for i in indices})
    assert not labels[0] & labels[1] and len(labels[0] | labels[1]) == 32


@pytest.mark.serial
@pytest.mark.parametrize(
    ("injected", "named"),
    [
        # 50 ms a sample read, 4 a batch, on the training thread: 200 ms a batch against a step of
        # 100 ms, between raw_sample (read once, cached) and full (the DataModule's own loader,
        # which the verdict does not claim to split beyond the harness's cut).
        ("read_ms: 50", ["raw data loading + the loader's own work (the loader as given, not split)"]),
        ("read_ms: 0", []),
    ],
    ids=["slow-read", "nothing"],
)
def test_a_cost_injected_in_its_data_set_is_named_by_the_ladder(
    tmp_path: Path, injected: str, named: list[str]
) -> None:
    verdict, rows = ladder_run(
        "lightning_datamodule-cpu.yaml",
        tmp_path,
        f"workload.loader_args={{size: 64, {injected}}}",
        "workload.batch_size=4",
        rungs="[host_batch, raw_sample, full]",  # the read's drop is between raw_sample and full
    )
    assert verdict.stages == named, verdict.sentence
    # Every rung measured (the Subset cut as its data set), the DataModule's loader named.
    assert set(rows["rung"]) == {"full", "host_batch", "raw_sample"}
    assert set(rows["loader_given"]) == {"torch.utils.data.dataloader.DataLoader"}


def _two_ranks(tmp_path: Path, *, sampler: str) -> tuple[dict[int, list[int]], list[str]]:
    """The spec on 2 local ranks with the recording DataModule (tests/fixtures/lightning_record.py,
    40 images, 32 for training, 4 a batch), its full rung over 2 epochs: each rank's reads in
    order (no workers: the rank's own process reads), and the rows' loader_given."""
    from analysis.load import load_results
    from harness.backends.local import run_local
    from harness.config.plan import expand
    from harness.config.spec import load_spec
    from harness.storage.sweep import create_sweep

    record = tmp_path / "record"
    record.mkdir()
    spec = load_spec(
        JOBS / "lightning_datamodule-cpu.yaml",
        overrides=[
            "workload.loader=tests.fixtures.lightning_record:make_loader",
            f"workload.loader_args={{record: '{record}', own_sampler: {str(sampler == 'own').lower()}, "
            f"custom_sampler: {str(sampler == 'custom').lower()}}}",
            "workload.batch_size=4",
            "workload.model_args.step_ms=5",
            "loader={num_workers: 0}",
            "rungs=[full]",
            "measure={warmup_steps: 1, steps: 10}",  # 11 batches: over 2 epochs of a rank's 4
            "slurm.tasks_per_node=2",
        ],
    )
    plan = expand(spec)
    sweep = create_sweep(plan, tmp_path / "results", backend="local", world_size=2)
    assert run_local(plan.points, sweep, plan.spec.slurm) == []
    rows = load_results([sweep]).rows
    assert list(rows["status"]) == ["ok", "ok"], list(rows["error"])
    assert set(rows["epoch_steps"]) == {4}, list(rows["epoch_steps"])  # 16 samples a rank (not 32), 4 a batch
    read: dict[int, list[int]] = {}
    for file in record.glob("*.txt"):
        for line in file.read_text().splitlines():
            rank, index = line.split()
            read.setdefault(int(rank), []).append(int(index))
    return read, sorted(set(rows["loader_given"]))


@pytest.mark.parametrize(
    "sampler", ["plain", "own", "custom"], ids=["plain-loader", "own-distributed-sampler", "custom-sampler"]
)
def test_two_local_ranks_each_read_their_half_once_an_epoch(tmp_path: Path, sampler: str) -> None:
    """On 2 ranks each rank reads its half of the training split each epoch, the halves
    disjoint and together every sample once, reshuffled at the next epoch (set_epoch): the
    plain loader's sampler re-made as Lightning's Trainer does (the rows say so), a sampler of
    the user's own class wrapped as the Trainer wraps it (DistributedSamplerWrapper), a loader
    with a DistributedSampler of its own kept as it is. (The old harness gave each rank the
    plain loader, and the custom sampler's, whole: 32 samples a rank an epoch, every one read
    twice.)"""
    read, given = _two_ranks(tmp_path, sampler=sampler)
    assert sorted(read) == [0, 1]
    epochs = [[read[rank][e * 16 : (e + 1) * 16] for rank in (0, 1)] for e in range(2)]
    for mine, theirs in epochs:
        assert len(mine) == len(theirs) == 16
        both = Counter(mine + theirs)
        assert len(both) == 32 and set(both.values()) == {1}, both  # disjoint, none missing
    assert epochs[0][0] != epochs[1][0]  # set_epoch reshuffled
    if sampler == "own":
        assert given == ["torch.utils.data.dataloader.DataLoader"]
    else:
        wrapped = "DistributedSamplerWrapper" if sampler == "custom" else "DistributedSampler"
        assert given == [
            f"torch.utils.data.dataloader.DataLoader, re-made with a {wrapped} over 2 ranks "
            "as Lightning's Trainer does"
        ]


def test_under_probe_a_datamodule_on_rank_1_of_2_reads_its_half() -> None:
    """A script's DataModule given to probe.measure gets the same re-made loader, the rank and
    world size the probe's job runs with."""
    from types import SimpleNamespace

    from harness.probe import recording

    job = SimpleNamespace(env=SimpleNamespace(rank=1, world_size=2))
    given = recording.given(make_loader(batch_size=4, size=40), job)  # type: ignore[arg-type]
    assert given is not None and isinstance(given.loader.sampler, DistributedSampler)
    assert (given.loader.sampler.rank, given.loader.sampler.num_replicas, len(given.loader)) == (1, 2, 4)
