"""What a submitted job runs on each task: one point, requeued with the same point at its time
limit, with as many threads as the task has cores, and a clear error without PyTorch. The job on
real Slurm ranks: tests/slurm/; on local subprocesses: test_local.py."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import submitit
import torch

from harness.backends.job import PointJob
from harness.config.plan import Point, expand
from harness.config.spec import parse_spec
from harness.extras import MissingExtra
from harness_schema import layout
from harness_schema import rows as results
from harness_schema.atomic import atomic_write_text
from tests.conftest import TINY_WORKLOAD


def two_rung_point() -> Point:
    (point,) = expand(parse_spec("name: job\n" + TINY_WORKLOAD + "rungs: [processed_sample, full]\n")).points
    return point


def test_a_job_runs_its_point_on_this_task_and_says_how_it_went(tmp_path: Path) -> None:
    point = two_rung_point()
    outcome = PointJob(str(tmp_path))(point.to_json())  # no submitit, no torchrun: one rank
    assert outcome == {"point_id": point.id, "rank": 0, "ok": 2, "failed": 0}
    rows = results.read_rows(layout.rank_file(layout.point_dir(tmp_path, point.id), 0))
    assert [(r["rung"], r["status"]) for r in rows] == [("processed_sample", "ok"), ("full", "ok")]


def test_a_checkpointed_job_is_requeued_with_its_point_and_goes_on_where_it_stopped(
    tmp_path: Path,
) -> None:
    point = two_rung_point()
    job = PointJob(str(tmp_path))
    # What submitit calls when it checkpoints a job (a preemption): the same job, the same point.
    # A point past its own time limit is not requeued: harness/backends/limit.py ends it with
    # failed rows (tests/harness/backends/test_limit.py).
    requeued = job.checkpoint(point.to_json())
    assert isinstance(requeued, submitit.helpers.DelayedSubmission)
    assert requeued.function is job and requeued.args == (point.to_json(),)
    job(point.to_json())
    path = layout.rank_file(layout.point_dir(tmp_path, point.id), 0)
    header, first, _ = path.read_text().splitlines(keepends=True)
    atomic_write_text(path, header + first)  # stopped after its first rung
    kept = results.read_rows(path)[0]
    assert requeued.function(*requeued.args) == {"point_id": point.id, "rank": 0, "ok": 1, "failed": 0}
    rows = results.read_rows(path)
    assert [r["rung"] for r in rows] == ["processed_sample", "full"] and rows[0] == kept


@pytest.fixture
def torch_threads() -> object:
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def test_a_job_uses_as_many_threads_as_its_task_has_cores(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, torch_threads: object
) -> None:
    monkeypatch.setenv("SLURM_CPUS_PER_TASK", "1")
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    torch.set_num_threads(2)
    PointJob(str(tmp_path))(two_rung_point().to_json())
    assert torch.get_num_threads() == 1


def test_a_users_omp_num_threads_is_left_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, torch_threads: object
) -> None:
    monkeypatch.setenv("SLURM_CPUS_PER_TASK", "1")
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    torch.set_num_threads(2)
    PointJob(str(tmp_path))(two_rung_point().to_json())
    assert torch.get_num_threads() == 2


def test_a_job_on_a_node_without_pytorch_says_which_extra_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    point = two_rung_point()
    monkeypatch.setitem(sys.modules, "torch", None)  # as if torch were not installed
    with pytest.raises(
        MissingExtra,
        match=r"^a submitted job needs PyTorch: pip install 'pipeline-harness\[run\]' "
        r"\(or load your cluster's PyTorch module first\)$",
    ):
        PointJob(str(tmp_path))(point.to_json())
    assert not (tmp_path / "points").exists()  # refused before anything ran
