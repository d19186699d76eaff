from __future__ import annotations

import csv
from pathlib import Path

import pytest

from analysis.load import load_samples
from harness.config.plan import expand
from harness.config.spec import parse_spec
from harness.execution import runner
from harness.execution.dist import DistEnv
from harness.execution.runner import run_point
from harness.storage import rows as results
from harness.storage.atomic import atomic_write_text
from tests.conftest import TINY_WORKLOAD


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
    (point,) = points_of("")
    for rank in (0, 1):
        run_point(point, tmp_path, env=DistEnv(rank=rank, world_size=2, hostname="n1"))
    assert results.point_complete(tmp_path / "points" / point.id, ["full"], 1, world_size=2)


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
