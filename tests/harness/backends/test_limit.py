"""A point's wall-clock limit: a point stuck in a DataLoader worker ends at its limit as failed
rows that say so, its workers ended, and never requeued."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from harness.backends.inline import run_inline
from harness.backends.limit import Limit, point_limit
from harness.config.plan import expand
from harness.config.spec import parse_spec
from harness.storage.sweep import create_sweep
from harness_schema import layout
from harness_schema import rows as results

REPO = Path(__file__).resolve().parents[3]

STUCK = """\
name: stuck
workload:
  dataset: "tests.fixtures.hanging:stuck_in_workers"
  model: linear
  batch_size: 4
  device: cpu
loader: {num_workers: 1}
rungs: [processed_sample, full]
measure: {warmup_steps: 1, steps: 3, repeats: 1}
limits: {point_minutes: MINUTES}
slurm: {tasks_per_node: TASKS, gpus_per_node: 0}
"""


def stuck(minutes: float, tasks: int = 1) -> str:
    return STUCK.replace("MINUTES", str(minutes)).replace("TASKS", str(tasks))


def rank_rows(sweep: Path, point_id: str, rank: int) -> list[dict[str, str]]:
    return results.read_rows(layout.rank_file(layout.point_dir(sweep, point_id), rank))


def test_the_limit_comes_from_the_spec_then_slurm_time_then_the_inline_default() -> None:
    (point,) = expand(parse_spec(stuck(0.5))).points
    assert point_limit(point, "00:20:00") == Limit(30, "limits.point_minutes")
    (unset,) = expand(parse_spec(stuck(0.5).replace("limits: {point_minutes: 0.5}\n", ""))).points
    assert point_limit(unset, "00:20:00") == Limit(1200, "slurm.time")
    assert point_limit(unset, None) == Limit(3600, "limits.point_minutes, 60 min inline by default")


def test_a_point_stuck_in_a_worker_ends_at_its_limit_inline_with_its_workers(tmp_path: Path) -> None:
    plan = expand(parse_spec(stuck(0.05)))  # 3 s
    sweep = create_sweep(plan, tmp_path)
    (outcome,) = run_inline(plan.points, sweep)
    point = plan.points[0]
    assert (outcome.ok, outcome.failed) == (0, 2)
    rows = rank_rows(sweep, point.id, 0)
    assert [(r["rung"], r["status"]) for r in rows] == [("processed_sample", "failed"), ("full", "failed")]
    for row in rows:
        assert row["error"] == (
            f"PointTimeout: point {point.id} exceeded its limit of 3 s (limits.point_minutes)"
        )
    assert psutil.Process().children(recursive=True) == []  # the stuck worker was ended


@pytest.mark.serial
def test_a_point_stuck_in_a_worker_under_the_local_backend_fails_on_every_rank_never_requeued(
    tmp_path: Path,
) -> None:
    (tmp_path / "stuck.yaml").write_text(stuck(0.25, tasks=2))  # 15 s: the ranks' start fits in it
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    run = subprocess.run(
        [sys.executable, "-m", "harness", "run", "stuck.yaml", "--backend", "local"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 1, run.stderr
    (sweep,) = (tmp_path / "results" / "stuck").iterdir()
    (point,) = expand(parse_spec(stuck(0.25, tasks=2))).points
    line = f"PointTimeout: point {point.id} exceeded its limit of 15 s (limits.point_minutes)"
    for rank in (0, 1):
        assert [(r["status"], r["error"]) for r in rank_rows(sweep, point.id, rank)] == [("failed", line)] * 2
    logs = "".join(p.read_text() for p in (sweep / "local").rglob("*_log.*"))
    assert "Requeued" not in logs  # submitit's requeue at the time limit: never
    assert "1 of 1 point(s) failed" in run.stderr


@pytest.mark.parametrize("minutes", [0, -1, "soon"])
def test_a_limit_that_is_not_a_positive_number_is_refused(minutes: object) -> None:
    from harness.config.spec import SpecError

    with pytest.raises(SpecError, match=r"limits\.point_minutes.*a number of minutes > 0, or null"):
        parse_spec(stuck(0.5).replace("point_minutes: 0.5", f"point_minutes: {minutes}"))
