from __future__ import annotations

import csv
import json
import logging
import re
from pathlib import Path

import pytest
import torch

from analysis.load import load_samples
from harness.backends.local import run_local
from harness.config.plan import expand
from harness.config.spec import parse_spec
from harness.execution import runner
from harness.execution.dist import DistEnv
from harness.execution.runner import run_point
from harness.storage import rows as results
from harness.storage.atomic import atomic_write_text
from harness.storage.sweep import create_sweep
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
    assert int(first["samples"]) == 3 * 8
    assert float(first["training_time"]) > 0 and float(first["loading_time"]) >= 0
    assert float(first["samples_per_s"]) == 24 / float(first["training_time"])
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


def test_a_long_error_keeps_its_end_where_the_cause_is() -> None:
    from harness.execution.runner import ERROR_CHARS, one_line

    # A gloo error: a long path first, the cause (the peer that left) last.
    error = RuntimeError(
        "[" + "/__w/pytorch/pytorch/third_party/gloo" * 20 + "] Connection closed by peer rank 1"
    )
    text = one_line(error)
    assert len(text) <= ERROR_CHARS + 5
    assert text.startswith("RuntimeError: [/__w/pytorch/pytorch/third_party/gloo")
    assert text.endswith("] Connection closed by peer rank 1") and " ... " in text
    assert one_line(ValueError("short")) == "ValueError: short"
