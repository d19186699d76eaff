"""The Lightning example: a real lightning.LightningDataModule given through workload.loader,
its hooks called as Lightning's Trainer calls them, the point's settings in its DataLoader, each
rank its own share, and a cost injected in its data set named by the ladder (none where none)."""

from __future__ import annotations

from pathlib import Path

import pytest
from torch.utils.data import DataLoader, Subset

lightning = pytest.importorskip("lightning", reason="the optional extra `libs` (lightning) is not installed")

from harness.examples.lightning_datamodule import ImagesDataModule, make_loader  # noqa: E402
from harness.workloads.loader_factory import train_loader  # noqa: E402
from tests.fixtures.ladder_runs import ladder_run  # noqa: E402


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
    labels = []
    for rank in (0, 1):
        loader = train_loader(make_loader(batch_size=4, rank=rank, world_size=2, size=40))
        indices = list(loader.sampler)
        assert len(indices) == 16
        labels.append({loader.dataset.indices[i] for i in indices})
    assert not labels[0] & labels[1] and len(labels[0] | labels[1]) == 32


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
