from __future__ import annotations

from pathlib import Path

from harness.backends.local import run_local
from harness.config.plan import expand
from harness.config.spec import parse_spec
from harness.storage import layout
from harness.storage import rows as results
from harness.storage.sweep import create_sweep, latest_jobs
from tests.conftest import TINY_WORKLOAD


def test_two_local_tasks_run_a_point_as_two_ddp_ranks(tmp_path: Path) -> None:
    spec = parse_spec("name: local\n" + TINY_WORKLOAD + "slurm: {tasks_per_node: 2, gpus_per_node: 0}\n")
    plan = expand(spec)
    sweep = create_sweep(plan, tmp_path, backend="local", world_size=2)
    assert run_local(plan.points, sweep, spec.slurm) == []
    (point,) = plan.points
    point_path = layout.point_dir(sweep, point.id)
    assert results.point_complete(point_path, ["full"], 1, world_size=2)
    rows = [results.read_rows(point_path / f"rank{k}.csv")[0] for k in (0, 1)]
    assert [(r["rank"], r["world_size"], r["status"]) for r in rows] == [("0", "2", "ok"), ("1", "2", "ok")]
    assert point.id in latest_jobs(sweep)
    # submitit's logs stay in the sweep folder
    assert list((sweep / "local").glob("*/*_log.out"))
