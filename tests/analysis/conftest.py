from __future__ import annotations

from pathlib import Path

import pytest

from harness import results
from harness.dist import DistEnv
from harness.plan import expand
from harness.runner import run_point
from harness.spec import parse_spec
from harness.sweep import create_sweep
from tests.conftest import TINY_WORKLOAD


@pytest.fixture(scope="session")
def real_sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A sweep measured by the harness itself: 3 points, on two "nodes"."""
    spec = parse_spec("name: grid\n" + TINY_WORKLOAD + "loader: {num_workers: [0, 1, 2]}\n")
    plan = expand(spec)
    sweep = create_sweep(plan, tmp_path_factory.mktemp("results"))
    for point in plan.points:
        for host in ("node-b", "node-a"):
            # Same point, another node: a sweep folder gathered from two machines.
            run_point(point, sweep, env=DistEnv(hostname=host), skip_done=False)
            (sweep / "points" / point.id / "rank0.csv").rename(
                sweep / "points" / point.id / f"rank0-{host}.csv"
            )
    for point in plan.points:
        for host in ("node-a", "node-b"):
            target = sweep / "points" / point.id / ("rank0.csv" if host == "node-a" else "rank1.csv")
            (sweep / "points" / point.id / f"rank0-{host}.csv").rename(target)
    return sweep


def synthetic_row(**values: object) -> results.RungRow:
    """A row as the runner writes it, with chosen numbers (for aggregation rules)."""
    base: dict[str, object] = {c: "" for c in results.ROW_COLUMNS}
    base.update(
        sweep_id="s",
        point_id="p1",
        point_index=0,
        rung="full",
        repeat=0,
        rank=0,
        world_size=1,
        hostname="n1",
        device="cpu",
        status="ok",
        dataset="fake_cifar",
        model="linear",
        batch_size=8,
        amp="false",
        compile=False,
        num_workers=2,
        persistent_workers=False,
        pin_memory=False,
        non_blocking=False,
        prefetch_factor=2,
        drop_last=False,
        warmup_steps=1,
        steps=10,
        samples=80,
        first_step_loading_time=0.5,
        loading_time=0.01,
        loading_time_median=0.01,
        loading_time_total=0.1,
        step_time=0.1,
        step_time_median=0.1,
        training_time=1.0,
        samples_per_s=80.0,
        steps_per_s=10.0,
        cpu_memory_gb=1.0,
    )
    base.update(values)
    return results.RungRow(**base)  # type: ignore[arg-type]
