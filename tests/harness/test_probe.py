"""harness.probe: alone, the script's own DataLoader and its batches on the device with one
line at exit; under the harness (HARNESS_PROBE set, here in this process), the point's rungs
through runner.measure_point from the script's own loop."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.utils.data import DataLoader, Dataset, TensorDataset

import harness.probe as probe
from harness.config.plan import Point, expand
from harness.config.spec import parse_spec
from harness.execution.dist import DistEnv
from harness.execution.loop import Clocked
from harness.execution.loop_length import batches_per_loop
from harness.execution.script import PROBE_VARIABLE, ProbeJob
from harness_schema import layout
from harness_schema import rows as results

SCRIPT = Path(__file__).resolve().parents[1] / "fixtures" / "probe_script.py"


class Numbers(Dataset[tuple[torch.Tensor, int]]):
    def __len__(self) -> int:
        return 10

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        return torch.full((3,), float(index)), index


def pairs(samples: list[tuple[torch.Tensor, int]]) -> dict[str, Any]:
    """A collate of the script's own: a dict batch with a note of who made it."""
    return {
        "x": torch.stack([s[0] for s in samples]),
        "y": torch.tensor([s[1] for s in samples]),
        "by": "mine",
    }


# --- alone ---------------------------------------------------------------------------------


def test_alone_the_loader_is_the_scripts_own_dataloader() -> None:
    loader = probe.loader(Numbers(), batch_size=4, num_workers=0, drop_last=True, collate_fn=pairs)
    assert isinstance(loader, DataLoader)
    assert (loader.batch_size, loader.drop_last, loader.collate_fn) == (4, True, pairs)


def test_alone_measure_yields_the_loaders_batches_for_the_passes_asked() -> None:
    loader = DataLoader(Numbers(), batch_size=4)
    plain = [b[0].tolist() for b in loader]
    assert [b[0].tolist() for b in probe.measure(loader, "cpu")] == plain
    assert [b[0].tolist() for b in probe.measure(loader, "cpu", epochs=2)] == plain + plain
    assert [b[0].tolist() for b in probe.measure(loader, "cpu", epochs=2, steps=4)] == (plain + plain)[:4]
    with pytest.raises(ValueError, match=r"epochs and steps must be >= 1 \(got epochs=0, steps=None\)"):
        probe.measure(loader, "cpu", epochs=0)


def test_the_summary_line_is_the_courses_chronometer() -> None:
    def step(next_s: float, copy_s: float, total_s: float, first: bool = False) -> Clocked:
        return Clocked(next_s=next_s, copy_s=copy_s, total_s=total_s, samples=8, new_epoch=first)

    steps = [step(0.5, 0.0, 0.6, first=True), step(0.02, 0.01, 0.1), step(0.04, 0.01, 0.1)]
    assert probe.summary(steps) == (
        "harness.probe: 3 steps, 24 samples in 0.8 s (30.0 samples/s); loading_time 0.0400 s/step "
        "(next() + copy, 40% of a step); first batch of a pass 0.50 s"
    )
    assert probe.summary([]) == "harness.probe: no batch"


def test_alone_a_script_prints_one_line_at_exit_whatever_its_passes(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(
        textwrap.dedent(
            """\
            import torch
            import harness.probe as probe
            loader = probe.loader(list(range(12)), batch_size=4)
            for epoch in range(2):
                for batch in probe.measure(loader, "cpu"):
                    torch.zeros(1)
            print("trained")
            """
        )
    )
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, check=True)
    assert done.stdout == "trained\n"
    (line,) = done.stderr.splitlines()
    assert line.startswith("harness.probe: 6 steps, 24 samples in ")


# --- under the harness, in this process ----------------------------------------------------


def script_point(loader: str = "{num_workers: 0}", rungs: str = "[device_batch, host_batch, full]") -> Point:
    spec = parse_spec(
        f"name: p\nworkload: {{script: {SCRIPT}}}\nmeasure: {{warmup_steps: 1, steps: 3, repeats: 1}}\n"
        f"rungs: {rungs}\nloader: {loader}\n"
    )
    (point,) = expand(spec).points
    return point


@pytest.fixture
def harnessed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """HARNESS_PROBE set for `point`, as the job sets it for the script's process."""

    def set_job(point: Point, check: bool = False, world_size: int = 1) -> ProbeJob:
        job = ProbeJob(
            sweep_dir=tmp_path / "sweep",
            point=point,
            env=DistEnv(hostname="node-a", world_size=world_size, local_world_size=world_size),
            skip_done=True,
            script=SCRIPT,
            report_path=tmp_path / "report",
            check=check,
        )
        monkeypatch.setenv(PROBE_VARIABLE, job.to_json())
        monkeypatch.setattr(probe, "_measured_here", False)
        monkeypatch.setattr(probe, "_state", {"device": None, "given": None})
        return job

    return set_job


def milestones(job: ProbeJob) -> list[str]:
    """What the probe told the job, but the settings it ran with."""
    assert job.report_path is not None
    return [w for w in job.report_path.read_text().split() if not w.startswith("settings:")]


def rows_of(job: ProbeJob) -> list[dict[str, str]]:
    return results.read_rows(layout.rank_file(layout.point_dir(job.sweep_dir, job.point.id), 0))


def test_under_the_harness_the_scripts_loop_runs_every_rung_with_the_points_loader(harnessed) -> None:  # type: ignore[no-untyped-def]
    job = harnessed(script_point())
    loader = probe.loader(Numbers(), batch_size=2, num_workers=3, collate_fn=pairs)
    assert (loader.num_workers, loader.batch_size, loader.collate_fn) == (0, 2, pairs)  # the point's workers
    served = list(probe.measure(loader, "cpu", epochs=5, keep_running=True))
    # Three rungs of 1 warmup and 3 measured steps (no workers, no stock), whatever epochs says,
    # and the untimed batch that closes the loop: as many as len(loader) said.
    assert len(served) == 3 * 4 + 1 == len(loader)
    assert all(b["by"] == "mine" and b["x"].shape == (2, 3) for b in served)
    rows = rows_of(job)
    assert [(r["rung"], r["status"], r["samples"], r["batch_size"]) for r in rows] == [
        ("device_batch", "ok", "6", "2"),
        ("host_batch", "ok", "6", "2"),
        ("full", "ok", "6", "2"),
    ]
    assert milestones(job) == ["reached", "done"]
    # keep_running: the point is measured, the next epoch ends at once.
    assert list(probe.measure(loader, "cpu", keep_running=True)) == []


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
        ("0", "True", "3", "tests.harness.test_probe.OwnLoader")
    }
    assert (
        "measured as given: tests.harness.test_probe.OwnLoader is not torch's DataLoader"
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
    assert "tests.harness.test_probe.Batches exposes none" in rows[1]["error"]
    # Nothing of the point's num_workers reached it: the rows do not claim it.
    assert {(r["num_workers"], r["loader_given"]) for r in rows} == {("", "tests.harness.test_probe.Batches")}
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
    assert {r["samples"] for r in rows if r["status"] == "ok"} == {"12"}  # 3 steps of 4
    err = capfd.readouterr().err
    assert "num_workers=1, persistent_workers=True, " in err
    assert "batch_size=4 (measured as given: webdataset.compat.WebLoader is not torch's DataLoader" in err
    said = [r.getMessage() for r in caplog.records]
    assert any("the loader has no len() (a stream); the probe yields" in m for m in said), said


def test_a_loop_that_breaks_tells_the_job_how_far_it_got(harnessed) -> None:  # type: ignore[no-untyped-def]
    job = harnessed(script_point(rungs="[host_batch, full]"))
    loader = probe.loader(Numbers(), batch_size=2)
    for n, _ in enumerate(probe.measure(loader, "cpu")):
        if n == 5:  # in full's warmup: host_batch has its row, full has none
            break
    assert [r["rung"] for r in rows_of(job)] == ["host_batch"]
    assert milestones(job) == ["reached", "left:6"]


def test_the_plans_check_run_builds_the_points_loader_and_goes_on_to_the_loop(harnessed) -> None:  # type: ignore[no-untyped-def]
    """It stops at probe.measure (os._exit: tests/harness/execution/test_script.py runs it),
    so that the loaders the script builds after probe.loader are checked too."""
    job = harnessed(script_point("{num_workers: 0, drop_last: true}"), check=True)
    loader = probe.loader(Numbers(), batch_size=2)
    assert loader.drop_last is True  # the point's settings, as the point's run builds it
    assert milestones(job)[0] == "reached"
    assert not job.sweep_dir.exists()  # nothing measured, nothing written


# --- real scripts' loops, run as the harness runs them (a subprocess per rank) ------------------

COURSE = Path(__file__).resolve().parents[1] / "fixtures" / "course_loop.py"
LADDER = "[device_batch, host_batch, processed_sample, raw_sample, full]"


def course_point(
    out: Path,
    *args: str,
    loader: str = "{num_workers: 1}",
    rungs: str = LADDER,
    repeats: int = 3,
    steps: int = 3,
) -> Point:
    spec = parse_spec(
        f"name: course\nworkload: {{script: {COURSE}, args: {['--out', str(out), *args]}}}\n"
        f"measure: {{warmup_steps: 1, steps: {steps}, repeats: {repeats}}}\nrungs: {rungs}\nloader: {loader}\n"
    )
    (point,) = expand(spec).points
    return point


def test_a_script_sized_by_len_loader_runs_the_whole_ladder_and_stops_after_its_point(tmp_path: Path) -> None:
    from harness.execution.runner import run_point

    out = tmp_path / "out"
    out.mkdir()
    point = course_point(out)
    outcome = run_point(point, tmp_path / "sweep", env=DistEnv(hostname="node-a"))
    rows = results.read_rows(layout.rank_file(layout.point_dir(tmp_path / "sweep", point.id), 0))
    # OneCycleLR(total_steps=len(loader) * epochs) held: every rung of every repeat is ok.
    assert (outcome.ok, outcome.failed) == (15, 0), [r["error"] for r in rows]
    # The end-of-epoch validation ran once, on the loop's last batch (the untimed closing one),
    # its checkpoint was written, and the script went no further: no second epoch, no code
    # after its loop.
    last = batches_per_loop(point) - 1
    assert (out / "validations-rank0").read_text() == f"0 {last}\n"
    assert (out / "checkpoint-rank0.pt").is_file()
    assert not (out / "after-loop-rank0").exists()
    # What the script's probe.settings() said is what every row records.
    said = json.loads((out / "settings-rank0.json").read_text())
    assert said == {
        "batch_size": 4,
        "num_workers": 1,  # the point's, in place of the script's 3
        "persistent_workers": False,
        "pin_memory": True,  # the script's own: the spec does not name it
        "non_blocking": True,
        "prefetch_factor": 2,
        "drop_last": False,
    }
    for row in rows:
        assert {k: row[k] for k in said} == {k: str(v) for k, v in said.items()}


def test_the_failed_rows_of_a_script_that_died_record_the_settings_it_ran_with(tmp_path: Path) -> None:
    from harness.execution.runner import run_point

    point = course_point(tmp_path, "--crash-at", "2", "--no-non-blocking", rungs="[full]", repeats=2)
    assert run_point(point, tmp_path / "sweep").failed == 2
    rows = results.read_rows(layout.rank_file(layout.point_dir(tmp_path / "sweep", point.id), 0))
    # The script's batch size, pin_memory and non_blocking, the point's num_workers: as an ok
    # row would say, not the spec's defaults.
    ran = [(r["status"], r["batch_size"], r["num_workers"], r["pin_memory"], r["non_blocking"]) for r in rows]
    assert ran == [("failed", "4", "1", "True", "False")] * 2


def test_a_script_that_spawns_its_own_ranks_is_refused_in_one_line(tmp_path: Path) -> None:
    from harness.execution.runner import run_point

    point = course_point(tmp_path, "--multiprocessing-distributed", rungs="[host_batch, full]", repeats=1)
    assert run_point(point, tmp_path / "sweep").failed == 2
    rows = results.read_rows(layout.rank_file(layout.point_dir(tmp_path / "sweep", point.id), 0))
    assert {r["error"] for r in rows} == {
        "harness.probe: this process was started by the script (mp.spawn or multiprocessing), not by "
        "the harness: under the harness every rank is a process the harness starts with torchrun's "
        "variables (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT; LOCAL_RANK for the device): launch no "
        "ranks yourself (no mp.spawn, no --multiprocessing-distributed) and join with "
        "init_method='env://' (or probe.init_distributed())"
    }
    assert not (tmp_path / "checkpoint-rank0.pt").exists()  # refused before it trained


def test_a_process_group_of_the_scripts_own_size_is_refused(harnessed, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    import torch.distributed as dist

    from harness.execution.script import free_port

    job = harnessed(script_point(rungs="[full]"), world_size=2)
    # The script's own tcp:// group of one, where the point runs two ranks.
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{free_port()}", world_size=1, rank=0)
    try:
        with pytest.raises(SystemExit) as stopped:
            probe.loader(Numbers(), batch_size=2)
    finally:
        dist.destroy_process_group()
    assert stopped.value.code == 2
    (row,) = rows_of(job)
    assert row["status"] == "failed" and row["error"].startswith(
        "harness.probe: the script's process group has 1 rank(s) (this one 0) where the point runs 2 "
        "(this one 0): under the harness every rank is a process the harness starts"
    )


def test_untimed_work_is_left_out_of_the_window(harnessed) -> None:  # type: ignore[no-untyped-def]
    job = harnessed(script_point(rungs="[host_batch]"))
    loader = probe.loader(Numbers(), batch_size=2)
    for _ in probe.measure(loader, "cpu", keep_running=True):
        with probe.untimed():
            time.sleep(0.3)  # a validation at every step: 0.9 s inside the window's 3 steps
    (row,) = rows_of(job)
    assert row["status"] == "ok" and float(row["training_time"]) < 0.3


def test_the_scripts_own_copy_is_timed_as_loading(harnessed) -> None:  # type: ignore[no-untyped-def]
    job = harnessed(script_point(rungs="[host_batch]"))
    asked: list[bool] = []

    def course_copy(batch: Any, *, non_blocking: bool) -> Any:
        asked.append(non_blocking)
        time.sleep(0.05)
        return batch["x"].to("cpu", non_blocking=non_blocking), batch["y"]

    loader = probe.loader(Numbers(), batch_size=2, collate_fn=pairs)
    served = list(probe.measure(loader, "cpu", copy=course_copy, non_blocking=True, keep_running=True))
    assert all(isinstance(b, tuple) for b in served) and set(asked) == {True}
    (row,) = rows_of(job)
    assert float(row["loading_time"]) >= 0.05  # the copy's 50 ms are loading, as the course counts


def test_a_memory_format_is_given_to_the_images_copy(harnessed) -> None:  # type: ignore[no-untyped-def]
    harnessed(script_point(rungs="[full]"))
    images = TensorDataset(torch.rand(8, 3, 4, 4), torch.arange(8))
    loader = probe.loader(images, batch_size=2)
    served = list(probe.measure(loader, "cpu", memory_format=torch.channels_last, keep_running=True))
    assert all(x.is_contiguous(memory_format=torch.channels_last) and y.dim() == 1 for x, y in served)


def test_the_script_ends_when_its_loop_asks_past_the_point(harnessed) -> None:  # type: ignore[no-untyped-def]
    job = harnessed(script_point(rungs="[host_batch, full]"))
    loader = probe.loader(Numbers(), batch_size=2)
    taken = 0
    with pytest.raises(SystemExit) as ended:
        for _ in probe.measure(loader, "cpu"):
            taken += 1
    assert ended.value.code == 0 and taken == len(loader) == 2 * 4 + 1
    assert [r["status"] for r in rows_of(job)] == ["ok", "ok"]  # written before the end
    assert milestones(job) == ["reached", "done"]


def test_settings_are_the_points_under_the_harness_and_the_scripts_alone(harnessed) -> None:  # type: ignore[no-untyped-def]
    mine = {"num_workers": 3, "pin_memory": True, "non_blocking": False, "batch_size": 8}
    alone = probe.settings(**mine)
    assert (alone.num_workers, alone.pin_memory, alone.non_blocking, alone.batch_size) == (3, True, False, 8)
    harnessed(script_point(loader="{num_workers: 1, prefetch_factor: 4}", rungs="[full]"))
    probe._state["given"] = None  # a fresh process: the settings given alone are not this one's
    ran = probe.settings(**mine)
    assert (ran.num_workers, ran.prefetch_factor, ran.pin_memory, ran.non_blocking, ran.batch_size) == (
        1,
        4,
        True,
        False,
        8,
    )
    assert ran.dataloader() == {
        "num_workers": 1,
        "persistent_workers": False,
        "pin_memory": True,
        "prefetch_factor": 4,
        "drop_last": False,
    }
    with pytest.raises(
        TypeError, match=r"probe.settings: unknown setting\(s\) workers; allowed: num_workers, .*, batch_size"
    ):
        probe.settings(workers=2)


def test_ddp_ranks_get_as_many_batches_each_and_stop_together(tmp_path: Path) -> None:
    """Two local DDP ranks (an all-reduce in every step, untimed batches included): the ranks
    stay in step to the closing batch, validate there, and end."""
    from analysis.load import load_results
    from harness.backends.local import run_local
    from harness.storage.sweep import create_sweep

    out = tmp_path / "out"
    out.mkdir()
    spec = parse_spec(
        f"name: ddp\nworkload: {{script: {COURSE}, args: [--out, '{out}', --ddp]}}\n"
        f"measure: {{warmup_steps: 1, steps: 3, repeats: 1}}\nrungs: {LADDER}\n"
        "loader: {num_workers: 1}\nslurm: {tasks_per_node: 2, gpus_per_node: 0}\n"
    )
    plan = expand(spec)
    sweep = create_sweep(plan, tmp_path / "results", backend="local", world_size=2)
    assert run_local(plan.points, sweep, spec.slurm) == []
    rows = load_results([sweep]).rows
    assert set(rows["status"]) == {"ok"} and len(rows) == 2 * 5
    last = batches_per_loop(plan.points[0]) - 1
    assert [(out / f"validations-rank{r}").read_text() for r in (0, 1)] == [f"0 {last}\n"] * 2
    assert not list(out.glob("after-loop-rank*"))


# --- known costs injected into such a script: the ladder's verdict names them --------------------


@pytest.mark.serial
@pytest.mark.parametrize(
    ("injected", "rungs", "named"),
    [
        # Per sample 50 ms of reading (4 a batch, no workers): 200 ms a batch against a step of
        # 100 ms of sleep (a GPU's step: the thread blocked, no core used). The raw samples
        # served from memory cost nothing: the drop lands between raw_sample and full.
        (("--read-ms", "50"), "[host_batch, raw_sample, full]", ["raw data loading"]),
        # The same cost in the transform: the drop lands between processed_sample and raw_sample.
        (("--transform-ms", "50"), "[host_batch, processed_sample, raw_sample, full]", ["transforms"]),
        # Nothing injected: a torch.load of a 200-byte tensor and a normalisation per sample,
        # about 1 % of the step (a 50 ms step read a real 5 % drop once, on a busy CI machine).
        ((), "[host_batch, processed_sample, raw_sample, full]", []),
    ],
    ids=["slow-read", "slow-transform", "nothing"],
)
def test_a_cost_injected_into_a_real_shaped_script_is_named_by_the_ladder(
    tmp_path: Path, injected: tuple[str, ...], rungs: str, named: list[str]
) -> None:
    """Issue 25's criterion: a script with an LR schedule sized by len(loader), end-of-epoch
    validation and a checkpoint, measured under the ladder with 3 repeats: every row is ok, and
    the verdict names the stage where the cost was put (and none where none was)."""
    from analysis.ladder.verdict import ladder_verdicts
    from analysis.load import load_results
    from harness.execution.runner import run_point

    out = tmp_path / "out"
    out.mkdir()
    args = ("--step-ms", "100", "--num-workers", "0", *injected)
    point = course_point(out, *args, loader="{num_workers: 0}", rungs=rungs, repeats=3, steps=6)
    outcome = run_point(point, tmp_path / "sweep", env=DistEnv(hostname="node-a"))
    assert outcome.failed == 0 and outcome.skipped == 0, [r.error for r in outcome.rows]
    (verdict,) = ladder_verdicts(load_results([tmp_path / "sweep"]).rows)
    assert verdict.stages == named, verdict.sentence
    assert (out / "checkpoint-rank0.pt").is_file() and not (out / "after-loop-rank0").exists()


@pytest.mark.serial
def test_an_auto_window_runs_in_the_scripts_own_loop(harnessed, caplog) -> None:  # type: ignore[no-untyped-def]
    """measure.steps: auto under the probe: the script's loop gets batches until each rung's
    window is precise (or at its most), more than len(loader) announced (its least), and says so."""
    spec = parse_spec(
        f"name: p\nworkload: {{script: {SCRIPT}}}\nrungs: [host_batch, full]\nloader: {{num_workers: 0}}\n"
        "measure: {warmup_steps: 1, steps: auto, seconds: 0.05, max_seconds: 2, repeats: 1}\n"
    )
    (point,) = expand(spec).points
    job = harnessed(point)
    loader = probe.loader(Numbers(), batch_size=2, collate_fn=pairs)
    assert len(loader) == 2 * (1 + 40) + 1  # the least: 5 blocks of 8 steps a rung
    with caplog.at_level("WARNING", logger="harness.probe"):
        served = []
        for batch in probe.measure(loader, "cpu", keep_running=True):
            served.append(batch)
            time.sleep(0.002)  # the script's train step
    rows = rows_of(job)
    assert [(r["rung"], r["status"]) for r in rows] == [("host_batch", "ok"), ("full", "ok")]
    assert all(float(r["window_rse"]) <= 0.02 for r in rows)
    assert all(int(r["steps"]) >= 40 and r["window_rse"] for r in rows)
    # What the loop got, and what len(loader) had said.
    assert len(served) > len(loader)
    assert (
        f"harness.probe: {len(served)} batches yielded where {len(loader)} were announced" in caplog.messages
    )


# --- a loop wrapped in a progress logger that asks len() ---------------------------------------


def test_alone_measure_says_its_length_to_a_logger_that_asks(tmp_path: Path) -> None:
    from tests.fixtures.metric_logger import MetricLogger, train_one_epoch

    loader = DataLoader(Numbers(), batch_size=4)  # 3 batches a pass
    assert len(probe.measure(loader, "cpu")) == 3
    assert len(probe.measure(loader, "cpu", epochs=2)) == 6
    assert len(probe.measure(loader, "cpu", epochs=2, steps=4)) == 4
    logger = MetricLogger()
    assert train_one_epoch(probe.measure(loader, "cpu", epochs=2), logger, print_freq=10) == 6
    assert logger.lines[-1].startswith("Epoch: [0] [5/6]")  # its last batch is where it says
    stream = (torch.zeros(2) for _ in range(3))
    with pytest.raises(TypeError, match=r"len\(\) of probe.measure\(...\): its loader has no len\(\)"):
        len(probe.measure(stream, "cpu"))


def test_under_the_harness_measure_says_the_batches_it_yields_to_a_logger_that_asks(harnessed) -> None:  # type: ignore[no-untyped-def]
    from tests.fixtures.metric_logger import MetricLogger, train_one_epoch

    job = harnessed(script_point())
    loader = probe.loader(Numbers(), batch_size=2)
    measured = probe.measure(loader, "cpu", keep_running=True)
    assert len(measured) == len(loader) == 3 * 4 + 1
    logger = MetricLogger()
    assert train_one_epoch(measured, logger, print_freq=100) == len(loader)
    assert logger.lines[-1].startswith(f"Epoch: [0] [{len(loader) - 1}/{len(loader)}]")
    assert [(r["rung"], r["status"]) for r in rows_of(job)] == [
        ("device_batch", "ok"),
        ("host_batch", "ok"),
        ("full", "ok"),
    ]
    assert len(probe.measure(loader, "cpu", keep_running=True)) == 0  # the point is measured


def test_under_the_harness_a_generator_around_the_loader_is_refused_in_one_line(harnessed, capfd) -> None:  # type: ignore[no-untyped-def]
    # Before: device_batch and host_batch took its first batches, and full failed with "the
    # loader generator yields no batch": the generator had been read.
    from tests.fixtures.metric_logger import MetricLogger

    job = harnessed(script_point())
    loader = DataLoader(Numbers(), batch_size=2)
    with pytest.raises(SystemExit) as ended:
        probe.measure(MetricLogger().log_every(loader, 10), "cpu")
    assert ended.value.code == 2
    line = capfd.readouterr().err.strip().splitlines()[-1]
    assert line.startswith("harness.probe: the loader is a generator, an iterator that can be read once")
    assert [(r["rung"], r["status"], r["error"]) for r in rows_of(job)] == [
        (rung, "failed", line) for rung in ("device_batch", "host_batch", "full")
    ]


@pytest.mark.parametrize("value", ['{"sweep_dir": "/tmp/x", "poi', '{"sweep_dir": "/tmp/x"}', "[1, 2]"])
def test_a_torn_harness_probe_variable_is_one_line_and_exit_2_never_a_traceback(value: str) -> None:
    """The variable decides where the probe writes: one that is not the harness's (torn,
    hand-set) is said in one line, where a JSONDecodeError's traceback was."""
    repo = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", "import harness.probe"],
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(repo), PROBE_VARIABLE: value},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(
        "harness.probe: HARNESS_PROBE is set but is not a point the harness gave this process ("
    )
    assert line.endswith("the harness sets it for a script it runs: unset it to run the script alone")
