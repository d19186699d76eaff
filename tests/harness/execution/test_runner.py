from __future__ import annotations

import csv
import json
import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from analysis.samples import load_samples
from harness.backends.local import run_local
from harness.config.plan import expand
from harness.config.spec import parse_spec
from harness.execution import runner
from harness.execution.dist import DistEnv
from harness.execution.runner import run_point
from harness.storage.sweep import create_sweep
from harness_schema import rows as results
from harness_schema.atomic import atomic_write_text
from tests.conftest import TINY_WORKLOAD
from tests.fixtures.workloads import read_indices, stuck_pids


def points_of(extra: str, workload: str = TINY_WORKLOAD, measure: str = ""):
    if measure:
        workload = workload.replace("measure: {warmup_steps: 1, steps: 3, repeats: 1}", measure)
    return expand(parse_spec("name: t\n" + workload + extra)).points


def test_a_point_runs_on_workers_and_writes_its_rows_and_meta(tmp_path: Path) -> None:
    (point,) = points_of(
        "loader: {num_workers: 2}\n", measure="measure: {warmup_steps: 1, steps: 3, repeats: 2}"
    )
    outcome = run_point(point, tmp_path, env=DistEnv(hostname="node-a"))
    assert (outcome.ok, outcome.failed) == (2, 0)
    rows = results.read_rows(tmp_path / "points" / point.id / "rank0.csv")
    assert [(r["rung"], r["repeat"], r["status"]) for r in rows] == [("full", "0", "ok"), ("full", "1", "ok")]
    first = rows[0]
    assert first["hostname"] == "node-a" and first["device"] == "cpu"
    assert first["num_workers"] == "2" and first["prefetch_factor"] == "2"
    # 3 steps, or more where the warmup saw the two workers deliver in bursts: the window is then
    # rounded up to whole periods (at most the stock of 4), on a loaded machine too.
    steps = int(first["steps"])
    assert steps in (3, 4) and int(first["samples"]) == steps * 8
    assert float(first["training_time"]) > 0 and float(first["loading_time"]) >= 0
    assert float(first["samples_per_s"]) == steps * 8 / float(first["training_time"])
    assert 0.05 < float(first["cpu_memory_gb"]) < 20
    meta = (tmp_path / "points" / point.id / "meta-rank0.json").read_text()
    assert '"torch_version"' in meta and '"hostname": "node-a"' in meta


def test_a_dataset_that_raises_in_a_worker_gives_failed_rows(tmp_path: Path) -> None:
    workload = TINY_WORKLOAD.replace(
        "dataset: fake_cifar", "dataset: tests.fixtures.workloads:raising_dataset"
    )
    workload = workload.replace("{size: 48, image_size: 8, resize: null}", "{size: 16}")
    (point,) = points_of("loader: {num_workers: 1}\n", workload)
    outcome = run_point(point, tmp_path)
    assert (outcome.ok, outcome.failed) == (0, 1)
    (row,) = results.read_rows(tmp_path / "points" / point.id / "rank0.csv")
    assert row["status"] == "failed"
    assert row["error"].startswith("OSError: Caught OSError in DataLoader worker process 0")
    assert "disk on fire" in row["error"]


def test_a_resumed_point_keeps_its_rows_and_runs_the_rest(tmp_path: Path) -> None:
    (point,) = points_of("", measure="measure: {warmup_steps: 0, steps: 2, repeats: 2}")
    run_point(point, tmp_path)
    path = tmp_path / "points" / point.id / "rank0.csv"
    kept = results.read_rows(path)[0]
    # As if the job had been stopped after the first repeat:
    header, first_row, _second_row = path.read_text().splitlines(keepends=True)
    atomic_write_text(path, header + first_row)
    outcome = run_point(point, tmp_path)
    assert outcome.ok == 1
    rows = results.read_rows(path)
    assert [r["repeat"] for r in rows] == ["0", "1"]
    assert rows[0] == kept


def test_two_ranks_split_the_data_with_a_distributed_sampler(tmp_path: Path) -> None:
    """Two real ranks (the local backend: two processes, DDP over gloo) on 48 samples: each
    reads its own 24 in an epoch, reshuffled at the next, and counts what it trained on."""
    log = tmp_path / "indices"
    log.mkdir()
    workload = TINY_WORKLOAD.replace(
        "dataset: fake_cifar", "dataset: tests.fixtures.workloads:logged_indices"
    )
    workload = workload.replace("{size: 48, image_size: 8, resize: null}", f"{{size: 48, log: {str(log)!r}}}")
    spec = parse_spec("name: split\n" + workload + "slurm: {tasks_per_node: 2, gpus_per_node: 0}\n")
    plan = expand(spec)
    sweep = create_sweep(plan, tmp_path / "results", backend="local", world_size=2)
    assert run_local(plan.points, sweep, spec.slurm) == []
    point_path = sweep / "points" / plan.points[0].id
    rows = [results.read_rows(point_path / f"rank{k}.csv")[0] for k in (0, 1)]
    assert [r["status"] for r in rows] == ["ok", "ok"], [r["error"] for r in rows]
    # 1 warmup step and 3 measured, of 8 samples: an epoch of a rank's 24 samples is 3 steps.
    assert [(r["samples"], r["epoch_steps"], r["epoch_restarts"]) for r in rows] == [("24", "3", "1")] * 2
    read = [read_indices(log / f"job-rank{k}.txt") for k in (0, 1)]
    assert [len(r) for r in read] == [4 * 8, 4 * 8]  # the batches the ranks asked for, no more
    first, second = ([r[:24] for r in read], [r[24:] for r in read])
    assert all(len(set(epoch)) == 24 for epoch in first)  # no sample twice in a rank's epoch
    assert set(first[0]).isdisjoint(first[1]) and set(first[0]) | set(first[1]) == set(range(48))
    assert set(second[0]).isdisjoint(second[1])  # the next epoch is split too
    assert second[0] != first[0][:8]  # and shuffled anew (DistributedSampler.set_epoch)


def test_the_timeline_is_on_disk_after_each_rung_and_a_resumed_run_appends_to_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (point,) = points_of("rungs: [processed_sample, full]\n")
    samples = tmp_path / "points" / point.id / "samples-rank0.csv"
    seen_before_full: list[str] = []
    measure = runner._measure_rung

    def spy(rank: object, rung: str, repeat: int) -> results.RungRow:
        if rung == "full":  # as a rank torn down here would leave it
            seen_before_full.extend(row["phase"] for row in csv.DictReader(samples.open()))
        return measure(rank, rung, repeat)  # type: ignore[arg-type]

    monkeypatch.setattr(runner, "_measure_rung", spy)
    run_point(point, tmp_path)
    assert "processed_sample/0" in seen_before_full and "full/0" not in seen_before_full

    # As if the job had been requeued during its second rung: it runs full again, appending.
    path = tmp_path / "points" / point.id / "rank0.csv"
    header, first_row, _ = path.read_text().splitlines(keepends=True)
    atomic_write_text(path, header + first_row)
    first_run = samples.read_text().splitlines()
    run_point(point, tmp_path)
    assert samples.read_text().splitlines()[: len(first_run)] == first_run
    timeline = load_samples(samples.parent, 0)
    assert timeline is not None and sorted(timeline["run"].unique()) == [0, 1]
    assert "processed_sample/0" not in set(timeline[timeline["run"] == 1]["phase"])
    assert timeline["t"].is_monotonic_increasing


def test_an_emulated_point_steps_on_one_host_thread_and_gives_the_threads_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The emulated accelerator stands in for a GPU step, whose host side is one thread: its
    head must not spin up a thread per core and take the workers' cores."""
    from harness.workloads import emulated

    seen: list[int] = []
    forward = emulated.EmulatedAccelerator.forward

    def spy(self: emulated.EmulatedAccelerator, x: torch.Tensor) -> torch.Tensor:
        seen.append(torch.get_num_threads())
        return forward(self, x)

    monkeypatch.setattr(emulated.EmulatedAccelerator, "forward", spy)
    torch.set_num_threads(2)
    (point,) = points_of(
        "", TINY_WORKLOAD.replace("model: linear", "model: emulated\n  model_args: {step_ms: 1}")
    )
    run_point(point, tmp_path)
    assert seen and set(seen) == {1}
    assert torch.get_num_threads() == 2  # given back to the process (the next inline point)


def test_a_worker_stuck_in_getitem_is_a_failed_row_its_workers_ended_and_the_sweep_goes_on(
    tmp_path: Path,
) -> None:
    """A read that never returns (one index of the data set): after limits.batch_timeout_s
    without a batch, the point's rung is a failed row naming the limit, its worker processes
    are gone (none left to outlive the harness), and the next point is measured."""
    import psutil

    from harness.backends.inline import run_inline

    log = tmp_path / "log"
    log.mkdir()
    workload = TINY_WORKLOAD.replace("dataset: fake_cifar", "dataset: tests.fixtures.workloads:stuck_dataset")
    args = [{"size": 16, "stuck": stuck, "log": str(log)} for stuck in (3, -1)]
    workload = workload.replace("{size: 48, image_size: 8, resize: null}", json.dumps(args))
    points = points_of("loader: {num_workers: 2}\nlimits: {batch_timeout_s: 2}\n", workload)
    stuck, fine = sorted(points, key=lambda p: p.workload.dataset_args["stuck"], reverse=True)
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    outcomes = run_inline([stuck, fine], tmp_path)
    assert [(o.ok, o.failed) for o in outcomes] == [(0, 1), (1, 0)]
    (row,) = results.read_rows(tmp_path / "points" / stuck.id / "rank0.csv")
    assert row["status"] == "failed"
    assert row["error"] == (
        "LoaderTimeout: no batch from the DataLoader for 2 s: a worker stuck in __getitem__? "
        "(a read that never returns; limits.batch_timeout_s in the spec sets the wait, 0 for none)"
    )
    (worker,) = stuck_pids(log)
    assert not psutil.pid_exists(worker)
    assert {p.pid for p in psutil.Process().children(recursive=True)} <= before


def test_a_running_point_says_where_it_is_at_each_interval(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A progress line per interval (30 s; here 0.05 s) while the point runs: which rung and
    repeat, and for how long."""
    from harness.execution import progress

    monkeypatch.setattr(progress, "PROGRESS_S", 0.05)
    workload = TINY_WORKLOAD.replace(
        "model: linear", "model: tests.fixtures.workloads:slow_model\n  model_args: {delay: 0.1}"
    )
    (point,) = points_of("", workload, measure="measure: {warmup_steps: 1, steps: 3, repeats: 2}")
    with caplog.at_level(logging.INFO, logger="harness.execution.progress"):
        run_point(point, tmp_path)
    lines = [r.getMessage() for r in caplog.records if r.name == "harness.execution.progress"]
    assert lines, "no progress line while the point ran"
    pattern = rf"point {point.id} rank 0: rung full, repeat [12]/2, \d+ s into the rung, \d+ s into the point"
    assert all(re.fullmatch(pattern, line) for line in lines), lines
    assert any("repeat 2/2" in line for line in lines)


def test_a_point_run_in_a_pass_says_which_repeat_and_pass_and_its_rows_record_the_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """In the second of three passes a point of 3 repeats measures its repeat 2 (its repeats
    raised to 2, the first done): the line says repeat 2/3 (pass 2 of 3), not 2/2, and the
    row carries the sweep's pass number, which the analysis pairs points by."""
    from dataclasses import replace

    from harness.config.plan import RunPass
    from harness.execution import progress

    monkeypatch.setattr(progress, "PROGRESS_S", 0.05)
    workload = TINY_WORKLOAD.replace(
        "model: linear", "model: tests.fixtures.workloads:slow_model\n  model_args: {delay: 0.1}"
    )
    (point,) = points_of("", workload, measure="measure: {warmup_steps: 1, steps: 3, repeats: 2}")
    point = replace(point, run_pass=RunPass(number=7, k=2, of=3, repeats=3))
    with caplog.at_level(logging.INFO, logger="harness.execution.progress"):
        run_point(point, tmp_path)
    lines = [r.getMessage() for r in caplog.records if r.name == "harness.execution.progress"]
    assert any("rung full, repeat 2/3 (pass 2 of 3), " in line for line in lines), lines
    assert not any("/2" in line for line in lines), lines
    rows = results.read_rows(tmp_path / "points" / point.id / "rank0.csv")
    assert [r["run_pass"] for r in rows] == ["7", "7"]


@pytest.mark.parametrize("length", [None, 16], ids=["no-length", "a-length"])
def test_a_stream_is_never_iterated_in_the_harness_process_so_workers_forked_later_deliver(
    tmp_path: Path, length: int | None
) -> None:
    """MosaicML Streaming's hang: a stream whose iteration starts a thread holding a lock
    (tests/fixtures/pipelines.py:ForkUnsafeStream) is only ever read by the workers. Sizing
    processed_sample's cache for the caching what-if used to take the stream's first sample in
    the rank's own process, after that rung: the workers of the next rung, forked from it,
    inherited the held lock and never delivered (here bounded by limits.batch_timeout_s; with
    no limit, for ever). The worker that made the cached value sizes it (the first sample:
    input_ids of 3 int64 and a label, 32 bytes); a stream without a length leaves the cache
    unsized (empty dataset_samples: the what-if's "not sized" line); one with a length
    (LitData's) gets its samples from its len() (the DataLoader asks it anyway), never from a
    sample read."""
    log = tmp_path / "log"
    log.mkdir()
    spec = parse_spec(
        f"""\
name: fork
workload:
  dataset: tests.fixtures.pipelines:fork_unsafe_stream
  dataset_args: {{log: {json.dumps(str(log))}, length: {json.dumps(length)}}}
  collate: tests.fixtures.pipelines:pad_collate
  model: tests.fixtures.pipelines:tiny_lm
  loss: tests.fixtures.pipelines:output_loss
  batch_size: 2
  device: cpu
measure: {{warmup_steps: 1, steps: 2, repeats: 1, loader_capacity: false}}
rungs: [processed_sample, full]
loader: {{num_workers: 1}}
limits: {{batch_timeout_s: 30}}
"""
    )
    (point,) = expand(spec).points
    outcome = run_point(point, tmp_path)
    rows = results.read_rows(tmp_path / "points" / point.id / "rank0.csv")
    assert [(r["rung"], r["status"], r["error"]) for r in rows] == [
        ("processed_sample", "ok", ""),
        ("full", "ok", ""),
    ]
    assert outcome.failed == 0
    readers = {int(p.name.removeprefix("iterated-")) for p in log.glob("iterated-*")}
    assert os.getpid() not in readers and len(readers) == 2  # one worker per rung
    sizes = [(r["rung"], r["cached_sample_bytes"], r["dataset_samples"], r["dataset_stream"]) for r in rows]
    if length is None:
        assert sizes == [("processed_sample", "32", "", "True"), ("full", "", "", "True")]
    else:
        assert sizes == [("processed_sample", "32", "16", "True"), ("full", "", "16", "True")]


def test_a_stream_whose_workers_never_deliver_is_a_failed_row_naming_the_wait(tmp_path: Path) -> None:
    """The watchdog on a stream: a factory that peeks at its stream in the rank's process
    (ForkUnsafeStream, peek) leaves its lock held there; the worker forked from it never yields.
    After limits.batch_timeout_s the rung is a failed row naming the stream, the likely cause
    and the setting; the worker is ended, and the next point (no peek) is measured."""
    import psutil

    from harness.backends.inline import run_inline

    logs = {peek: tmp_path / f"log-{peek}" for peek in (True, False)}
    args = []
    for peek, log in logs.items():
        log.mkdir()
        args.append({"log": str(log), "peek": peek})
    spec = parse_spec(
        f"""\
name: stuck-stream
workload:
  dataset: tests.fixtures.pipelines:fork_unsafe_stream
  dataset_args: {json.dumps(args)}
  collate: tests.fixtures.pipelines:pad_collate
  model: tests.fixtures.pipelines:tiny_lm
  loss: tests.fixtures.pipelines:output_loss
  batch_size: 2
  device: cpu
measure: {{warmup_steps: 1, steps: 2, repeats: 1}}
rungs: [full]
loader: {{num_workers: 1}}
limits: {{batch_timeout_s: 3}}
"""
    )
    stuck, fine = sorted(expand(spec).points, key=lambda p: p.workload.dataset_args["peek"], reverse=True)
    outcomes = run_inline([stuck, fine], tmp_path)
    assert [(o.ok, o.failed) for o in outcomes] == [(0, 1), (1, 0)]
    (row,) = results.read_rows(tmp_path / "points" / stuck.id / "rank0.csv")
    assert (row["status"], row["error"]) == (
        "failed",
        "LoaderTimeout: no batch from the DataLoader for 3 s: a worker stuck in "
        "tests.fixtures.pipelines.ForkUnsafeStream.__iter__? (a read that never returns, or a lock "
        "the stream's threads held when the workers were forked: a stream read in the parent process "
        "before the fork; limits.batch_timeout_s in the spec sets the wait, 0 for none)",
    )
    workers = [int(p.name.removeprefix("iterated-")) for p in logs[True].glob("iterated-*")]
    workers.remove(os.getpid())  # the peek, in this process
    assert workers and not any(psutil.pid_exists(pid) for pid in workers)


def test_workers_a_stream_leaves_without_a_shard_are_counted_in_the_row_and_said(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A stream of 1 shard read by 2 workers (Hugging Face's to_iterable_dataset default):
    the second worker makes nothing while the row says num_workers=2. The row's idle_workers
    counts it and the log says what it means and the fix; with 2 shards both work."""
    spec = parse_spec(
        """\
name: shards
workload:
  dataset: tests.fixtures.pipelines:sharded_stream
  dataset_args: [{num_shards: 1, per_shard: 64}, {num_shards: 2, per_shard: 64}]
  collate: tests.fixtures.pipelines:pad_collate
  model: tests.fixtures.pipelines:tiny_lm
  loss: tests.fixtures.pipelines:output_loss
  batch_size: 2
  device: cpu
measure: {warmup_steps: 1, steps: 4, repeats: 1}
rungs: [host_batch, full]
loader: {num_workers: 2}
"""
    )
    one, two = sorted(expand(spec).points, key=lambda p: p.workload.dataset_args["num_shards"])
    with caplog.at_level(logging.WARNING, logger="harness.execution.runner"):
        for point in (one, two):
            run_point(point, tmp_path)
    idle = {
        (p.workload.dataset_args["num_shards"], r["rung"]): (r["status"], r["num_workers"], r["idle_workers"])
        for p in (one, two)
        for r in results.read_rows(tmp_path / "points" / p.id / "rank0.csv")
    }
    assert idle == {
        (1, "host_batch"): ("ok", "2", ""),  # one batch, repeated: nothing to count
        (1, "full"): ("ok", "2", "1"),
        (2, "host_batch"): ("ok", "2", ""),
        (2, "full"): ("ok", "2", "0"),
    }
    said = [r.getMessage() for r in caplog.records if "delivered no batch" in r.getMessage()]
    assert said == [
        f"point {one.id}, rung full: 1 of 2 DataLoader workers delivered no batch: the stream has "
        "fewer shards than readers (tests.fixtures.pipelines.ShardedStream has 1 shard), so the "
        "row's num_workers=2 worked as 1; give the stream at least num_workers × ranks shards "
        "(Hugging Face: to_iterable_dataset(num_shards=...); webdataset: more tar files)"
    ]


def test_the_idle_workers_fix_is_the_verdicts_wording(monkeypatch: pytest.MonkeyPatch) -> None:
    """The log's fix and the report's are one text (verdict_text.SHARD_FIX): a change of the
    libraries' advice reaches both (the log had its own copy of the words)."""
    from analysis.ladder import verdict_text
    from tests.fixtures.pipelines import ShardedStream

    monkeypatch.setattr(verdict_text, "SHARD_FIX", "litdata: optimize(chunk_bytes=...)")
    said = runner.idle_text(1, 2, ShardedStream(num_shards=1, per_shard=4))
    assert said.endswith("at least num_workers × ranks shards (litdata: optimize(chunk_bytes=...))")


def test_a_rank_starts_without_the_analysis() -> None:
    """The fix's words come from the analysis only when a warning says them: importing the
    runner (every rank's start) does not bring pandas in."""
    code = "import sys, harness.execution.runner; print('pandas' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def test_a_map_style_dataset_is_read_only_by_the_workers_and_its_cache_still_sized(tmp_path: Path) -> None:
    """The caching what-if's size a sample is taken by the worker that produced the cached
    value: the rank's own process never reads the dataset between rungs (it used to read
    item 0 after processed_sample, opening there what the next rung's workers would inherit)."""
    log = tmp_path / "log"
    log.mkdir()
    workload = TINY_WORKLOAD.replace("dataset: fake_cifar", "dataset: tests.fixtures.workloads:reader_pids")
    workload = workload.replace(
        "{size: 48, image_size: 8, resize: null}", json.dumps({"size": 32, "log": str(log)})
    )
    (point,) = points_of("loader: {num_workers: 1}\nrungs: [processed_sample, full]\n", workload)
    outcome = run_point(point, tmp_path)
    assert outcome.ok == 2
    rows = {r["rung"]: r for r in results.read_rows(tmp_path / "points" / point.id / "rank0.csv")}
    assert rows["processed_sample"]["cached_sample_bytes"] == str(3 * 8 * 8 * 4 + 8)
    assert rows["processed_sample"]["dataset_samples"] == "32"
    readers = {int(p.name.removeprefix("read-")) for p in log.glob("read-*")}
    assert readers and os.getpid() not in readers


def test_a_streams_length_is_its_ranks_share_and_a_map_style_data_sets_the_whole() -> None:
    """A stream that has a length shards itself between ranks and says the rank's share (as
    LitData's and MosaicML Streaming's do, for their DataLoader's len): the data set the
    what-if sizes is that times the ranks; a map-style data set's len() is already the whole
    (the harness's DistributedSampler splits it); a stream without one has no size."""
    from tests.fixtures import pipelines

    assert runner.dataset_samples(pipelines.fork_unsafe_stream(length=16), 2) == 32
    assert runner.dataset_samples(pipelines.paired(8), 2) == 8
    assert runner.dataset_samples(pipelines.plain_stream(8), 2) is None


def test_a_sample_that_cannot_be_read_names_its_file_in_the_row(tmp_path: Path) -> None:
    from harness.workloads.make_data import make_image_folder

    data = tmp_path / "data"
    make_image_folder(data, images=8, classes=2, size=16)
    for image in data.rglob("*.jpg"):
        image.write_bytes(b"torn")  # every file: whichever the sampler reads first
    workload = TINY_WORKLOAD.replace("dataset: fake_cifar", "dataset: image_folder")
    workload = workload.replace("{size: 48, image_size: 8, resize: null}", f"{{root: {data}, image_size: 8}}")
    (point,) = points_of("loader: {num_workers: 1}\n", workload)
    outcome = run_point(point, tmp_path / "sweep")
    assert (outcome.ok, outcome.failed) == (0, 1)
    (row,) = results.read_rows(tmp_path / "sweep" / "points" / point.id / "rank0.csv")
    assert re.search(
        rf"cannot read sample \d+ \({re.escape(str(data))}/class00\d/img\d+\.jpg\): UnidentifiedImageError",
        row["error"],
    ), row["error"]
