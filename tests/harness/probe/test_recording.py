"""harness/probe/recording.py: the script's loader recorded and rebuilt with the point's
settings (its own where the spec names none), loaders it built itself or a library gave it, and
the length announced to its loop."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch.utils.data import DataLoader

import harness.probe as probe
from harness.execution.loop_length import batches_per_loop
from tests.harness.probe.common import (
    Numbers,
    pairs,
    rows_of,
    script_point,
)


class ManyNumbers(Numbers):
    """An epoch of 200 samples: 100 batches of 2, more than a short window yields."""

    def __len__(self) -> int:
        return 200


def test_len_of_the_loader_is_the_scripts_epoch_where_that_is_more_than_the_probe_yields(harnessed) -> None:  # type: ignore[no-untyped-def]
    """The contract (probe.loop_length): a print every len(loader) // 10 batches sees the
    epoch's 100 batches (10), not the 13 the loop receives (1: a print at every batch, and 0
    under a 2 + 6 window of one rung, the course's ZeroDivisionError); the loop still gets
    at most len() batches, so a schedule sized by it never steps past its end."""
    job = harnessed(script_point())
    loader = probe.loader(ManyNumbers(), batch_size=2, collate_fn=pairs)
    assert len(loader) == 100
    measured = probe.measure(loader, "cpu", keep_running=True)
    assert len(measured) == 100
    served = list(measured)
    assert len(served) == batches_per_loop(job.point) == 3 * 4 + 1 < len(loader)
    assert [r["status"] for r in rows_of(job)] == ["ok"] * 3


def test_the_loop_length_is_the_longer_of_the_epoch_and_the_batches_yielded() -> None:
    assert probe.loop_length(13, 100) == 100
    assert probe.loop_length(13, 5) == 13  # a tiny data set: the closing batch is the loop's last
    assert probe.loop_length(13, None) == 13  # a stream without len()


def test_settings_the_spec_does_not_name_keep_the_scripts_values(harnessed) -> None:  # type: ignore[no-untyped-def]
    # The spec sweeps num_workers only: the script's drop_last, persistent_workers and
    # prefetch_factor stay as the script has them, and the rows record what ran.
    point = script_point(loader="{num_workers: [1]}", rungs="[full]")
    assert point.script_keeps == (
        "persistent_workers",
        "pin_memory",
        "non_blocking",
        "prefetch_factor",
        "drop_last",
    )
    job = harnessed(point)
    loader = probe.loader(
        Numbers(), batch_size=4, num_workers=3, drop_last=True, persistent_workers=True, prefetch_factor=5
    )
    assert (loader.num_workers, loader.drop_last, loader.persistent_workers, loader.prefetch_factor) == (
        1,
        True,
        True,
        5,
    )
    list(probe.measure(loader, "cpu", keep_running=True))
    (row,) = rows_of(job)
    ran = (
        row["num_workers"],
        row["drop_last"],
        row["persistent_workers"],
        row["prefetch_factor"],
        row["pin_memory"],
    )
    assert ran == ("1", "True", "True", "5", "False")  # pin_memory: the script gave none, PyTorch's default


def test_settings_the_spec_names_replace_the_scripts(harnessed) -> None:  # type: ignore[no-untyped-def]
    point = script_point(loader="{num_workers: 1, drop_last: false, prefetch_factor: 2}", rungs="[full]")
    assert point.script_keeps == ("persistent_workers", "pin_memory", "non_blocking")
    job = harnessed(point)
    loader = probe.loader(Numbers(), batch_size=4, num_workers=3, drop_last=True, prefetch_factor=5)
    assert (loader.num_workers, loader.drop_last, loader.prefetch_factor) == (1, False, 2)
    list(probe.measure(loader, "cpu", non_blocking=True, keep_running=True))
    (row,) = rows_of(job)
    assert (row["drop_last"], row["prefetch_factor"], row["non_blocking"]) == ("False", "2", "True")


def test_a_dataloader_the_script_built_itself_keeps_its_settings_too(harnessed) -> None:  # type: ignore[no-untyped-def]
    job = harnessed(script_point(loader="{num_workers: 0}", rungs="[full]"))
    built = DataLoader(Numbers(), batch_size=4, drop_last=True, collate_fn=pairs)
    served = list(probe.measure(built, "cpu", keep_running=True))
    assert {len(b["y"]) for b in served} == {4}
    (row,) = rows_of(job)
    assert (row["num_workers"], row["drop_last"]) == ("0", "True")


def test_a_dataloader_the_script_built_itself_is_measured_too(harnessed) -> None:  # type: ignore[no-untyped-def]
    job = harnessed(script_point(rungs="[full]"))
    built = DataLoader(Numbers(), batch_size=5, shuffle=True, collate_fn=pairs)
    served = list(probe.measure(built, "cpu", keep_running=True))
    assert len(served) == 4 + 1 and {len(b["y"]) for b in served} == {5}
    (row,) = rows_of(job)
    assert (row["status"], row["samples"], row["batch_size"]) == ("ok", "15", "5")


class Stream(torch.utils.data.IterableDataset):  # type: ignore[type-arg]
    """A stream of 20 samples, as webdataset, HF streaming, Mosaic or LitData give them."""

    def __iter__(self):  # type: ignore[no-untyped-def]
        return ({"x": torch.full((3,), float(i)), "y": i} for i in range(20))


def test_a_dataloader_the_script_built_over_a_stream_is_measured(harnessed) -> None:  # type: ignore[no-untyped-def]
    # PyTorch gives a stream's DataLoader its internal _InfiniteConstantSampler: it was taken
    # for the script's own sampler and every rung failed (issue 27).
    job = harnessed(script_point(loader="{num_workers: 0}", rungs="[host_batch, full]"))
    built = DataLoader(Stream(), batch_size=4)
    served = list(probe.measure(built, "cpu", keep_running=True))
    assert served and {len(b["y"]) for b in served} == {4}
    rows = rows_of(job)
    assert [(r["rung"], r["status"], r["error"]) for r in rows] == [
        ("host_batch", "ok", ""),
        ("full", "ok", ""),
    ]


class OwnLoader(DataLoader):  # type: ignore[type-arg]
    """A DataLoader subclass with a constructor of its own, as litdata's StreamingDataLoader."""

    def __init__(self, dataset: Any, *, batch_size: int, tag: str) -> None:
        super().__init__(dataset, batch_size=batch_size, num_workers=0, drop_last=True, collate_fn=pairs)
        self.tag = tag

    def __iter__(self):  # type: ignore[no-untyped-def]
        for batch in super().__iter__():
            batch["by"] = self.tag
            yield batch


def test_a_dataloader_subclass_is_measured_as_given_and_its_rows_say_so(harnessed, capfd) -> None:  # type: ignore[no-untyped-def]
    # It was replaced by a plain DataLoader (its own __iter__ lost, issue 27); its settings
    # cannot be swapped into its constructor, so its own are measured and recorded.
    job = harnessed(
        script_point(
            loader="{num_workers: 1, drop_last: false}", rungs="[host_batch, processed_sample, full]"
        )
    )
    served = list(probe.measure(OwnLoader(Numbers(), batch_size=3, tag="own"), "cpu", keep_running=True))
    assert served and all(b["by"] in ("own", "mine") for b in served)
    assert any(b["by"] == "own" for b in served)
    rows = rows_of(job)
    assert [(r["rung"], r["status"]) for r in rows] == [
        ("host_batch", "ok"),
        ("processed_sample", "ok"),
        ("full", "ok"),
    ]
    assert {(r["num_workers"], r["drop_last"], r["batch_size"], r["loader_given"]) for r in rows} == {
        ("0", "True", "3", "tests.harness.probe.test_recording.OwnLoader")
    }
    assert (
        "measured as given: tests.harness.probe.test_recording.OwnLoader is not torch's DataLoader"
        in capfd.readouterr().err
    )


class VariableBatches:
    """A batch sampler of the script's own that says no batch size (batches of 2, then 3)."""

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter([[0, 1], [2, 3, 4], [5, 6], [7, 8, 9]])

    def __len__(self) -> int:
        return 4


@pytest.mark.parametrize(
    ("batch_sampler", "recorded", "said"),
    [
        (
            lambda: torch.utils.data.BatchSampler(torch.utils.data.SequentialSampler(range(10)), 3, False),
            "3",
            "3",
        ),
        (VariableBatches, "", "None"),
    ],
    ids=["torch-batch-sampler", "no-batch-size"],
)
def test_a_batch_samplers_batch_size_is_what_the_rows_and_the_log_say(  # type: ignore[no-untyped-def]
    harnessed, capfd, batch_sampler, recorded: str, said: str
) -> None:
    """Session 11: a script's batch_sampler left batch_size 0 in the rows where its log line said
    None. Now both say the batch sampler's own batch_size, and an empty cell (None) where it
    says none."""
    job = harnessed(script_point(loader="{num_workers: 0}", rungs="[host_batch, full]"))
    loader = probe.loader(Numbers(), batch_size=None, batch_sampler=batch_sampler(), collate_fn=pairs)
    list(probe.measure(loader, "cpu", keep_running=True))
    assert {r["batch_size"] for r in rows_of(job)} == {recorded}
    assert f"drop_last=False, batch_size={said}" in capfd.readouterr().err


def test_accelerates_prepared_loader_is_measured_as_probe_loaders_and_says_its_length(
    harnessed, capfd
) -> None:  # type: ignore[no-untyped-def]
    """Hugging Face Accelerate's `accelerator.prepare(probe.loader(...))` re-makes the loader (a
    DataLoaderShard). It was measured as a loader of its own: its processed_sample rung failed
    (KeyError: 0: its batch_size is None, its batch sampler's is the one), its rows had no
    batch size, and its len() was not the batches the loop receives (Accelerate's scripts size
    max_train_steps by it after prepare). Now it is measured as probe.loader's loader, and its
    len() is the probe's number."""
    accelerate = pytest.importorskip("accelerate", reason="the libs extra (pip install -e .[libs])")
    job = harnessed(script_point(loader="{num_workers: 1}", rungs="[host_batch, processed_sample, full]"))
    loader = probe.loader(Numbers(), batch_size=2, shuffle=True, num_workers=3, collate_fn=pairs)
    prepared = accelerate.Accelerator(cpu=True).prepare(loader)
    assert type(prepared).__name__ == "DataLoaderShard"
    assert len(prepared) == len(loader)
    served = list(probe.measure(prepared, "cpu", keep_running=True))
    assert len(served) == len(loader)
    rows = rows_of(job)
    assert [(r["rung"], r["status"], r["samples"], r["batch_size"], r["num_workers"]) for r in rows] == [
        ("host_batch", "ok", "6", "2", "1"),
        ("processed_sample", "ok", "6", "2", "1"),
        ("full", "ok", "6", "2", "1"),
    ]
    err = capfd.readouterr().err
    assert "measured as given" not in err and "len(loader) says" not in err


@pytest.mark.parametrize("own", ["sampler", "batch_sampler"])
def test_a_prepared_loader_with_the_scripts_own_sampler_reads_the_ranks_share(harnessed, own: str) -> None:  # type: ignore[no-untyped-def]
    """`accelerator.prepare` shards the loader's batches between the ranks (its
    BatchSamplerShard) whatever sampler the script gave (transformers' Trainer gives a
    RandomSampler of its own). The rungs rebuilt the loader with the script's sampler as it was,
    so every rank read the whole data set under the harness (an epoch of 5 batches, not 3, on
    each of 2 ranks). Now each rung reads the share the prepared loader gives this rank. The
    shard is made here as on rank 1 of 2 (the job itself is one process)."""
    accelerate = pytest.importorskip("accelerate", reason="the libs extra (pip install -e .[libs])")
    from accelerate.data_loader import prepare_data_loader
    from torch.utils.data import BatchSampler, SequentialSampler

    job = harnessed(script_point(loader="{num_workers: 0}", rungs="[processed_sample, full]"))
    ordered = SequentialSampler(range(10))
    mine: dict[str, Any] = (
        {"batch_size": 2, "sampler": ordered}
        if own == "sampler"
        else {"batch_size": None, "batch_sampler": BatchSampler(ordered, 2, drop_last=False)}
    )
    loader = probe.loader(Numbers(), collate_fn=pairs, **mine)
    accelerate.PartialState(cpu=True)
    prepared = prepare_data_loader(loader, num_processes=2, process_index=1, put_on_device=False)
    served = list(probe.measure(prepared, "cpu", keep_running=True))
    rows = rows_of(job)
    assert [(r["rung"], r["status"], r["epoch_steps"]) for r in rows] == [
        ("processed_sample", "ok", "3"),
        ("full", "ok", "3"),
    ]
    # Of the batches [0, 1] [2, 3] [4, 5] [6, 7] [8, 9], rank 1 reads the 2nd and the 4th, then
    # the 1st again (Accelerate's even_batches evens the shares): never rank 0's [4, 5], [8, 9].
    read = {tuple(b["y"].tolist()) for b in served}
    assert {(2, 3), (6, 7)} <= read and not {(4, 5), (8, 9)} & read


def test_a_prepared_loader_of_the_scripts_own_dataloader_is_measured_as_given(harnessed) -> None:  # type: ignore[no-untyped-def]
    """`accelerator.prepare(DataLoader(...))`: a loader the probe did not make, measured as
    given; its batch size is its batch sampler's (it failed with KeyError: 0 at processed_sample)."""
    accelerate = pytest.importorskip("accelerate", reason="the libs extra (pip install -e .[libs])")
    job = harnessed(script_point(loader="{num_workers: 0}", rungs="[processed_sample, full]"))
    prepared = accelerate.Accelerator(cpu=True).prepare(DataLoader(Numbers(), batch_size=2, collate_fn=pairs))
    list(probe.measure(prepared, "cpu", keep_running=True))
    rows = rows_of(job)
    assert [(r["rung"], r["status"], r["batch_size"], r["error"]) for r in rows] == [
        ("processed_sample", "ok", "2", ""),
        ("full", "ok", "2", ""),
    ]


class Batches:
    """A loader of its own (torchdata.nodes' Loader, a DALI iterator): an iterable of batches,
    no DataLoader, no .dataset."""

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(
            [pairs([(torch.full((3,), float(i)), i) for i in range(k, k + 4)]) for k in range(0, 20, 4)]
        )


class Module:
    """A LightningDataModule's shape: prepare_data, setup(stage), train_dataloader()."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def prepare_data(self) -> None:
        self.calls.append("prepare_data")

    def setup(self, stage: str) -> None:
        self.calls.append(f"setup:{stage}")

    def train_dataloader(self) -> Batches:
        self.calls.append("train_dataloader")
        return Batches()


@pytest.mark.parametrize("kind", ["loader", "datamodule"])
def test_a_loader_of_its_own_or_a_datamodule_is_measured_whole(harnessed, kind: str) -> None:  # type: ignore[no-untyped-def]
    job = harnessed(script_point(loader="{num_workers: 2}", rungs="[host_batch, raw_sample, full]"))
    module = Module()
    source = Batches() if kind == "loader" else module
    served = list(probe.measure(source, "cpu", keep_running=True))
    assert served and {len(b["y"]) for b in served} == {4}
    rows = rows_of(job)
    assert [(r["rung"], r["status"]) for r in rows] == [
        ("host_batch", "ok"),
        ("raw_sample", "skipped"),
        ("full", "ok"),
    ]
    assert "tests.harness.probe.test_recording.Batches exposes none" in rows[1]["error"]
    # Nothing of the point's num_workers reached it: the rows do not claim it.
    assert {(r["num_workers"], r["loader_given"]) for r in rows} == {
        ("", "tests.harness.probe.test_recording.Batches")
    }
    if kind == "datamodule":
        assert module.calls == ["prepare_data", "setup:fit", "train_dataloader"]


def test_a_webloader_is_measured_as_given_with_its_dataloaders_settings_and_batch_size(  # type: ignore[no-untyped-def]
    harnessed, capfd, caplog
) -> None:
    """OpenCLIP's loop reads a webdataset WebLoader (a DataPipeline whose first stage is the
    DataLoader; its workers batch, so the DataLoader's batch_size is None): its rows and its log
    line said num_workers=None and batch_size=None, and the probe said "len(loader) says None
    batches". Now they are its DataLoader's settings and its pipeline's batch size, and the
    missing len() is said as such."""
    from tests.fixtures.loaders import web_loader

    job = harnessed(script_point(loader="{num_workers: 0}", rungs="[host_batch, processed_sample, full]"))
    served = list(probe.measure(web_loader(batch_size=4, workers=1), "cpu", keep_running=True))
    assert served and {len(y) for _, y in served} == {4}
    rows = rows_of(job)
    assert [(r["rung"], r["status"]) for r in rows] == [
        ("host_batch", "ok"),
        ("processed_sample", "skipped"),
        ("full", "ok"),
    ]
    assert {(r["num_workers"], r["persistent_workers"], r["batch_size"]) for r in rows} == {
        ("1", "True", "4")
    }
    # Each step's 4 samples counted. The window is 3 steps, or 4 where the warmup saw the one
    # worker deliver in bursts of 2 (a busy machine): windows run in whole delivery periods.
    measured = [(int(r["steps"]), int(r["samples"])) for r in rows if r["status"] == "ok"]
    assert all(steps in (3, 4) and samples == 4 * steps for steps, samples in measured), measured
    err = capfd.readouterr().err
    assert "num_workers=1, persistent_workers=True, " in err
    assert "batch_size=4 (measured as given: webdataset.compat.WebLoader is not torch's DataLoader" in err
    said = [r.getMessage() for r in caplog.records]
    assert any("the loader has no len() (a stream); the probe yields" in m for m in said), said
