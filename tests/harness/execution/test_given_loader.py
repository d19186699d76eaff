"""The rungs of a loader the harness did not build: workload.loader's factory, through run_point."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from harness.config.plan import Point, expand
from harness.config.spec import parse_spec
from harness.execution.dataloader import Placement
from harness.execution.dist import DistEnv
from harness.execution.given_loader import build_stream, from_factory
from harness.execution.loader_stream import LoaderStream
from harness.execution.runner import run_point
from harness_schema import layout
from harness_schema import rows as results

F = "tests.fixtures.loaders"
ROOT = Path(__file__).resolve().parents[3]


def point(
    workload: str, loader: str = "{num_workers: 0}", rungs: str = "[host_batch, processed_sample, full]"
) -> Point:
    spec = parse_spec(
        f"name: g\nworkload: {{{workload}, model: linear, device: cpu, batch_size: 4}}\n"
        f"measure: {{warmup_steps: 1, steps: 3}}\nrungs: {rungs}\nloader: {loader}\n"
    )
    (only,) = expand(spec).points
    return only


def rows(tmp_path: Path, p: Point) -> list[dict[str, str]]:
    outcome = run_point(p, tmp_path, env=DistEnv(hostname="node-a"))
    assert outcome.failed == 0, [r.error for r in outcome.rows]
    return results.read_rows(layout.rank_file(layout.point_dir(tmp_path, p.id), 0))


def test_a_factorys_dataloader_gets_the_points_settings_and_serves_every_rung(tmp_path: Path) -> None:
    p = point(
        f"loader: '{F}:dataloader', loader_args: {{size: 24}}", loader="{num_workers: 1, drop_last: true}"
    )
    got = rows(tmp_path, p)
    assert [(r["rung"], r["status"]) for r in got] == [
        ("host_batch", "ok"),
        ("processed_sample", "ok"),
        ("full", "ok"),
    ]
    # The three settings it takes are the point's; the two it does not are its DataLoader's own.
    assert {
        (r["num_workers"], r["drop_last"], r["prefetch_factor"], r["persistent_workers"]) for r in got
    } == {("1", "True", "2", "False")}
    assert {r["loader_given"] for r in got} == {"torch.utils.data.dataloader.DataLoader"}
    assert got[-1]["epoch_steps"] == "6"  # 24 samples, batches of 4: its own length


def test_settings_a_factory_does_not_take_are_recorded_as_its_loader_has_them(tmp_path: Path) -> None:
    # The point says num_workers 0; the factory's DataLoader runs 1 worker: the rows say 1.
    p = point(f"loader: '{F}:fixed_workers', dataset: '{F}:squares'", rungs="[full]")
    (row,) = rows(tmp_path, p)
    assert (row["status"], row["num_workers"], row["prefetch_factor"]) == ("ok", "1", "2")


def test_a_wrapper_around_a_dataloader_serves_the_sample_rungs_through_itself(tmp_path: Path) -> None:
    """timm's PrefetchLoader shape: a loader of its own holding a DataLoader in `.loader`, which
    makes uint8 batches that the wrapper normalises. The sample-level rungs fed the step the
    DataLoader's uint8 batches (timm's script died: expected scalar type Byte but found Float),
    and the rows had no settings (the wrapper has none). Now the cached stages pass through a
    copy of the wrapper, and the settings are its DataLoader's."""
    got = rows(tmp_path, point(f"loader: '{F}:prefetching'"))
    assert [(r["rung"], r["status"]) for r in got] == [
        ("host_batch", "ok"),
        ("processed_sample", "ok"),
        ("full", "ok"),
    ]
    # Its DataLoader's own (1 worker, drop_last), not the point's 0 that the factory did not take.
    assert {(r["num_workers"], r["drop_last"], r["loader_given"]) for r in got} == {
        ("1", "True", "tests.fixtures.loaders.Prefetching")
    }


def test_a_webloaders_rows_record_its_dataloaders_settings_and_refuse_the_sample_rungs(
    tmp_path: Path,
) -> None:
    """webdataset's WebLoader (OpenCLIP's loader) is a DataPipeline whose first stage is the
    DataLoader, not a DataLoader: its rows had no settings at all (num_workers empty, so the
    recommendation could not tell its points apart), and the sample-level rungs said it exposes
    no dataset. Now the settings are its DataLoader's, and the refusal names the stream it reads."""
    got = rows(tmp_path, point(f"loader: '{F}:web_loader'"))
    assert [(r["rung"], r["status"]) for r in got] == [
        ("host_batch", "ok"),
        ("processed_sample", "skipped"),
        ("full", "ok"),
    ]
    # Its DataLoader's own (1 worker, persistent), not the point's 0 that the factory did not take.
    assert {
        (r["num_workers"], r["persistent_workers"], r["prefetch_factor"], r["loader_given"]) for r in got
    } == {("1", "True", "2", "webdataset.compat.WebLoader")}
    assert got[1]["error"] == (
        "rung processed_sample needs a map-style dataset, whose samples it caches by index; "
        f"{F}:web_loader's webdataset.compat.WebLoader's DataLoader reads a stream (webdataset.pipeline.DataPipeline, an "
        "IterableDataset): the harness cannot cut its pipeline (device_batch, host_batch and full "
        "measure it whole)"
    )
    assert {r["samples"] for r in got if r["status"] == "ok"} == {str(3 * 4)}  # 3 steps of 4


def test_the_sample_rungs_start_and_order_their_workers_as_the_given_loader_does(tmp_path: Path) -> None:
    """The cached stages' DataLoader kept only the given one's worker_init_fn: a script's
    spawned workers (a dataset that cannot be forked) were forked at the sample rungs, and its
    out-of-order delivery made in order, so the drop between rungs carried the difference."""
    p = point(f"loader: '{F}:spawning'", loader="{num_workers: 1}", rungs="[processed_sample]")
    cpu = Placement(device=torch.device("cpu"))
    given = from_factory(p, cpu, None)
    stream = build_stream("processed_sample", given, 4, cpu)
    assert isinstance(stream, LoaderStream)
    assert stream.loader.multiprocessing_context.get_start_method() == "spawn"
    assert stream.loader.in_order is False
    # And the spawned workers unpickle the cached stage: the rung measures (in a process of its
    # own: spawning starts multiprocessing's resource tracker, which would outlive the test).
    code = (
        "import sys; from pathlib import Path; from tests.harness.execution import test_given_loader as t\n"
        "p = t.point(sys.argv[2], loader='{num_workers: 1}', rungs='[processed_sample]')\n"
        "(row,) = t.rows(Path(sys.argv[1]), p)\n"
        "print(row['rung'], row['status'], row['num_workers'])\n"
    )
    args = [sys.executable, "-c", code, str(tmp_path), f"loader: '{F}:spawning'"]
    done = subprocess.run(args, capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.stdout.split() == ["processed_sample", "ok", "1"], done.stderr[-2000:]


def test_a_datamodule_is_asked_for_its_train_dataloader_and_the_sample_rungs_are_skipped(
    tmp_path: Path,
) -> None:
    got = rows(tmp_path, point(f"loader: '{F}:datamodule'"))
    assert [(r["rung"], r["status"]) for r in got] == [
        ("host_batch", "ok"),
        ("processed_sample", "skipped"),
        ("full", "ok"),
    ]
    assert got[1]["error"] == (
        f"rung processed_sample needs the loader's map-style dataset (.dataset, as a torch DataLoader has); "
        f"{F}:datamodule's list exposes none: the harness cannot cut its pipeline (device_batch, host_batch "
        "and full measure it whole)"
    )
    assert got[2]["epoch_steps"] == "5"


def test_a_factory_that_makes_no_loader_fails_the_point_saying_so(tmp_path: Path) -> None:
    p = point(f"loader: '{F}:not_a_loader'", rungs="[full]")
    outcome = run_point(p, tmp_path, env=DistEnv(hostname="node-a"))
    (row,) = outcome.rows
    assert row.status == "failed"
    assert (
        "the loader factory returned int, which is not iterable (no __iter__) and has no train_dataloader()"
        in row.error
    )


def test_a_factorys_workers_are_not_counted_so_its_rows_leave_idle_workers_empty(tmp_path: Path) -> None:
    """A factory's DataLoader over a stream of 1 shard with 2 workers: one idles, but its
    collate is the factory's, not the harness's counting one, so the rows cannot say so (empty,
    never a 0 that would read as "all worked"); the plan's note (harness/config/stream_shards.py)
    is what tells, where loader_args gives the shards."""
    spec = parse_spec(
        f"name: g\nworkload: {{loader: '{F}:stream', loader_args: {{num_shards: 1}}, "
        "model: 'tests.fixtures.pipelines:tiny_lm', loss: 'tests.fixtures.pipelines:output_loss', "
        "device: cpu, batch_size: 2}\nmeasure: {warmup_steps: 1, steps: 3}\nrungs: [full]\n"
        "loader: {num_workers: 2}\n"
    )
    (p,) = expand(spec).points
    assert any("loader_args.num_shards" in note for note in expand(spec).notes)
    (row,) = rows(tmp_path, p)
    assert (row["status"], row["num_workers"], row["idle_workers"]) == ("ok", "2", "")


@pytest.mark.parametrize("factory", ["stuck_loader", "stuck_wrapped_loader"])
def test_a_worker_stuck_in_a_factorys_own_dataloader_is_a_loader_timeout_and_ends(
    tmp_path: Path, factory: str
) -> None:
    """The factory's DataLoader has no timeout of its own: limits.batch_timeout_s bounds each
    wait for its workers as it bounds the harness's own loaders (before: the rank waited to the
    point's limit, an hour inline, and the row said PointTimeout, not where it was stuck). A
    DataLoader inside a loader of its own (timm's PrefetchLoader, webdataset's WebLoader) too:
    before, it still waited to the point's limit."""
    import psutil

    from harness.backends.limit import point_limit, run_limited

    spec = parse_spec(
        f"name: g\nworkload: {{loader: 'tests.fixtures.hanging:{factory}', model: linear, device: cpu,"
        " batch_size: 4}\nmeasure: {warmup_steps: 1, steps: 3}\nrungs: [host_batch, full]\n"
        "limits: {batch_timeout_s: 2, point_minutes: 0.5}\n"
    )
    (p,) = expand(spec).points
    outcome = run_limited(p, tmp_path, DistEnv(hostname="node-a"), point_limit(p, None), timer=True)
    line = (
        "LoaderTimeout: no batch from the DataLoader for 2 s: a worker stuck in __getitem__? (a read that "
        "never returns; limits.batch_timeout_s in the spec sets the wait, 0 for none)"
    )
    assert [(r.rung, r.status, r.error) for r in outcome.rows] == [
        ("host_batch", "failed", line),
        ("full", "failed", line),
    ]
    assert psutil.Process().children(recursive=True) == []  # the stuck workers were ended


def test_a_factory_without_rank_on_two_ranks_gives_each_the_whole_data_set_and_the_rows_say_so(
    tmp_path: Path,
) -> None:
    """A factory that takes neither rank nor world_size returns the same plain DataLoader on
    each rank: the harness keeps it (nothing says a Trainer would re-make it), so each rank
    reads all 24 samples an epoch (6 batches, not 3). The plan says so before the run, and the
    rows after it (the old rows named the class alone)."""
    from harness.backends.local import run_local
    from harness.plan_table import plan_text
    from harness.storage.sweep import create_sweep

    spec = parse_spec(
        f"name: g\nworkload: {{loader: '{F}:dataloader', loader_args: {{size: 24}}, model: linear, "
        "device: cpu, batch_size: 4}\nmeasure: {warmup_steps: 1, steps: 3}\nrungs: [full]\n"
        "loader: {num_workers: 0}\n"
        "slurm: {nodes: 1, gpus_per_node: 0, tasks_per_node: 2, cpus_per_task: 1}\n"
    )
    plan = expand(spec)
    assert (
        f"note: {F}:dataloader takes neither rank nor world_size, and the spec runs 2 ranks "
        "(slurm.nodes × slurm.tasks_per_node, on Slurm and with --backend local; an inline run has "
        "one): unless its loader splits the data by rank itself"
    ) in plan_text(plan, [], tmp_path, "terminal")
    # Session 11: an inline sweep of this spec (one rank a point) recorded the note too.
    inline = create_sweep(plan, tmp_path / "inline", backend="inline", world_size=1)
    assert not any("takes neither rank" in n for n in json.loads((inline / "plan.json").read_text())["notes"])
    sweep = create_sweep(plan, tmp_path / "results", backend="local", world_size=2)
    assert any("takes neither rank" in n for n in json.loads((sweep / "plan.json").read_text())["notes"])
    assert run_local(plan.points, sweep, plan.spec.slurm) == []
    (only,) = plan.points
    got = [results.read_rows(layout.rank_file(layout.point_dir(sweep, only.id), k))[0] for k in (0, 1)]
    assert [(r["status"], r["epoch_steps"]) for r in got] == [("ok", "6"), ("ok", "6")]
    assert {r["loader_given"] for r in got} == {
        "torch.utils.data.dataloader.DataLoader, not split by rank: each of 2 ranks read the whole data set"
    }
